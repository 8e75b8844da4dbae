//! What the dashboard and `/metrics` read: the engine's jobs, their graphs and progress, the
//! CDC sources, as plain structs (serialized to JSON by the routes).
//!
//! Everything is read from the same places as the system tables (`rw_ddl_progress`,
//! `rw_fragments`, `rw_cdc_progress`), so the page, a scrape and a query agree.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::batch::system::vnode_ranges;
use crate::catalog::{RelationKind, TableId, VirtualNode};
use crate::connector::source::SourceConfig;
use crate::engine::Engine;
use crate::metrics::{BackfillScrape, Scrape};
use crate::stream::dispatch::owned_vnodes;
use crate::stream::executor::source::offset_table::recorded_position;
use crate::stream::graph::creating::{
    CreatingJob, FragmentProgress, JobStatus, STARVED_CHECKPOINTS,
};
use crate::stream::graph::job::Fragment;

/// How long a request waits for an upstream to report its slot lag.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

/// One streaming job: a table, a materialized view, a CDC table or a source.
#[derive(Debug, Serialize)]
pub struct JobView {
    /// The relation's (or source's) id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// `table`, `materialized view`, `cdc table` or `source`.
    pub kind: &'static str,
    /// Still backfilling.
    pub creating: bool,
    /// `created`, or a creating job's status: `running`, `throttled`, `paused`, `starved`,
    /// `waiting for upstream: ..`.
    pub status: String,
    /// Why a creating job is not reading at full speed, in words; `None` when it is.
    pub reason: Option<String>,
    /// Rows read over rows to read; 1 once created, `None` while the upstream is not counted.
    pub progress: Option<f64>,
    /// Snapshot rows read.
    pub rows_done: Option<u64>,
    /// Snapshot rows to read, once counted.
    pub rows_total: Option<u64>,
    /// Snapshot rows read per second.
    pub rows_per_second: Option<f64>,
    /// Seconds left at the current rate.
    pub eta_seconds: Option<f64>,
    /// The backfill rate limit, rows per second.
    pub rate_limit: Option<u64>,
    /// Its fragments.
    pub fragments: usize,
    /// Its actors.
    pub actors: usize,
    /// The statement that created it.
    pub definition: String,
}

/// One fragment of a job's graph.
#[derive(Debug, Serialize)]
pub struct FragmentView {
    /// The fragment id (as in `rw_fragments`).
    pub id: u32,
    /// The operators it runs.
    pub label: String,
    /// Its actors.
    pub parallelism: usize,
    /// The vnodes of each actor, as ranges (`0-127`).
    pub vnodes: Vec<String>,
    /// Its backfill, if it runs one and the job is creating.
    pub backfill: Option<FragmentProgress>,
}

/// An edge of a job's graph: from a fragment, or from an upstream job, into a fragment.
#[derive(Debug, Serialize)]
pub struct EdgeView {
    /// The lower fragment's id; `None` for an upstream job.
    pub from_fragment: Option<u32>,
    /// The upstream job's name, for an edge from another job.
    pub from_job: Option<String>,
    /// The upper fragment.
    pub to_fragment: u32,
    /// How rows cross it: `hash` (by the key's vnode) or `simple` (one actor to one).
    pub exchange: &'static str,
}

/// A job's streaming graph.
#[derive(Debug, Serialize)]
pub struct GraphView {
    /// The job.
    pub job: JobView,
    /// Its fragments, lowest first.
    pub fragments: Vec<FragmentView>,
    /// How rows flow between them and in from upstream jobs.
    pub edges: Vec<EdgeView>,
}

/// A CDC source.
#[derive(Debug, Serialize)]
pub struct SourceView {
    /// Its name.
    pub name: String,
    /// The connector.
    pub connector: String,
    /// `host:port/database` of the upstream.
    pub upstream: String,
    /// Its replication slot.
    pub slot: String,
    /// CDC tables reading it.
    pub tables: Vec<String>,
    /// Bytes of WAL its slot has not confirmed; `None` when the upstream does not answer.
    pub lag_bytes: Option<i64>,
    /// Seconds since it last had read everything the upstream committed.
    pub lag_seconds: Option<f64>,
    /// Why its reader cannot read, while it cannot.
    pub error: Option<String>,
}

