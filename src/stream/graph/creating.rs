//! Jobs still creating: their progress, and when they are created (behind `SHOW JOBS`,
//! `WAIT`, `CANCEL JOBS` and `rw_ddl_progress`).
//!
//! A view or CDC table is *creating* from its `CREATE` until its backfill has finished and that
//! is committed; its catalog entry carries [`CreatingInfo`] meanwhile, so a creating job is
//! resumed (from its persisted progress) after a restart. The [`ProgressTracker`] holds one
//! [`CreatingJob`] per such job with the status channels of its backfill executors; a monitor
//! task per job waits for them to finish, clears the catalog mark and wakes whoever waits (the
//! foreground `CREATE`, `WAIT`).
//!
//! Progress is rows read by the backfills over the upstream's row count: the key count of a
//! Sluice upstream, the estimate of a CDC upstream ([`crate::connector::source::UpstreamSession::estimate_rows`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

use crate::catalog::{Catalog, CreatingInfo, Epoch, RelationKind, TableCatalog, TableId};
use crate::connector::source::SourceConfig;
use crate::error::{Error, Result};
use crate::storage::store::Store;
use crate::stream::barrier::BarrierHandle;
use crate::stream::executor::backfill::state::persisted_progress;
use crate::stream::executor::backfill::status::{BackfillStatus, BackfillWatch};
use crate::stream::graph::StreamGraph;

/// Checkpoints in a row without a snapshot row read after which a backfill counts as starved.
pub const STARVED_CHECKPOINTS: u32 = 5;

/// How a creating job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    /// Its backfill finished and it is created.
    Finished,
    /// It was dropped or cancelled, or its actors stopped.
    Stopped,
}

/// One job still creating.
pub struct CreatingJob {
    /// The job's relation.
    pub id: TableId,
    /// The relation's name.
    pub name: String,
    /// The statement that created it.
    pub statement: String,
    /// A CDC table (else a materialized view).
    pub is_cdc: bool,
    /// How and when it was started.
    pub info: CreatingInfo,
    /// Its backfill executors, and how many times a rescale or recovery replaced them.
    backfills: Mutex<(u64, Vec<BackfillWatch>)>,
    /// The number of replacements, to wait on.
    replaced: watch::Sender<u64>,
    /// Rows its backfills had read when the job (re)started or was rescaled: a floor while the
    /// new actors load their progress.
    persisted_rows: Mutex<u64>,
    /// The upstream row count behind each backfill state table, once known.
    totals: Mutex<HashMap<TableId, u64>>,
    end: watch::Sender<Option<JobEnd>>,
}

/// What a creating job's backfill is doing; its text (`Display`) is the status the jobs view,
/// `rw_ddl_progress` and the dashboard show, its [`label`](JobStatus::label) the metric's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Reading.
    Running,
    /// Reading under a backfill rate limit.
    Throttled,
    /// Not reading: the rate limit is 0.
    Paused,
    /// No snapshot row read in the last checkpoints (the upstream job is busy, or barriers
    /// are slow).
    Starved,
    /// The upstream cannot be read now; the reason.
    WaitingForUpstream(String),
    /// A CDC table that cannot follow its upstream; the reason.
    Stopped(String),
}

impl JobStatus {
    /// The status as a metric label: one of [`crate::metrics::BACKFILL_STATUSES`].
    pub fn label(&self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Throttled => "throttled",
            JobStatus::Paused => "paused",
            JobStatus::Starved => "starved",
            JobStatus::WaitingForUpstream(_) => "waiting_for_upstream",
            JobStatus::Stopped(_) => "stopped",
        }
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobStatus::WaitingForUpstream(error) => write!(f, "waiting for upstream: {error}"),
            JobStatus::Stopped(reason) => write!(f, "stopped: {reason}"),
            other => f.write_str(other.label()),
        }
    }
}

/// A job's progress at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct JobProgress {
    /// Snapshot rows read.
    pub rows_done: u64,
    /// Rows to read, once counted.
    pub rows_total: Option<u64>,
    /// Read rate over the last seconds.
    pub rows_per_second: f64,
    /// Seconds left at the current rate.
    pub eta_seconds: Option<f64>,
    /// What the backfill is doing.
    pub status: JobStatus,
    /// `12.34% (1234/10000)`, below 100% until the job is created.
    pub progress: String,
}

