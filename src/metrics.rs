//! The server's metrics, in the Prometheus text format (served by [`crate::http`]).
//!
//! Two kinds of metric, kept apart:
//! - *events*, counted where they happen: statements, connections, barrier latency,
//!   checkpoint sizes, CDC changes per upstream table. They live in [`Metrics`], one per
//!   server (no global registry, so tests run several servers in one process).
//! - *state*, read when scraped: backfill progress, actors per fragment, RocksDB properties,
//!   CDC lag. [`Metrics::encode`] takes them as a [`Scrape`] that the caller gathers from the
//!   engine, so a scrape sees the same numbers as `rw_ddl_progress` at that moment.
//!
//! Every name carries its unit and counters end in `_total`; docs/observability.md lists them
//! all.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::storage::store::Committed;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A `f64` gauge.
type FloatGauge = Gauge<f64, AtomicU64>;

/// Labels of `sluice_statements_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatementLabels {
    kind: &'static str,
    outcome: &'static str,
}

/// Labels of `sluice_cdc_source_changes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CdcTableLabels {
    source: String,
    table: String,
}

/// Labels of `sluice_relation_changes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RelationChangeLabels {
    relation: String,
    op: &'static str,
}

/// One label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Job {
    job: String,
}

/// Labels of `sluice_backfill_rows_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FragmentLabels {
    job: String,
    fragment: String,
    kind: &'static str,
}

/// Labels of `sluice_backfill_status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    job: String,
    status: &'static str,
}

/// One label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Source {
    source: String,
}

/// One label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FragmentLabel {
    fragment: String,
}

/// The states `sluice_backfill_status` reports, one series each (1 for the current one).
pub const BACKFILL_STATUSES: [&str; 6] =
    ["running", "throttled", "paused", "starved", "waiting_for_upstream", "stopped"];

/// How many checkpoints [`Metrics::recent_checkpoints`] keeps.
const RECENT_CHECKPOINTS: usize = 600;

/// One committed checkpoint, for the dashboard's latency plot.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CheckpointSample {
    /// When it committed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Barrier injection to commit, in seconds.
    pub latency_seconds: f64,
    /// Bytes it wrote.
    pub bytes: u64,
}

/// The event metrics of one server.
pub struct Metrics {
    statements: Family<StatementLabels, Counter>,
    connections: Gauge,
    barrier_latency: Histogram,
    commit_duration: Histogram,
    checkpoint_bytes: Gauge,
    checkpoints: Counter,
    checkpoints_ingested: Counter,
    cdc_changes: Family<CdcTableLabels, Counter>,
    relation_changes: Family<RelationChangeLabels, Counter>,
    /// When each source's reader last had read everything its upstream had committed.
    cdc_caught_up: Mutex<HashMap<String, Instant>>,
    /// The last error of each source's reader, until it reads again.
    cdc_errors: Mutex<HashMap<String, String>>,
    /// Why each stopped CDC table stopped, by table id.
    cdc_table_errors: Mutex<HashMap<u32, String>>,
    recent: Mutex<std::collections::VecDeque<CheckpointSample>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            statements: Family::default(),
            connections: Gauge::default(),
            // 1 ms to ~65 s.
            barrier_latency: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            commit_duration: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            checkpoint_bytes: Gauge::default(),
            checkpoints: Counter::default(),
            checkpoints_ingested: Counter::default(),
            cdc_changes: Family::default(),
            relation_changes: Family::default(),
            cdc_caught_up: Mutex::new(HashMap::new()),
            cdc_errors: Mutex::new(HashMap::new()),
            cdc_table_errors: Mutex::new(HashMap::new()),
            recent: Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

/// What a scrape reads from the engine's state.
#[derive(Debug, Default)]
pub struct Scrape {
    /// One entry per creating job.
    pub backfills: Vec<BackfillScrape>,
    /// Actors of every running fragment: `(fragment id, actors)`.
    pub actors: Vec<(u32, usize)>,
    /// RocksDB properties: `(name after sluice_rocksdb_, help, value)`.
    pub rocksdb: Vec<(&'static str, &'static str, u64)>,
    /// Per CDC source: its name and the bytes of WAL its slot has not confirmed (if known).
    pub cdc_sources: Vec<(String, Option<i64>)>,
}

/// The progress of one creating job.
#[derive(Debug)]
pub struct BackfillScrape {
    /// The job's relation name.
    pub job: String,
    /// Rows read per backfilling fragment: `(fragment, kind, rows)`.
    pub fragments: Vec<(String, &'static str, u64)>,
    /// Rows read per second.
    pub rows_per_second: f64,
    /// Rows read over rows to read, once counted.
    pub ratio: Option<f64>,
    /// One of [`BACKFILL_STATUSES`].
    pub status: &'static str,
}

impl Metrics {
    /// Counts one statement: its kind (`select`, `insert`, `create`, ...) and whether it
    /// succeeded.
    pub fn statement(&self, kind: &'static str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.statements.get_or_create(&StatementLabels { kind, outcome }).inc();
    }