/// Read access to the engine's state for the HTTP server.
pub struct Observer {
    engine: Arc<Engine>,
}

impl Observer {
    /// Reads `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// The server's metrics.
    pub fn engine_metrics(&self) -> &crate::metrics::Metrics {
        self.engine.metrics()
    }

    /// Every job: tables, materialized views, CDC tables and sources, by id.
    pub fn jobs(&self) -> Vec<JobView> {
        let catalog = self.engine.catalog();
        let graph = self.engine.graph();
        let layouts: HashMap<TableId, Vec<Fragment>> = graph.fragments().into_iter().collect();
        let shape = |id: TableId| {
            let fragments = layouts.get(&id).map_or(&[][..], Vec::as_slice);
            (fragments.len(), fragments.iter().map(|f| f.actors.len()).sum())
        };
        let mut jobs = Vec::new();
        for table in catalog.tables() {
            if table.kind == RelationKind::Internal {
                continue;
            }
            let kind = match (table.kind, table.cdc.is_some()) {
                (RelationKind::MaterializedView, _) => "materialized view",
                (_, true) => "cdc table",
                _ => "table",
            };
            let (fragments, actors) = shape(table.id);
            let mut job = JobView {
                id: table.id.0,
                name: table.name.clone(),
                kind,
                creating: false,
                status: "created".to_owned(),
                reason: None,
                progress: Some(1.0),
                rows_done: None,
                rows_total: None,
                rows_per_second: None,
                eta_seconds: None,
                rate_limit: table.backfill_rate_limit,
                fragments,
                actors,
                definition: table.definition.clone(),
            };
            if let Some(creating) = graph.creating.get(table.id) {
                fill_progress(&mut job, &creating, table.backfill_rate_limit);
            } else if let Some(reason) = graph.metrics.cdc_table_stopped(table.id.0) {
                job.status = format!("stopped: {reason}");
                job.reason = Some(reason);
            }
            jobs.push(job);
        }
        for source in catalog.sources() {
            let (fragments, actors) = shape(source.id);
            jobs.push(JobView {
                id: source.id.0,
                name: source.name.clone(),
                kind: "source",
                creating: false,
                status: "created".to_owned(),
                reason: None,
                progress: None,
                rows_done: None,
                rows_total: None,
                rows_per_second: None,
                eta_seconds: None,
                rate_limit: None,
                fragments,
                actors,
                definition: source.definition.clone(),
            });
        }
        jobs.sort_by_key(|j| j.id);
        jobs
    }

    /// The graph of the job called `name` (or with that id).
    pub fn graph(&self, name: &str) -> Option<GraphView> {
        let job = self.jobs().into_iter().find(|j| j.name == name || j.id.to_string() == name)?;
        let graph = self.engine.graph();
        let fragments = graph
            .fragments()
            .into_iter()
            .find(|(id, _)| id.0 == job.id)
            .map(|(_, f)| f)
            .unwrap_or_default();
        let creating = graph.creating.get(TableId(job.id));
        let progress = creating.as_ref().map(|c| c.fragments()).unwrap_or_default();
        let mut views = Vec::with_capacity(fragments.len());
        for fragment in &fragments {
            let n = fragment.actors.len();
            let vnodes = (0..n)
                .map(|i| match fragment.partitioned {
                    true => vnode_ranges(&owned_vnodes(i, n)),
                    false => format!("0-{}", VirtualNode::COUNT - 1),
                })
                .collect();
            let backfill = progress
                .iter()
                .find(|p| backfills_in(fragment, &p.upstream, creating.as_ref()))
                .cloned();
            views.push(FragmentView {
                id: fragment.id,
                label: fragment.label.clone(),
                parallelism: n,
                vnodes,
                backfill,
            });
        }
        let edges = self.edges(&job, &fragments);
        Some(GraphView { job, fragments: views, edges })
    }

