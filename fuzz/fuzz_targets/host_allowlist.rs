//! libFuzzer target for the Host canonicaliser and allowlist (`canonical_host`, `canonical_entry`, `HostAllowlist`).
//! The body and its invariants are `checks::host_allowlist`, shared with tests/it/fuzz_smoke.rs.
#![no_main]

#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::host_allowlist(data));