/// What a backfilling scan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BackfillKind {
    /// A view's scan of its upstream's stored state, per vnode.
    #[serde(rename = "ARRANGEMENT")]
    Arrangement,
    /// A CDC table's snapshot of its upstream table, per split.
    #[serde(rename = "CDC")]
    Cdc,
}

impl BackfillKind {
    /// `ARRANGEMENT` or `CDC`, as the system tables and the HTTP API say it.
    pub fn name(self) -> &'static str {
        match self {
            BackfillKind::Arrangement => "ARRANGEMENT",
            BackfillKind::Cdc => "CDC",
        }
    }
}

/// The progress of one fragment (one backfilling scan) of a job, as `rw_fragment_backfill_progress`
/// and the HTTP API serve it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FragmentProgress {
    /// What the scan reads.
    pub kind: BackfillKind,
    /// The scan's state table.
    pub state_table: TableId,
    /// What it reads.
    pub upstream: String,
    /// Its actors.
    pub actors: usize,
    /// Rows read.
    pub rows_done: u64,
    /// Rows of the upstream, once counted.
    pub rows_total: Option<u64>,
    /// Vnodes (or splits) done, and in all.
    pub units_done: u32,
    /// See `units_done`.
    pub units_total: u32,
    /// Rows per second.
    pub rows_per_second: f64,
    /// The upstream position reached (CDC).
    pub upstream_offset: Option<String>,
}

impl CreatingJob {
    fn statuses(&self) -> Vec<BackfillStatus> {
        self.backfills.lock().1.iter().map(|b| b.status.borrow().clone()).collect()
    }

    /// Why one of the job's CDC tables stopped following its upstream, if one did: the job
    /// will not finish.
    pub fn stopped(&self) -> Option<String> {
        self.statuses().into_iter().find_map(|s| s.stopped)
    }

    /// The current backfill executors and their generation.
    fn watches(&self) -> (u64, Vec<BackfillWatch>) {
        self.backfills.lock().clone()
    }

    /// Switches to the backfill executors of a rescaled job; what the old ones read stays
    /// the floor of the progress.
    pub fn replace_backfills(&self, backfills: Vec<BackfillWatch>) {
        let read: u64 = self.statuses().iter().map(|s| s.rows).sum();
        let mut floor = self.persisted_rows.lock();
        *floor = (*floor).max(read);
        let mut current = self.backfills.lock();
        *current = (current.0 + 1, backfills);
        self.replaced.send_replace(current.0);
    }

    /// Waits until the backfills of `generation` are replaced (returns true) or the job has
    /// ended (false).
    async fn replaced_or_ended(&self, generation: u64) -> bool {
        let mut replaced = self.replaced.subscribe();
        let mut end = self.end.subscribe();
        tokio::select! {
            r = replaced.wait_for(|g| *g != generation) => r.is_ok(),
            _ = end.wait_for(Option::is_some) => false,
        }
    }

    /// The upstream rows to read, if every upstream has been counted.
    fn total(&self) -> Option<u64> {
        let totals = self.totals.lock();
        let tables: HashSet<TableId> =
            self.backfills.lock().1.iter().map(|b| b.state_table).collect();
        tables.iter().map(|t| totals.get(t).copied()).sum()
    }