    /// A client connection opened; the guard counts it until dropped.
    pub fn connection(self: &std::sync::Arc<Self>) -> ConnectionGuard {
        self.connections.inc();
        ConnectionGuard(self.clone())
    }

    /// A checkpoint committed, `latency` after its barrier was injected; its commit took `commit`.
    pub fn checkpoint(&self, latency: Duration, commit: Duration, committed: Committed) {
        let bytes = committed.bytes;
        self.barrier_latency.observe(latency.as_secs_f64());
        self.commit_duration.observe(commit.as_secs_f64());
        self.checkpoint_bytes.set(bytes as i64);
        self.checkpoints.inc();
        if committed.ingested {
            self.checkpoints_ingested.inc();
        }
        let mut recent = self.recent.lock();
        if recent.len() == RECENT_CHECKPOINTS {
            recent.pop_front();
        }
        let at_ms = now_ms();
        recent.push_back(CheckpointSample { at_ms, latency_seconds: latency.as_secs_f64(), bytes });
    }

    /// The last checkpoints committed within `window`, oldest first.
    pub fn recent_checkpoints(&self, window: Duration) -> Vec<CheckpointSample> {
        let since = now_ms() - window.as_millis() as i64;
        self.recent.lock().iter().filter(|c| c.at_ms >= since).copied().collect()
    }

    /// A CDC source read `changes` changes of the upstream table `table`.
    pub fn cdc_changes(&self, source: &str, table: &str, changes: u64) {
        let labels = CdcTableLabels { source: source.to_owned(), table: table.to_owned() };
        self.cdc_changes.get_or_create(&labels).inc_by(changes);
    }

    /// The counters of rows that relation `relation`'s stored rows gained and lost (an
    /// update counts one of each), as its materialize passes them downstream.
    pub fn relation_changes(&self, relation: &str) -> (Counter, Counter) {
        let counter = |op| {
            let labels = RelationChangeLabels { relation: relation.to_owned(), op };
            self.relation_changes.get_or_create(&labels).clone()
        };
        (counter("insert"), counter("delete"))
    }

    /// A CDC source has read everything its upstream committed before `at`.
    pub fn cdc_caught_up(&self, source: &str, at: Instant) {
        self.cdc_caught_up.lock().insert(source.to_owned(), at);
    }

    /// The source's reader failed with `error` (`None`: it reads again).
    pub fn cdc_error(&self, source: &str, error: Option<String>) {
        let mut errors = self.cdc_errors.lock();
        match error {
            Some(error) => errors.insert(source.to_owned(), error),
            None => errors.remove(source),
        };
    }

    /// The source reader's last error, while it cannot read.
    pub fn cdc_last_error(&self, source: &str) -> Option<String> {
        self.cdc_errors.lock().get(source).cloned()
    }

    /// Records why the CDC table with id `table` stopped following its upstream (`None`: it
    /// follows it).
    pub fn cdc_table_error(&self, table: u32, error: Option<String>) {
        let mut errors = self.cdc_table_errors.lock();
        match error {
            Some(error) => errors.insert(table, error),
            None => errors.remove(&table),
        };
    }

    /// Why the CDC table with id `table` stopped following its upstream, if it did.
    pub fn cdc_table_stopped(&self, table: u32) -> Option<String> {
        self.cdc_table_errors.lock().get(&table).cloned()
    }

    /// Seconds since the source last read everything its upstream had committed; `None`
    /// before its first read.
    pub fn cdc_lag_seconds(&self, source: &str) -> Option<f64> {
        self.cdc_caught_up.lock().get(source).map(|at| at.elapsed().as_secs_f64())
    }