    /// The edges of a job's graph: see [`fragment_inputs`].
    fn edges(&self, job: &JobView, fragments: &[Fragment]) -> Vec<EdgeView> {
        let mut edges = Vec::new();
        for (i, inputs) in fragment_inputs(fragments).into_iter().enumerate() {
            for input in inputs {
                edges.push(EdgeView {
                    from_fragment: Some(fragments[input].id),
                    from_job: None,
                    to_fragment: fragments[i].id,
                    exchange: "hash",
                });
            }
        }
        for fragment in fragments {
            for upstream in scanned_tables(&fragment.label) {
                edges.push(EdgeView {
                    from_fragment: None,
                    from_job: Some(upstream),
                    to_fragment: fragment.id,
                    exchange: "hash",
                });
            }
        }
        if job.kind == "cdc table"
            && let Some(first) = fragments.first()
            && let Some(source) = self.source_of(TableId(job.id))
        {
            edges.push(EdgeView {
                from_fragment: None,
                from_job: Some(source),
                to_fragment: first.id,
                exchange: "simple",
            });
        }
        edges
    }

    /// The position a source's state records (0: none).
    fn recorded(&self, source: &crate::catalog::SourceCatalog) -> u64 {
        let state = self.engine.catalog().table_by_id(source.state_table);
        state.and_then(|s| recorded_position(self.engine.store(), &s).ok()).unwrap_or(0)
    }

    fn source_of(&self, table: TableId) -> Option<String> {
        let catalog = self.engine.catalog();
        let cdc = catalog.table_by_id(table)?.cdc.clone()?;
        catalog.sources().into_iter().find(|s| s.id == cdc.source).map(|s| s.name.clone())
    }

    /// Every CDC source with its lag; asks each upstream (waiting at most 2 s).
    pub async fn sources(&self) -> Vec<SourceView> {
        let catalog = self.engine.catalog();
        let tables = catalog.tables();
        let mut views = Vec::new();
        for source in catalog.sources() {
            let Ok(config) = SourceConfig::from_options(&source.name, &source.options) else {
                continue;
            };
            let readers: Vec<String> = tables
                .iter()
                .filter(|t| t.cdc.as_ref().is_some_and(|c| c.source == source.id))
                .map(|t| t.name.clone())
                .collect();
            views.push(SourceView {
                name: source.name.clone(),
                connector: source.options.get("connector").cloned().unwrap_or_default(),
                upstream: config.upstream(),
                slot: config.reader(),
                tables: readers,
                lag_bytes: config.lag_bytes(UPSTREAM_TIMEOUT, self.recorded(&source)).await,
                lag_seconds: self.engine.metrics().cdc_lag_seconds(&source.name),
                error: self.engine.metrics().cdc_last_error(&source.name),
            });
        }
        views
    }

    /// The engine's state for a scrape of `/metrics`.
    pub async fn scrape(&self) -> Scrape {
        let graph = self.engine.graph();
        let catalog = self.engine.catalog();
        let layouts: HashMap<TableId, Vec<Fragment>> = graph.fragments().into_iter().collect();
        let mut backfills = Vec::new();
        for creating in graph.creating.jobs() {
            let rate_limit = catalog.table_by_id(creating.id).and_then(|t| t.backfill_rate_limit);
            let progress = creating.progress(rate_limit);
            let kind = if creating.is_cdc { "CDC" } else { "ARRANGEMENT" };
            let layout = layouts.get(&creating.id);
            let fragments = creating
                .fragments()
                .into_iter()
                .map(|p| {
                    let fragment = layout.and_then(|fragments| {
                        fragments.iter().find(|f| backfills_in(f, &p.upstream, Some(&creating)))
                    });
                    let id = fragment.map_or_else(|| p.upstream.clone(), |f| f.id.to_string());
                    (id, kind, p.rows_done)
                })
                .collect();
            backfills.push(BackfillScrape {
                job: creating.name.clone(),
                fragments,
                rows_per_second: progress.rows_per_second,
                ratio: progress.rows_total.map(|t| ratio(progress.rows_done, t)),
                status: progress.status.label(),
            });
        }
        let actors = layouts
            .values()
            .flatten()
            .map(|fragment| (fragment.id, fragment.actors.len()))
            .collect();
        let store = self.engine.store();
        let rocksdb = ROCKSDB_PROPERTIES
            .iter()
            .filter_map(|(name, property, help)| {
                store.state_property(property).map(|v| (*name, *help, v))
            })
            .collect();
        let cdc_sources = self.sources().await.into_iter().map(|s| (s.name, s.lag_bytes)).collect();
        Scrape { backfills, actors, rocksdb, cdc_sources }
    }
}