    /// The job's progress; `rate_limit` is the limit now set for it.
    pub fn progress(&self, rate_limit: Option<u64>) -> JobProgress {
        let statuses = self.statuses();
        let floor = *self.persisted_rows.lock();
        let rows_done = statuses.iter().map(|s| s.rows).sum::<u64>().max(floor);
        let rows_per_second =
            (statuses.iter().map(|s| s.rows_per_second).sum::<f64>() * 10.0).round() / 10.0;
        let rows_total = self.total();
        let unfinished: Vec<&BackfillStatus> =
            statuses.iter().filter(|s| s.finished.is_none()).collect();
        let status = if let Some(reason) = statuses.iter().find_map(|s| s.stopped.clone()) {
            JobStatus::Stopped(reason)
        } else if let Some(error) = unfinished.iter().find_map(|s| s.upstream_error.clone()) {
            JobStatus::WaitingForUpstream(error)
        } else if rate_limit == Some(0) && !unfinished.is_empty() {
            JobStatus::Paused
        } else if !unfinished.is_empty()
            && unfinished.iter().all(|s| s.idle_checkpoints >= STARVED_CHECKPOINTS)
        {
            JobStatus::Starved
        } else if rate_limit.is_some() && !unfinished.is_empty() {
            JobStatus::Throttled
        } else {
            JobStatus::Running
        };
        // A paused job reads nothing, whatever it read in the last seconds.
        let rows_per_second = if status == JobStatus::Paused { 0.0 } else { rows_per_second };
        let eta_seconds = match rows_total {
            Some(total) if rows_per_second > 0.0 => {
                Some(total.saturating_sub(rows_done) as f64 / rows_per_second)
            }
            Some(total) if rows_done >= total => Some(0.0),
            _ => None,
        };
        JobProgress {
            rows_done,
            rows_total,
            rows_per_second,
            eta_seconds,
            status,
            progress: progress_text(rows_done, rows_total),
        }
    }

    /// Progress per backfilling scan, in state-table order.
    pub fn fragments(&self) -> Vec<FragmentProgress> {
        let totals = self.totals.lock().clone();
        let mut by_table: BTreeMap<TableId, FragmentProgress> = BTreeMap::new();
        for backfill in &self.watches().1 {
            let status = backfill.status.borrow().clone();
            let entry = by_table.entry(backfill.state_table).or_insert_with(|| FragmentProgress {
                kind: if self.is_cdc { BackfillKind::Cdc } else { BackfillKind::Arrangement },
                state_table: backfill.state_table,
                upstream: backfill.upstream.clone(),
                actors: 0,
                rows_done: 0,
                rows_total: totals.get(&backfill.state_table).copied(),
                units_done: 0,
                units_total: 0,
                rows_per_second: 0.0,
                upstream_offset: None,
            });
            entry.actors += 1;
            entry.rows_done += status.rows;
            entry.units_done += status.units_done;
            entry.units_total += status.units_total;
            entry.rows_per_second += status.rows_per_second;
            entry.upstream_offset = entry.upstream_offset.take().or(status.upstream_offset);
        }
        by_table.into_values().collect()
    }

    /// Waits until the job is created or stopped.
    pub async fn wait(&self) -> JobEnd {
        let mut end = self.end.subscribe();
        match end.wait_for(Option::is_some).await {
            Ok(end) => end.expect("waited for it"),
            Err(_) => JobEnd::Stopped,
        }
    }
}

/// `12.34% (1234/10000)`, capped at 99.99% while the job is creating.
fn progress_text(done: u64, total: Option<u64>) -> String {
    match total {
        Some(total) if total > 0 => {
            let percent = (done as f64 * 100.0 / total as f64).min(99.99);
            format!("{percent:.2}% ({done}/{total})")
        }
        Some(_) if done == 0 => "0.00% (0/0)".to_owned(),
        Some(_) => format!("99.99% ({done}/0)"),
        None => format!("{done} rows (total unknown yet)"),
    }
}

/// Every job still creating.
pub struct ProgressTracker {
    jobs: Mutex<BTreeMap<TableId, Arc<CreatingJob>>>,
    count: watch::Sender<usize>,
}

impl Default for ProgressTracker {
    fn default() -> Self {
        Self { jobs: Mutex::default(), count: watch::Sender::new(0) }
    }
}

impl ProgressTracker {
    /// The creating job of relation `id`.
    pub fn get(&self, id: TableId) -> Option<Arc<CreatingJob>> {
        self.jobs.lock().get(&id).cloned()
    }

    /// Every creating job, oldest first.
    pub fn jobs(&self) -> Vec<Arc<CreatingJob>> {
        self.jobs.lock().values().cloned().collect()
    }

