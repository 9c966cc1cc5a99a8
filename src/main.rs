//! The binary: `cli::main`, and the one libm function it needs.

fn main() -> std::process::ExitCode {
    wakebridge::cli::main()
}

/// tokio's multi-thread scheduler calls `f64::powf` (its poll-time average), the binary's only
/// libm function. Answering it here, with the rust-lang `libm` crate's port of musl's, lets the
/// linker leave libm.so out: the loader maps one library fewer at every start (`wakebridge
/// hook` runs on each tool call) and the daemon at rest holds ~0.5 MiB less (docs/design.md,
/// "Three link-time choices").
#[unsafe(no_mangle)]
extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
