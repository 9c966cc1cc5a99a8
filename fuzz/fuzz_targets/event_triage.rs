//! libFuzzer target for the webhook body parser (`event::triage`).
//! The body and its invariants are `checks::event_triage`, shared with tests/it/fuzz_smoke.rs.
#![no_main]

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::event_triage(data));
