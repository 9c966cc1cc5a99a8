fn main() -> std::process::ExitCode {
    // `wakebridge hook` runs on every tool call of every Claude Code session: it skips building
    // the whole command line (see `cli::hook::fast_main`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = wakebridge::cli::hook::fast_main(&args) {
        return code;
    }
    wakebridge::cli::main()
}