/// RocksDB properties of the state column family in `/metrics`: name after
/// `sluice_rocksdb_`, property, help.
const ROCKSDB_PROPERTIES: [(&str, &str, &str); 7] = [
    (
        "memtable_bytes",
        "rocksdb.cur-size-all-mem-tables",
        "Bytes of the state's memtables (active and unflushed)",
    ),
    ("sst_bytes", "rocksdb.total-sst-files-size", "Bytes of the state's SST files"),
    (
        "pending_compaction_bytes",
        "rocksdb.estimate-pending-compaction-bytes",
        "Bytes RocksDB estimates compaction still has to rewrite",
    ),
    ("estimated_keys", "rocksdb.estimate-num-keys", "Keys RocksDB estimates the state holds"),
    (
        "running_compactions",
        "rocksdb.num-running-compactions",
        "Compactions of the state running now (RocksDB's own and a snapshot's merge)",
    ),
    ("running_flushes", "rocksdb.num-running-flushes", "Memtable flushes of the state running now"),
    (
        "compaction_pending",
        "rocksdb.compaction-pending",
        "1 if RocksDB has a compaction of the state to schedule, else 0",
    ),
];

fn ratio(done: u64, total: u64) -> f64 {
    if total == 0 { 1.0 } else { (done as f64 / total as f64).min(1.0) }
}

/// Fills a creating job's progress, status and the reason for it.
fn fill_progress(job: &mut JobView, creating: &CreatingJob, rate_limit: Option<u64>) {
    let progress = creating.progress(rate_limit);
    job.creating = true;
    job.reason = match &progress.status {
        JobStatus::Paused => Some(
            "the backfill rate limit is 0: ALTER .. SET BACKFILL_RATE_LIMIT = DEFAULT resumes it"
                .to_owned(),
        ),
        JobStatus::Throttled => Some(format!(
            "the backfill rate limit is {} rows/s per actor",
            rate_limit.unwrap_or_default()
        )),
        JobStatus::Starved => Some(format!(
            "no snapshot row read in the last {STARVED_CHECKPOINTS} checkpoints: the upstream \
             job is busy or barriers are slow"
        )),
        JobStatus::WaitingForUpstream(_) | JobStatus::Stopped(_) => {
            Some(progress.status.to_string())
        }
        JobStatus::Running => None,
    };
    job.status = progress.status.to_string();
    job.progress = progress.rows_total.map(|t| ratio(progress.rows_done, t));
    job.rows_done = Some(progress.rows_done);
    job.rows_total = progress.rows_total;
    job.rows_per_second = Some(progress.rows_per_second);
    job.eta_seconds = progress.eta_seconds;
}

/// Whether `fragment` runs the backfill reading `upstream`: a view's scan names its upstream
/// in the fragment's label; a CDC table's backfill is its first, single-actor fragment.
fn backfills_in(fragment: &Fragment, upstream: &str, job: Option<&Arc<CreatingJob>>) -> bool {
    if job.is_some_and(|j| j.is_cdc) {
        return fragment.label.starts_with("CdcBackfill");
    }
    scanned_tables(&fragment.label).iter().any(|t| t == upstream)
}

