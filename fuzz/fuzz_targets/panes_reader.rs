//! libFuzzer target for the panes.json reader (`read_panes_file` + `resolve`, through a real file).
//! The body and its invariants are `checks::panes_reader`, shared with tests/it/fuzz_smoke.rs.
#![no_main]

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::panes_reader(data));
