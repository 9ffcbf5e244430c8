//! The service-time knob end to end: a fixed server processing time sets the latency floor on
//! more than one stack, CPU work per request shows up too, and both are recorded in every row.

mod common;

use std::collections::HashMap;

use common::*;

#[test]
fn a_fixed_service_time_sets_the_median_and_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(
        &file,
        r#"
name = "service"
stacks = ["h1", "grpc"]
regimes = ["reuse"]
concurrency = [2]
requests_reuse = 30
warmup_fraction = 0
baseline_seconds = 0
[[variants]]
name = "none"
[[variants]]
name = "fixed"
service_time = "fixed:20ms"
[[variants]]
name = "exp"
service_time = "exp:20ms"
service_time_seed = 42
[[variants]]
name = "cpu"
service_cpu_us = 10000
"#,
    )
    .unwrap();
    let run = run_ok(&["--experiment", file.to_str().unwrap()]);
    let rows = run.cells();
    assert_eq!(rows.len(), 8);
    let row = |variant: &str, stack: &str| -> &HashMap<String, String> {
        rows.iter()
            .find(|r| r["variant"] == variant && r["stack"] == stack)
            .unwrap_or_else(|| panic!("no row {variant}/{stack}"))
    };
    for stack in ["h1", "grpc"] {
        for variant in ["none", "fixed", "exp", "cpu"] {
            let r = row(variant, stack);
            assert_eq!(r["error"], "", "{variant}/{stack}: {}", r["error"]);
            assert_eq!(num(r, "failed"), 0.0, "{variant}/{stack}");
        }
        let none = num(row("none", stack), "latency_p50_us");
        let fixed = num(row("fixed", stack), "latency_p50_us");
        // At least the service time; at most it plus a debug-build loopback request, the timer's
        // millisecond tick and generous room for a shared two-core machine.
        assert!(fixed >= 20_000.0, "{stack}: p50 {fixed} µs below 20 ms");
        assert!(fixed < 35_000.0, "{stack}: p50 {fixed} µs far above 20 ms");
        // Without service time the same request is much faster, in the same run.
        assert!(
            fixed > 4.0 * none,
            "{stack}: p50 {fixed} µs with 20 ms service vs {none} µs without"
        );
        // Exponential with a 20 ms mean: its median is ln 2 × 20 ms ≈ 14 ms; 30 draws vary.
        let exp = num(row("exp", stack), "latency_mean_us");
        assert!(
            (10_000.0..40_000.0).contains(&exp),
            "{stack}: mean {exp} µs with exp:20ms"
        );
        // Each request's draw depends on the seed and its id alone, so both stacks wait the
        // same times (h1 vs grpc differ by their sub-millisecond request cost).
        let exp_h1 = num(row("exp", "h1"), "latency_mean_us");
        assert!(
            (exp - exp_h1).abs() < 0.1 * exp_h1,
            "{stack}: mean {exp} µs vs h1's {exp_h1} µs with the same seed"
        );
        // 10 ms of spinning per request is CPU work, not a sleep: still a latency floor.
        let cpu = num(row("cpu", stack), "latency_p50_us");
        assert!(cpu >= 10_000.0, "{stack}: p50 {cpu} µs below 10 ms of CPU");

        assert_eq!(row("none", stack)["service_time"], "");
        assert_eq!(row("none", stack)["service_cpu_us"], "0");
        assert_eq!(row("fixed", stack)["service_time"], "fixed:20ms");
        assert_eq!(row("fixed", stack)["service_time_seed"], "");
        assert_eq!(row("exp", stack)["service_time"], "exp:20ms");
        assert_eq!(row("exp", stack)["service_time_seed"], "42");
        assert_eq!(row("cpu", stack)["service_cpu_us"], "10000");
    }
}
