//! `runner`: runs transport benchmark experiments, or serves one stack (`runner serve`).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    runner::app::main()
}
