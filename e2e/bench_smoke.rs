//! The benchmark driver end to end on a small table: every scenario runs and reports.

use anyhow::ensure;

use crate::bench_driver::{Options, run};

#[tokio::test]
async fn the_benchmark_driver_runs_every_scenario() -> anyhow::Result<()> {
    let options = Options {
        rows: 10_000,
        freshness_secs: 3.0,
        barrier_interval_ms: 1000,
        out: None,
        command: "bench/run --rows 10000".into(),
    };
    let report = run(&options).await?;
    for scenario in [
        "1 physical limit",
        "2 CDC backfill",
        "3 view backfill",
        "4 incremental",
        "5 freshness",
        "6 memory",
        "7 recovery",
        "8 MySQL CDC",
    ] {
        ensure!(report.contains(&format!("| {scenario} |")), "no {scenario} in\n{report}");
    }
    // The bench waits for the snapshot's merge through /metrics before it times the views.
    ensure!(report.contains("then its level-0 files merged"), "no merge line in\n{report}");
    let views = report.matches("| 3 view backfill |").count();
    ensure!(views == 6, "five views and q_b without eager aggregation in\n{report}");
    ensure!(report.contains("| q_d (s) |") && report.contains("| q_e (s) |"), "{report}");
    Ok(())
}
