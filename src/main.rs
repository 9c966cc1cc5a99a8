fn main() -> std::process::ExitCode {
    wakebridge::cli::main()
}
