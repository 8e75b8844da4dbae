//! The `sluice` server binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use sluice::engine::{Config, Engine};
use sluice::stream::barrier::DEFAULT_BACKFILL_INTERVAL;
use tracing_subscriber::EnvFilter;

/// The options of jemalloc, the allocator RocksDB links in for the whole process; it reads them
/// when it starts, and `MALLOC_CONF` in the environment overrides them.
///
/// `oversize_threshold:0`: by default jemalloc serves allocations of 8 MiB and more from an
/// arena that hands their pages back to the kernel as soon as they are freed. A backfill's
/// write buffer grows to that size every epoch, so its pages were faulted in anew each time:
/// 900 k page faults and 8% of Sluice's CPU in a 10 M-row CDC snapshot
/// (docs/benchmarks-history.md, "Large allocations from jemalloc's ordinary arenas"). The ordinary arenas
/// keep freed pages for reuse before they hand them back.
///
/// `dirty_decay_ms:1000`: for a second rather than ten, long enough for the next epochs' buffers
/// to reuse them; ten seconds of a backfill's freed buffers took the peak RSS of a CDC copy and
/// three views from 430 MB to 500.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static malloc_conf: &[u8; 41] = b"oversize_threshold:0,dirty_decay_ms:1000\0";

/// A streaming database that speaks the Postgres wire protocol.
///
/// Every flag can also be given in a TOML file read with `--config` (docs/running.md).
#[derive(Debug, Parser)]
#[command(version, about, args_override_self = true)]
struct Args {
    /// Read flags from this TOML file: each flag a key (`listen = "0.0.0.0:4566"`,
    /// `data-dir = "/var/lib/sluice"`); a flag also given on the command line takes that value.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to accept Postgres connections on.
    #[arg(long, default_value = "127.0.0.1:4566")]
    listen: SocketAddr,
    /// Directory for all persistent state.
    #[arg(long, default_value = "./sluice-data")]
    data_dir: PathBuf,
    /// Address of the HTTP server (metrics at /metrics, the dashboard at /), or `off`.
    #[arg(long, default_value = "127.0.0.1:5691")]
    http: HttpAddr,
    /// Milliseconds between checkpoints (statements ask for earlier ones when they need them).
    #[arg(long, default_value_t = 250)]
    barrier_interval_ms: u64,
    /// Least milliseconds between timed checkpoints while a backfill runs (a backfill pays for
    /// each checkpoint; backfills whose epochs fill up still ask for earlier ones).
    #[arg(long, default_value_t = DEFAULT_BACKFILL_INTERVAL.as_millis() as u64)]
    backfill_barrier_interval_ms: u64,
}

/// Where the HTTP server listens: an address, or `off` for none.
#[derive(Debug, Clone, Copy)]
struct HttpAddr(Option<SocketAddr>);

impl std::str::FromStr for HttpAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(HttpAddr(None));
        }
        s.parse().map(|a| HttpAddr(Some(a))).map_err(|e| format!("{e}: give host:port or off"))
    }
}

/// Stack of every runtime thread. Planning and evaluating recurse over expressions; the
/// parser refuses nesting beyond `sql::parser::MAX_EXPR_DEPTH`, and this leaves room for it.
const THREAD_STACK_BYTES: usize = 32 << 20;

fn main() -> anyhow::Result<()> {
    let command = Args::command();
    let flags: Vec<&str> = command.get_arguments().filter_map(|a| a.get_long()).collect();
    let argv = match sluice::cli::with_config_file(std::env::args_os().collect(), &flags) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let args = Args::parse_from(argv);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(THREAD_STACK_BYTES)
        .on_thread_start(sluice::storage::store::disable_perf_counters)
        .build()
        .context("cannot start the async runtime")?
        .block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,pg_walstream=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = Config {
        data_dir: args.data_dir.clone(),
        barrier_interval: Duration::from_millis(args.barrier_interval_ms.max(1)),
        backfill_barrier_interval: Duration::from_millis(args.backfill_barrier_interval_ms),
    };
    let (engine, barrier_manager) = Engine::start(config)
        .await
        .with_context(|| format!("cannot start with data dir {}", args.data_dir.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    if let HttpAddr(Some(addr)) = args.http {
        let http = tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!("cannot listen on {addr} for HTTP (--http off turns it off)")
        })?;
        tracing::info!(http = %addr, "dashboard at http://{addr}/, metrics at /metrics");
        let engine = engine.clone();
        tokio::spawn(async move {
            if let Err(e) = sluice::http::serve(engine, http).await {
                tracing::error!(error = %e, "the HTTP server stopped");
            }
        });
    }
    tracing::info!(listen = %args.listen, data_dir = %args.data_dir.display(), "sluice is ready");
    let store = engine.store().clone();
    tokio::select! {
        _ = sluice::frontend::serve(engine, listener, shutdown_signal()) => {
            tracing::info!("shutting down");
            // A merge in the background (a CDC snapshot's) would hold the exit for seconds.
            store.stop_background_work();
            Ok(())
        }
        result = barrier_manager => {
            let result = result.context("barrier manager panicked")?;
            result.context("checkpointing failed; restart to recover from the last checkpoint")?;
            anyhow::bail!("barrier manager stopped unexpectedly")
        }
    }
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