    /// The progress text of relation `id` while it is creating.
    pub fn progress_text(&self, id: TableId) -> Option<String> {
        self.get(id).map(|job| job.progress(None).progress)
    }

    fn insert(&self, job: Arc<CreatingJob>) {
        let mut jobs = self.jobs.lock();
        jobs.insert(job.id, job);
        self.count.send_replace(jobs.len());
    }

    /// Ends the job of relation `id`, which is being dropped.
    pub fn stop(&self, id: TableId) {
        if let Some(job) = self.get(id) {
            self.end(&job, JobEnd::Stopped);
        }
    }

    fn end(&self, job: &CreatingJob, end: JobEnd) {
        let mut jobs = self.jobs.lock();
        jobs.remove(&job.id);
        self.count.send_replace(jobs.len());
        job.end.send_replace(Some(end));
    }

    /// Waits until no job is creating.
    pub async fn wait_all(&self) {
        let mut count = self.count.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl StreamGraph {
    /// Follows a creating job: registers it with the tracker, counts its upstream rows, and
    /// spawns the monitor that marks it created once its backfill is committed.
    pub fn track_job(
        &self,
        relation: &TableCatalog,
        backfills: Vec<BackfillWatch>,
    ) -> Result<Arc<CreatingJob>> {
        let info = relation.creating.expect("only creating jobs are tracked");
        let mut persisted_rows = 0;
        let state_tables: HashSet<TableId> = backfills.iter().map(|b| b.state_table).collect();
        for id in &state_tables {
            if let Some(table) = self.catalog.table_by_id(*id) {
                persisted_rows += persisted_progress(&self.store, &table)?.rows;
            }
        }
        let statement = match relation.kind {
            RelationKind::MaterializedView => {
                format!("CREATE MATERIALIZED VIEW {} AS {}", relation.name, relation.definition)
            }
            _ => relation.definition.clone(),
        };
        let job = Arc::new(CreatingJob {
            id: relation.id,
            name: relation.name.clone(),
            statement,
            is_cdc: relation.cdc.is_some(),
            info,
            backfills: Mutex::new((0, backfills)),
            persisted_rows: Mutex::new(persisted_rows),
            totals: Mutex::default(),
            replaced: watch::Sender::new(0),
            end: watch::Sender::new(None),
        });
        self.creating.insert(job.clone());
        // Only a view planned with eager aggregation may have partial aggregates to release.
        let release = relation.eager_aggregation.then(|| self.barrier.clone());
        tokio::spawn(monitor(
            job.clone(),
            self.creating.clone(),
            self.catalog.clone(),
            self.store.clone(),
            release,
        ));
        tokio::spawn(count_upstreams(job.clone(), relation.clone(), self.catalog.clone(), {
            self.store.clone()
        }));
        Ok(job)
    }
}

/// `FOREGROUND` or `BACKGROUND`.
pub fn create_type(info: &CreatingInfo) -> &'static str {
    if info.background { "BACKGROUND" } else { "FOREGROUND" }
}

/// Waits for every backfill of `job` to finish and that to be committed, then (with `release`)
/// has its held partial aggregates emit their groups, then marks the relation created.
///
/// Executors that stop before they finish are replaced by a rescale or a recovery (whose new
/// executors go on from the committed progress), or the job was dropped, which ends it
/// explicitly (`ProgressTracker::stop`). A finish recorded in an epoch a recovery discarded
/// did not happen: the new executors finish again.
async fn monitor(
    job: Arc<CreatingJob>,
    tracker: Arc<ProgressTracker>,
    catalog: Arc<Catalog>,
    store: Arc<Store>,
    release: Option<BarrierHandle>,
) {
    // A CDC table's snapshot epochs pile up in level 0 until it finishes (see
    // `Store::defer_level0_merges`); held until they are merged, or the job ends unfinished.
    let deferral = job.is_cdc.then(|| store.defer_level0_merges(job.id));
    loop {
        let (generation, backfills) = job.watches();
        let committed = tokio::select! {
            finished = all_finished(&backfills) => match finished {
                Some(epoch) => match store.wait_committed(epoch).await {
                    // Released in a later epoch: a restart before it holds again, and a
                    // restart after it finds the vnodes released.
                    Ok(()) => match &release {
                        Some(barrier) => barrier.release(job.id).await.map(|_| {
                            if crate::failpoint::fires(|| format!("released:{}", job.name)) {
                                // A crash between the release and the catalog's mark.
                                std::process::abort();
                            }
                        }),
                        None => Ok(()),
                    },
                    Err(e) => Err(e),
                },
                None => Err(Error::Recovered("the backfill executors stopped".into())),
            },
            replaced = job.replaced_or_ended(generation) => match replaced {
                true => continue,
                false => return,
            },
        };
        match committed {
            Ok(()) => break,
            Err(Error::Recovered(_)) if job.replaced_or_ended(generation).await => continue,
            Err(_) => return tracker.end(&job, JobEnd::Stopped),
        }
    }
    match catalog.update_table(job.id, |t| t.creating = None) {
        Ok(Some(created)) => {
            tracing::info!(relation = %job.name, id = %job.id, "created");
            tracker.end(&job, JobEnd::Finished);
            if created.cdc.is_some() {
                // The snapshot's epochs sit in level 0 (see `Store::compact_table`). Merges
                // stay deferred until this one is done, so that none runs beside it.
                let (name, started) = (job.name.clone(), std::time::Instant::now());
                tokio::task::spawn_blocking(move || {
                    let merged = store.compact_table(job.id);
                    drop(deferral);
                    let secs = started.elapsed().as_secs_f64();
                    match merged {
                        true => {
                            tracing::info!(relation = %name, secs, "merged the snapshot's level-0 files")
                        }
                        false => {
                            tracing::info!(relation = %name, secs, "the snapshot's merge stopped for the shutdown")
                        }
                    }
                });
            }
        }
        Ok(None) => tracker.end(&job, JobEnd::Stopped),
        Err(e) => {
            tracing::error!(relation = %job.name, error = %e, "marking the job created failed");
            tracker.end(&job, JobEnd::Stopped);
        }
    }
}

/// Waits until every backfill has finished; returns the last epoch that recorded it, or `None`
/// if one stopped first.
async fn all_finished(backfills: &[BackfillWatch]) -> Option<Epoch> {
    let mut finished = Epoch(0);
    for backfill in backfills {
        let mut status = backfill.status.clone();
        let epoch = status.wait_for(|s| s.finished.is_some()).await.ok()?.finished;
        finished = finished.max(epoch.expect("waited for it"));
    }
    Some(finished)
}

/// Counts the rows each backfill of `job` has to read.
async fn count_upstreams(
    job: Arc<CreatingJob>,
    relation: TableCatalog,
    catalog: Arc<Catalog>,
    store: Arc<Store>,
) {
    let mut seen = HashSet::new();
    for backfill in &job.watches().1 {
        if !seen.insert(backfill.state_table) {
            continue;
        }
        let count = match &relation.cdc {
            Some(cdc) => count_upstream(&catalog, cdc).await,
            None => match catalog.table_by_name(&backfill.upstream) {
                Some(upstream) => {
                    let store = store.clone();
                    tokio::task::spawn_blocking(move || count_keys(&store, &upstream))
                        .await
                        .unwrap_or_else(|e| Err(Error::Stream(e.to_string())))
                }
                None => continue,
            },
        };
        match count {
            Ok(n) => {
                job.totals.lock().insert(backfill.state_table, n);
            }
            Err(e) => tracing::warn!(job = %job.name, error = %e, "counting the upstream rows"),
        }
    }
}

/// Up to this many rows, an upstream table's rows are counted one by one.
const EXACT_COUNT: u64 = 100_000;

/// The number of rows `table` holds in the last committed epoch: exact up to [`EXACT_COUNT`]
/// rows, else an estimate (see [`Store::estimate_rows`]). Counting every row of a big table cost
/// as much as a sixth of its backfill.
fn count_keys(store: &Arc<Store>, table: &TableCatalog) -> Result<u64> {
    let state = table.state_table(store.clone());
    let (start, end) = state.full_range();
    store.estimate_rows(&start, &end, EXACT_COUNT)
}

/// The row estimate of a CDC table's upstream table (see [`crate::connector::source::UpstreamSession::estimate_rows`]).
async fn count_upstream(catalog: &Catalog, cdc: &crate::catalog::CdcTableInfo) -> Result<u64> {
    let source = catalog
        .sources()
        .into_iter()
        .find(|s| s.id == cdc.source)
        .ok_or_else(|| Error::Stream("the source is gone".into()))?;
    let config = SourceConfig::from_options(&source.name, &source.options)?;
    config.session().await?.estimate_rows(&cdc.schema, &cdc.table).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job of `n` backfills whose status senders the test drives.
    fn job(n: usize) -> (CreatingJob, Vec<watch::Sender<BackfillStatus>>) {
        let mut senders = Vec::new();
        let backfills = (0..n)
            .map(|_| {
                let (tx, rx) = watch::channel(BackfillStatus::default());
                senders.push(tx);
                BackfillWatch { state_table: TableId(10), upstream: "t".into(), status: rx }
            })
            .collect();
        let job = CreatingJob {
            id: TableId(1),
            name: "v".into(),
            statement: "CREATE MATERIALIZED VIEW v AS SELECT 1".into(),
            is_cdc: false,
            info: CreatingInfo { background: true, initialized_at_ms: 0 },
            backfills: Mutex::new((0, backfills)),
            persisted_rows: Mutex::new(10),
            totals: Mutex::new(HashMap::from([(TableId(10), 1000)])),
            replaced: watch::Sender::new(0),
            end: watch::Sender::new(None),
        };
        (job, senders)
    }

    #[test]
    fn statuses_say_why_a_job_does_not_move() {
        let (job, senders) = job(2);
        // Before the actors report, the persisted rows count.
        let p = job.progress(None);
        assert_eq!((p.rows_done, p.rows_total, &p.status), (10, Some(1000), &JobStatus::Running));
        assert_eq!(p.progress, "1.00% (10/1000)");
        let moving = BackfillStatus { rows: 200, rows_per_second: 100.0, ..Default::default() };
        senders[0].send_replace(moving.clone());
        senders[1].send_replace(moving.clone());
        let p = job.progress(None);
        assert_eq!((p.rows_done, p.rows_per_second, p.eta_seconds), (400, 200.0, Some(3.0)));
        assert_eq!(job.progress(Some(100)).status, JobStatus::Throttled);
        let paused = job.progress(Some(0));
        assert_eq!((&paused.status, paused.rows_per_second), (&JobStatus::Paused, 0.0));
        assert_eq!(paused.eta_seconds, None);
        // Starved only when every unfinished backfill is idle.
        let idle = BackfillStatus { idle_checkpoints: STARVED_CHECKPOINTS, ..moving.clone() };
        senders[0].send_replace(idle.clone());
        assert_eq!(job.progress(None).status, JobStatus::Running);
        senders[1].send_replace(idle.clone());
        assert_eq!(job.progress(None).status, JobStatus::Starved);
        // A finished backfill is never the reason.
        senders[1].send_replace(BackfillStatus { finished: Some(Epoch(3)), ..idle.clone() });
        assert_eq!(job.progress(None).status, JobStatus::Starved);
        let failing = BackfillStatus { upstream_error: Some("connection refused".into()), ..idle };
        senders[0].send_replace(failing);
        assert_eq!(
            job.progress(Some(0)).status.to_string(),
            "waiting for upstream: connection refused"
        );
        let fragments = job.fragments();
        assert_eq!(fragments.len(), 1);
        assert_eq!((fragments[0].actors, fragments[0].rows_total), (2, Some(1000)));
    }

    #[test]
    fn progress_is_capped_below_100_percent() {
        assert_eq!(progress_text(1234, Some(10000)), "12.34% (1234/10000)");
        assert_eq!(progress_text(12000, Some(10000)), "99.99% (12000/10000)");
        assert_eq!(progress_text(10000, Some(10000)), "99.99% (10000/10000)");
        assert!(progress_text(5, None).starts_with("5 rows"));
    }
}