    /// Encodes every metric, the event metrics and the scraped `state`, in the Prometheus
    /// text format.
    pub fn encode(&self, state: &Scrape) -> String {
        let mut registry = Registry::default();
        registry.register(
            "sluice_statements",
            "Statements run, by kind and outcome",
            self.statements.clone(),
        );
        registry.register(
            "sluice_pgwire_connections",
            "Open Postgres wire protocol connections",
            self.connections.clone(),
        );
        registry.register(
            "sluice_barrier_latency_seconds",
            "Time from injecting a checkpoint barrier to committing its epoch",
            self.barrier_latency.clone(),
        );
        registry.register(
            "sluice_checkpoint_commit_seconds",
            "Time a checkpoint's commit (its write to RocksDB) takes, part of the barrier latency",
            self.commit_duration.clone(),
        );
        registry.register(
            "sluice_checkpoint_bytes",
            "Bytes written by the last committed checkpoint",
            self.checkpoint_bytes.clone(),
        );
        registry.register("sluice_checkpoints", "Checkpoints committed", self.checkpoints.clone());
        registry.register(
            "sluice_checkpoints_ingested",
            "Checkpoints committed by ingesting their rows as one sorted file",
            self.checkpoints_ingested.clone(),
        );
        registry.register(
            "sluice_cdc_source_changes",
            "Changes read from the upstream, by source and upstream table",
            self.cdc_changes.clone(),
        );
        registry.register(
            "sluice_relation_changes",
            "Rows inserted into and deleted from each table and view, as passed downstream (an \
             update is one of each)",
            self.relation_changes.clone(),
        );
        register_state(&mut registry, state, self);
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
            .expect("writing to a String does not fail");
        out
    }
}

fn now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    since_epoch.as_millis() as i64
}

/// Counts an open connection in `sluice_pgwire_connections` until dropped.
pub struct ConnectionGuard(std::sync::Arc<Metrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.dec();
    }
}

