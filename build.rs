//! Links the binary with packed relative relocations (`DT_RELR`) where the C library that will
//! load it understands them: the relocation table shrinks from ~350 KB to ~4 KB, and the daemon
//! at rest holds ~0.3 MB less of its image (docs/benchmarks.md, "Memory"). glibc reads `DT_RELR`
//! from 2.36 on; a binary linked so for an older one would not start, so the flag is given only
//! when building for this very machine and its glibc is new enough. A linker without the option
//! ignores it with a warning.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if native && gnu_linux && glibc_reads_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc is 2.36 or later.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_reads_relr() -> bool {
    unsafe extern "C" {
        fn gnu_get_libc_version() -> *const std::ffi::c_char;
    }
    // SAFETY: glibc returns a pointer to its static, NUL-terminated version string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    let mut parts = version.to_str().unwrap_or("").split('.');
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (next(), next()) >= (2, 36)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_reads_relr() -> bool {
    false
}
