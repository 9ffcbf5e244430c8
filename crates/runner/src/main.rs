//! `runner`: runs transport benchmark experiments, or serves one stack (`runner serve`).

/// jemalloc for the runner, its servers and its load generators alike: glibc's malloc kept
/// more of a 500-connection HTTP/3 client resident (fragmentation across arenas).
/// Without the `jemalloc` feature (default on) the system allocator serves, for heap profilers.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    runner::app::main()
}
