//! libFuzzer target for the Claude Code hook-stdin parser (`parse_hook_input` + `action_for`).
//! The body and its invariants are `checks::hook_input`, shared with tests/it/fuzz_smoke.rs.
#![no_main]

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::hook_input(data));