/// Registers the metrics read from the engine at this scrape.
fn register_state(registry: &mut Registry, state: &Scrape, metrics: &Metrics) {
    let rows = Family::<FragmentLabels, Counter>::default();
    let rate = Family::<Job, FloatGauge>::default();
    let ratio = Family::<Job, FloatGauge>::default();
    let status = Family::<StatusLabels, Gauge>::default();
    for job in &state.backfills {
        for (fragment, kind, n) in &job.fragments {
            let labels = FragmentLabels { job: job.job.clone(), fragment: fragment.clone(), kind };
            rows.get_or_create(&labels).inc_by(*n);
        }
        rate.get_or_create(&Job { job: job.job.clone() }).set(job.rows_per_second);
        if let Some(r) = job.ratio {
            ratio.get_or_create(&Job { job: job.job.clone() }).set(r);
        }
        for s in BACKFILL_STATUSES {
            let labels = StatusLabels { job: job.job.clone(), status: s };
            status.get_or_create(&labels).set(i64::from(s == job.status));
        }
    }
    registry.register(
        "sluice_backfill_rows",
        "Snapshot rows read by the backfills of creating jobs, by fragment and kind \
         (ARRANGEMENT or CDC)",
        rows,
    );
    registry.register(
        "sluice_backfill_rows_per_second",
        "Snapshot rows read per second by a creating job, over the last seconds",
        rate,
    );
    registry.register(
        "sluice_backfill_progress_ratio",
        "Rows read over the upstream's rows, for a creating job",
        ratio,
    );
    registry.register(
        "sluice_backfill_status",
        "1 for a creating job's current status, 0 for the others",
        status,
    );
    let actors = Family::<FragmentLabel, Gauge>::default();
    for (fragment, n) in &state.actors {
        actors.get_or_create(&FragmentLabel { fragment: fragment.to_string() }).set(*n as i64);
    }
    registry.register("sluice_actor_count", "Actors of each running fragment", actors);
    for (name, help, value) in &state.rocksdb {
        let gauge: Gauge = Gauge::default();
        gauge.set(*value as i64);
        registry.register(format!("sluice_rocksdb_{name}"), *help, gauge);
    }
    let lag_bytes = Family::<Source, Gauge>::default();
    let lag_seconds = Family::<Source, FloatGauge>::default();
    for (source, bytes) in &state.cdc_sources {
        let labels = Source { source: source.clone() };
        if let Some(bytes) = bytes {
            lag_bytes.get_or_create(&labels).set(*bytes);
        }
        if let Some(seconds) = metrics.cdc_lag_seconds(source) {
            lag_seconds.get_or_create(&labels).set(seconds);
        }
    }
    registry.register(
        "sluice_cdc_lag_bytes",
        "Bytes of upstream WAL the source's replication slot has not confirmed",
        lag_bytes,
    );
    registry.register(
        "sluice_cdc_lag_seconds",
        "Seconds since the source last had read every change its upstream had committed",
        lag_seconds,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> prometheus_parse::Scrape {
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        prometheus_parse::Scrape::parse(lines).expect("valid exposition format")
    }

    fn value(scrape: &prometheus_parse::Scrape, metric: &str, label: (&str, &str)) -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get(label.0) == Some(label.1))
            .unwrap_or_else(|| panic!("no {metric}{{{}={}}}", label.0, label.1));
        match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => panic!("{metric} is not a number"),
        }
    }

    #[test]
    fn events_and_scraped_state_are_encoded() {
        let metrics = std::sync::Arc::new(Metrics::default());
        metrics.statement("select", true);
        metrics.statement("select", true);
        metrics.statement("insert", false);
        let _open = metrics.connection();
        drop(metrics.connection());
        metrics.checkpoint(
            Duration::from_millis(30),
            Duration::from_millis(10),
            Committed { bytes: 4096, ingested: true },
        );
        metrics.cdc_changes("pg", "public.t", 5);
        metrics.relation_changes("orders").1.inc_by(3);
        metrics.cdc_caught_up("pg", Instant::now());
        let state = Scrape {
            backfills: vec![BackfillScrape {
                job: "mv".to_owned(),
                fragments: vec![("7".to_owned(), "ARRANGEMENT", 1500)],
                rows_per_second: 250.5,
                ratio: Some(0.25),
                status: "throttled",
            }],
            actors: vec![(3, 4)],
            rocksdb: vec![("memtable_bytes", "memtable size", 1024)],
            cdc_sources: vec![("pg".to_owned(), Some(77))],
        };
        let scrape = parse(&metrics.encode(&state));
        assert_eq!(value(&scrape, "sluice_statements_total", ("kind", "select")), 2.0);
        let ingested =
            scrape.samples.iter().find(|s| s.metric == "sluice_checkpoints_ingested_total");
        assert_eq!(ingested.map(|s| &s.value), Some(&prometheus_parse::Value::Counter(1.0)));
        assert_eq!(value(&scrape, "sluice_statements_total", ("outcome", "error")), 1.0);
        let connections = scrape.samples.iter().find(|s| s.metric == "sluice_pgwire_connections");
        assert_eq!(connections.map(|s| &s.value), Some(&prometheus_parse::Value::Gauge(1.0)));
        assert_eq!(value(&scrape, "sluice_backfill_rows_total", ("fragment", "7")), 1500.0);
        assert_eq!(value(&scrape, "sluice_backfill_rows_per_second", ("job", "mv")), 250.5);
        assert_eq!(value(&scrape, "sluice_backfill_progress_ratio", ("job", "mv")), 0.25);
        assert_eq!(value(&scrape, "sluice_backfill_status", ("status", "throttled")), 1.0);
        assert_eq!(value(&scrape, "sluice_backfill_status", ("status", "paused")), 0.0);
        assert_eq!(value(&scrape, "sluice_actor_count", ("fragment", "3")), 4.0);
        assert_eq!(value(&scrape, "sluice_cdc_source_changes_total", ("table", "public.t")), 5.0);
        assert_eq!(value(&scrape, "sluice_cdc_lag_bytes", ("source", "pg")), 77.0);
        assert_eq!(value(&scrape, "sluice_relation_changes_total", ("op", "delete")), 3.0);
        assert!(value(&scrape, "sluice_cdc_lag_seconds", ("source", "pg")) < 60.0);
        let latency = scrape.samples.iter().find(|s| s.metric == "sluice_barrier_latency_seconds");
        match latency.map(|s| &s.value) {
            Some(prometheus_parse::Value::Histogram(buckets)) => {
                assert!(buckets.iter().any(|b| b.less_than >= 0.03 && b.count == 1.0));
            }
            other => panic!("barrier latency is {other:?}"),
        }
        let commit = scrape.samples.iter().find(|s| s.metric == "sluice_checkpoint_commit_seconds");
        match commit.map(|s| &s.value) {
            Some(prometheus_parse::Value::Histogram(buckets)) => {
                assert!(buckets.iter().any(|b| b.less_than < 0.03 && b.count == 1.0));
            }
            other => panic!("commit duration is {other:?}"),
        }
        assert_eq!(metrics.recent_checkpoints(Duration::from_secs(60))[0].bytes, 4096);
    }
}
