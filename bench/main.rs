//! `bench/run`: the benchmarks of docs/benchmarks.md (see `driver.rs`).
//!
//! Usage: `bench/run [--rows N] [--freshness-secs S] [--barrier-interval-ms M] [--no-write]`. Runs as a Cargo bench
//! target, so Cargo builds Sluice with the release profile first and the driver can use the
//! e2e harness (a real `sluice` process, a private Postgres and MariaDB).

#[path = "driver.rs"]
mod driver;
#[allow(dead_code)]
#[path = "../e2e/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../e2e/mysql_upstream.rs"]
mod mysql_upstream;
#[allow(dead_code)]
#[path = "../e2e/upstream.rs"]
mod upstream;

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut options = driver::Options {
        rows: 10_000_000,
        freshness_secs: 10.0,
        barrier_interval_ms: 250,
        out: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md")),
        command: String::new(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut shown = vec!["bench/run".to_owned()];
    while let Some(arg) = args.next() {
        shown.push(arg.clone());
        let mut value = || {
            let value = args.next().unwrap_or_default();
            shown.push(value.clone());
            value
        };
        match arg.as_str() {
            "--rows" => options.rows = value().parse()?,
            "--freshness-secs" => options.freshness_secs = value().parse()?,
            "--barrier-interval-ms" => options.barrier_interval_ms = value().parse()?,
            "--no-write" => options.out = None,
            other => anyhow::bail!(
                "unknown argument {other}; usage: bench/run [--rows N] [--freshness-secs S] \
                 [--barrier-interval-ms M] [--no-write]"
            ),
        }
    }
    options.command = shown.join(" ");
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(driver::run(&options))?;
    println!("{report}");
    if let Some(path) = &options.out {
        println!("written to {}", path.display());
    }
    Ok(())
}