/// The upstream relations a fragment scans, from its label
/// (`Filter(StreamScan { table: t })`).
fn scanned_tables(label: &str) -> Vec<String> {
    const SCAN: &str = "StreamScan { table: ";
    label
        .match_indices(SCAN)
        .filter_map(|(at, _)| {
            let rest = &label[at + SCAN.len()..];
            rest.find(" }").map(|end| rest[..end].to_owned())
        })
        .collect()
}

/// The inputs of each fragment of a job, as indices into `fragments`.
///
/// A job keeps its fragments lowest first, in the order the plan's builder finishes them: a
/// fragment comes after every fragment below it (post-order), and its label names one
/// `Exchange` per input fragment, left to right. So a stack rebuilds the tree: each fragment
/// takes as many fragments off the stack as its label has exchanges. A fragment without
/// exchanges above a single-actor feeder (a table's DML or a CDC table's backfill, which
/// hash-dispatch to the materialize actors) takes the feeder.
pub fn fragment_inputs(fragments: &[Fragment]) -> Vec<Vec<usize>> {
    let mut stack: Vec<usize> = Vec::new();
    let mut inputs = Vec::with_capacity(fragments.len());
    for (i, fragment) in fragments.iter().enumerate() {
        let exchanges = fragment.label.matches("Exchange").count();
        let taken = if exchanges > 0 {
            stack.split_off(stack.len().saturating_sub(exchanges))
        } else if stack.last().is_some_and(|&top| !fragments[top].partitioned) {
            stack.split_off(stack.len() - 1)
        } else {
            Vec::new()
        };
        inputs.push(taken);
        stack.push(i);
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ActorId;

    fn fragment(id: u32, label: &str, partitioned: bool) -> Fragment {
        Fragment { id, label: label.to_owned(), actors: vec![ActorId(id)], partitioned }
    }

    #[test]
    fn fragment_inputs_rebuild_the_plan_tree() {
        // A join of two aggregated scans: scan a, scan b, join(a, b), then the materialize.
        let fragments = [
            fragment(1, "Project(StreamScan { table: a })", true),
            fragment(2, "StreamScan { table: b }", true),
            fragment(3, "HashJoin(Exchange, Exchange)", true),
            fragment(4, "Materialize(HashAgg(Exchange))", true),
        ];
        assert_eq!(fragment_inputs(&fragments), vec![vec![], vec![], vec![0, 1], vec![2]]);
        assert_eq!(scanned_tables(&fragments[0].label), ["a"]);
        assert!(scanned_tables(&fragments[2].label).is_empty());
        // A table: the DML actor feeds the materialize fragment.
        let table = [fragment(1, "Dml", false), fragment(2, "Materialize { table: t }", true)];
        assert_eq!(fragment_inputs(&table), vec![vec![], vec![0]]);
        // A view without exchanges: one fragment, no inputs.
        let view = [fragment(1, "Materialize(Filter(StreamScan { table: t }))", true)];
        assert_eq!(fragment_inputs(&view), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn every_status_has_a_metric_label_and_says_its_reason() {
        use crate::metrics::BACKFILL_STATUSES;
        let statuses = [
            JobStatus::Running,
            JobStatus::Throttled,
            JobStatus::Paused,
            JobStatus::Starved,
            JobStatus::WaitingForUpstream("refused".into()),
            JobStatus::Stopped("the upstream table was dropped".into()),
        ];
        let labels: Vec<&str> = statuses.iter().map(JobStatus::label).collect();
        assert_eq!(labels, BACKFILL_STATUSES);
        let texts: Vec<String> = statuses.iter().map(ToString::to_string).collect();
        assert_eq!(texts[4], "waiting for upstream: refused");
        assert_eq!(texts[5], "stopped: the upstream table was dropped");
        assert_eq!(texts[2], "paused");
    }
}
