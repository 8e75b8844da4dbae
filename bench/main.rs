//! `bench/run`: the benchmarks of docs/benchmarks.md (see `driver.rs`).
//!
//! Usage: `bench/run [--rows N] [--freshness-secs S] [--barrier-interval-ms M] [--no-write]`. Runs as a Cargo bench
//! target, so Cargo builds Sluice with the release profile first and the driver can use the
//! e2e harness (a real `sluice` process, a private Postgres and MariaDB).
//!
//! `bench/run --write-buffer` runs only a micro-benchmark of an epoch's write buffer (see
//! [`write_buffer`]), in this process.

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
            "--write-buffer" => {
                write_buffer();
                return Ok(());
            }
            other => anyhow::bail!(
                "unknown argument {other}; usage: bench/run [--rows N] [--freshness-secs S] \
                 [--barrier-interval-ms M] [--no-write] | --write-buffer"
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

/// An epoch of a CDC snapshot as its table's write buffer sees it: 300 000 rows with keys of
/// `table | vnode | bigint` (vnodes hashed, so keys arrive out of order) and 62-byte values,
/// inserted and then read in key order as the commit reads them. Prints the best of 10 rounds
/// in nanoseconds per row.
fn write_buffer() {
    use sluice::storage::write_buffer::WriteBuffer;
    let rows = 300_000u64;
    let keys: Vec<Vec<u8>> = (0..rows)
        .map(|n| {
            let vnode = (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u16;
            let mut key = vec![0, 0, 0, 7];
            key.extend_from_slice(&vnode.to_be_bytes());
            key.push(1);
            key.extend_from_slice(&n.to_be_bytes());
            key
        })
        .collect();
    let value = [5u8; 62];
    let best = (0..10)
        .map(|_| {
            let started = std::time::Instant::now();
            let mut buffer = WriteBuffer::new();
            for key in &keys {
                buffer.insert(key, Some(&value));
            }
            assert_eq!(buffer.iter().len(), rows as usize);
            started.elapsed()
        })
        .min()
        .expect("ten rounds");
    println!(
        "write buffer: {rows} rows inserted and read in key order: {:.0} ns/row (best of 10)",
        best.as_nanos() as f64 / rows as f64
    );
}
