//! Long-running background tasks of `wakebridge serve`. Each task is a module with a
//! `run(.., shutdown: CancellationToken)` future that returns when shutdown is requested.

pub mod context_monitor;
pub mod nudger;
pub mod prune;
pub mod registration;
