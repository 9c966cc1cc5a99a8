//! What the bus sends, as wakebridge takes it in: the webhook event (parsing, the signal-level
//! filter, the target session, the spool line), the session id rule, its signature, and the
//! Python-identical JSON the spool line is written in.

pub mod event;
pub(crate) mod pyjson;
pub mod session_id;
pub mod signature;
