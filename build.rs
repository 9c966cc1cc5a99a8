//! Two link choices that make every start of the binary cheaper (`wakebridge hook` runs on each
//! tool call of each session; docs/benchmarks.md, "CLI verbs"), taken only when building for
//! this very machine with glibc, where they can be checked:
//!
//! - **Packed relative relocations** (`DT_RELR`): the relocation table shrinks from ~350 KB to
//!   ~4 KB, and the daemon at rest holds ~0.3 MB less of its image. glibc reads them from 2.36
//!   on, so only when this machine's is that new, and the binary then needs it where it runs
//!   (it names the `GLIBC_ABI_DT_RELR` version; an older glibc refuses to load it). A linker
//!   without the option ignores it with a warning.
//! - **The unwinder linked in** (`libgcc_eh`, what `gcc -static-libgcc` does): without it the
//!   loader maps `libgcc_s.so`, whose constructor probes the CPU; a virtual machine traps each
//!   probe, ~0.2 ms a start. Only when the linker driver has the archive.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if !(native && gnu_linux) {
        return;
    }
    if glibc_reads_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    if linker_has("libgcc_eh.a") {
        // Not bundled into the rlib: the final link puts it ahead of std's `-lgcc_s`, which
        // `--as-needed` then leaves out.
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
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

/// Whether the linker driver (the configured one, else rustc's default `cc`) finds `file` in
/// its own library dirs: gcc and clang print the bare name back when they do not.
fn linker_has(file: &str) -> bool {
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    Command::new(linker)
        .arg(format!("-print-file-name={file}"))
        .output()
        .is_ok_and(|out| {
            let path = String::from_utf8_lossy(&out.stdout);
            out.status.success() && std::path::Path::new(path.trim()).is_absolute()
        })
}
