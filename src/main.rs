//! The binary: `cli::main`, and the one libm function it needs.

fn main() -> std::process::ExitCode {
    wakebridge::cli::main()
}

/// tokio's multi-thread scheduler calls `f64::powf` (its poll-time average), the binary's only
/// libm function. Answering it here, with the rust-lang `libm` crate's port of musl's, lets the
/// linker leave libm.so out: the loader maps one library fewer at every start (`wakebridge
/// hook` runs on each tool call) and the daemon at rest holds ~0.5 MiB less (docs/design.md,
/// "No library loaded that one call needs").
#[unsafe(no_mangle)]
extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow_is_the_function_libm_would_give() {
        assert_eq!(super::pow(2.0, 10.0), 1024.0);
        assert!(super::pow(-1.0, 0.5).is_nan());
        // What tokio asks: a weight to the power of a poll count, through `f64::powf`.
        let weight = std::hint::black_box(0.9_f64);
        assert!((weight.powf(3.0) - 0.729).abs() < 1e-12);
    }
}
