//! Job control from SQL: building every job at start-up (and in a recovery), `SHOW JOBS`,
//! `WAIT`, `CANCEL JOBS`, and waiting for a foreground `CREATE`.
//!
//! The engine decides which jobs run, from the catalog and the planner; `stream::graph` builds,
//! spawns and tracks them.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::catalog::{ActorId, CreatingInfo, RelationKind, TableId};
use crate::engine::session::text_rows;
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::stream::graph::creating::{CreatingJob, JobEnd, JobProgress, JobStatus, create_type};

/// How often a foreground CREATE looks whether its job stopped for good.
const STOPPED_CHECK: std::time::Duration = std::time::Duration::from_millis(200);

impl Engine {
    /// Removes internal tables whose view is gone: a crash between writing a new view's
    /// internal tables and the view itself leaves them behind.
    fn drop_orphans(&self) -> Result<()> {
        for table in self.catalog.tables() {
            // An owner that is a relation lists its internal tables (a CDC table reading its
            // snapshot again replaced its state table); a source has one.
            let owner_exists = table.owner.is_some_and(|o| match self.catalog.table_by_id(o) {
                Some(owner) => owner.internal_tables.contains(&table.id),
                None => self.catalog.sources().iter().any(|s| s.id == o),
            });
            if table.kind == RelationKind::Internal && !owner_exists {
                tracing::info!(table = %table.name, "dropping the orphaned internal table");
                self.catalog.drop_table(table.id)?;
                self.store.drop_table_data(table.id)?;
            }
        }
        Ok(())
    }

    /// Rebuilds the job of every source, table and view at start-up (or in a recovery) and
    /// starts them together.
    pub(crate) async fn start_jobs(&self) -> Result<()> {
        self.drop_orphans()?;
        let mut actor_of: HashMap<TableId, Vec<ActorId>> = HashMap::new();
        let mut prepared = Vec::new();
        for source in self.catalog.sources() {
            let job = self.graph.prepare_source_job(&source)?;
            actor_of.insert(source.id, job.output_actors());
            prepared.push(job);
        }
        for relation in self.catalog.tables() {
            let job = match relation.kind {
                RelationKind::Table if relation.cdc.is_some() => {
                    let source = relation.cdc.as_ref().expect("checked").source;
                    let actor = actor_of.get(&source).and_then(|a| a.first().copied()).ok_or_else(
                        || Error::Storage(format!("the source of {} is missing", relation.name)),
                    )?;
                    self.graph.prepare_cdc_table_job(&relation, actor)?
                }
                RelationKind::Table => self.graph.prepare_table_job(&relation),
                RelationKind::MaterializedView => {
                    let plan = self.replan_view(&relation).await?;
                    self.graph.prepare_view_job(&relation, &plan, &|id| {
                        actor_of.get(&id).cloned().unwrap_or_default()
                    })?
                }
                RelationKind::Internal => continue,
            };
            actor_of.insert(relation.id, job.output_actors());
            prepared.push(job);
        }
        let mut creating = Vec::new();
        for (id, backfills) in self.graph.start_jobs(prepared).await? {
            let Some(relation) = self.catalog.table_by_id(id) else { continue };
            let Some(info) = relation.creating else { continue };
            // After a recovery, a job still tracked follows its new backfills; a foreground
            // CREATE keeps waiting for it.
            if let Some(job) = self.graph.creating.get(relation.id) {
                job.replace_backfills(backfills);
                continue;
            }
            // Nobody waits for it any more: it goes on in the background.
            let relation = match info.background {
                true => relation,
                false => self
                    .catalog
                    .update_table(relation.id, |t| {
                        t.creating = Some(CreatingInfo { background: true, ..info })
                    })?
                    .unwrap_or(relation),
            };
            creating.push((relation, backfills));
        }
        // Jobs that were creating go on from their persisted progress, in the background.
        for (relation, backfills) in creating {
            tracing::info!(relation = %relation.name, "resuming the creation");
            self.graph.track_job(&relation, backfills)?;
        }
        Ok(())
    }

    /// Waits for a job started by a foreground `CREATE`, telling `session` how it goes every
    /// `progress_notice_interval`; a job that stops without finishing was cancelled (its
    /// relation is gone) or failed.
    pub(crate) async fn wait_created(&self, job: &CreatingJob, session: &Session) -> Result<()> {
        let notices = session.progress_notice_interval()?;
        let mut ticks = notices.map(|i| tokio::time::interval_at(Instant::now() + i, i));
        let mut checks = tokio::time::interval(STOPPED_CHECK);
        let end = job.wait();
        tokio::pin!(end);
        let end = loop {
            tokio::select! {
                end = &mut end => break end,
                _ = async { ticks.as_mut().expect("ticking").tick().await }, if ticks.is_some() => {
                    let limit =
                        self.catalog.table_by_id(job.id).and_then(|t| t.backfill_rate_limit);
                    session.notice(progress_notice(&job.name, &job.progress(limit)));
                }
                _ = checks.tick() => {
                    if let Some(reason) = job.stopped() {
                        return Err(self.drop_stopped(job, reason).await);
                    }
                }
            }
        };
        if end == JobEnd::Finished {
            return Ok(());
        }
        // A drop stops the job before it removes the catalog entries; wait until it is done.
        let _ddl = self.ddl_lock.lock().await;
        if self.catalog.table_by_id(job.id).is_none() {
            return Err(Error::Canceled(format!(
                "the creation of \"{}\" was cancelled (CANCEL JOBS or DROP)",
                job.name
            )));
        }
        Err(Error::Stream(format!("the job of \"{}\" stopped before it finished", job.name)))
    }

    /// A CDC table whose creation cannot finish (it stopped following its upstream, see
    /// `stream::executor::backfill::upstream_guard`) is dropped, as a failed CREATE leaves
    /// nothing; the error says why.
    async fn drop_stopped(&self, job: &CreatingJob, reason: String) -> Error {
        let _ddl = self.ddl_lock.lock().await;
        if let Some(relation) = self.catalog.table_by_id(job.id)
            && let Err(e) = self.drop_with_dependents(&relation).await
        {
            tracing::warn!(relation = %job.name, error = %e, "dropping a stopped table failed");
        }
        let code = match reason.contains("cannot be held exactly") {
            true => "22003",
            false => "55000",
        };
        Error::Upstream { code, message: format!("CREATE TABLE {} failed: {reason}", job.name) }
    }

    /// `SHOW JOBS`: the jobs still creating.
    pub(crate) fn show_jobs(&self) -> Output {
        let rows = self
            .graph
            .creating
            .jobs()
            .iter()
            .map(|job| {
                let limit = self.catalog.table_by_id(job.id).and_then(|t| t.backfill_rate_limit);
                vec![
                    job.id.0.to_string(),
                    job.statement.clone(),
                    create_type(&job.info).to_owned(),
                    job.progress(limit).progress,
                ]
            })
            .collect();
        text_rows(&["Id", "Statement", "Create Type", "Progress"], rows)
    }

    /// `WAIT`: returns once no job is creating; fails when the only jobs left are CDC tables
    /// that stopped following their upstream (they will never finish), naming them.
    pub(crate) async fn wait_jobs(&self) -> Result<Output> {
        let all = self.graph.creating.wait_all();
        tokio::pin!(all);
        let mut checks = tokio::time::interval(STOPPED_CHECK);
        loop {
            tokio::select! {
                _ = &mut all => return Ok(Output::Command(CommandTag::new("WAIT"))),
                _ = checks.tick() => {
                    let jobs = self.graph.creating.jobs();
                    let stopped: Vec<String> = jobs
                        .iter()
                        .filter_map(|job| job.stopped().map(|why| format!("{}: {why}", job.name)))
                        .collect();
                    if !jobs.is_empty() && stopped.len() == jobs.len() {
                        return Err(Error::Upstream {
                            code: "55000",
                            message: format!(
                                "jobs that cannot finish (DROP them, or CANCEL JOBS): {}",
                                stopped.join("; ")
                            ),
                        });
                    }
                }
            }
        }
    }

    /// `CANCEL JOBS id, ..`: drops each creating job with its state; lists the cancelled ids.
    pub(crate) async fn cancel_jobs(&self, ids: &[u32]) -> Result<Output> {
        let mut jobs = Vec::with_capacity(ids.len());
        for &id in ids {
            let job = self.graph.creating.get(TableId(id)).ok_or_else(|| {
                Error::InvalidStatement(format!(
                    "job {id} does not exist or has finished; SHOW JOBS lists the running ones"
                ))
            })?;
            jobs.push(job);
        }
        let mut cancelled = Vec::new();
        for job in jobs {
            let _ddl = self.ddl_lock.lock().await;
            if let Some(relation) = self.catalog.table_by_id(job.id) {
                self.drop_with_dependents(&relation).await?;
                cancelled.push(vec![job.id.0.to_string()]);
            }
        }
        Ok(text_rows(&["Id"], cancelled))
    }
}

/// A progress notice: `backfill of v: 42.00% (4.2 M / 10.0 M rows, 1.1 M rows/s, eta 5 s)`,
/// with the status when it is not `running`.
fn progress_notice(name: &str, p: &JobProgress) -> String {
    let rate = format!("{} rows/s", count(p.rows_per_second as u64));
    let mut parts = match p.rows_total {
        Some(total) => {
            let percent = match total {
                0 => 99.99,
                _ => (p.rows_done as f64 * 100.0 / total as f64).min(99.99),
            };
            let head = format!("{percent:.2}% ({} / {} rows", count(p.rows_done), count(total));
            vec![head, rate]
        }
        None => vec![format!("{} rows read (of an unknown total yet", count(p.rows_done)), rate],
    };
    if let Some(eta) = p.eta_seconds {
        parts.push(format!("eta {eta:.0} s"));
    }
    if p.status != JobStatus::Running {
        parts.push(p.status.to_string());
    }
    format!("backfill of {name}: {})", parts.join(", "))
}

/// `1234`, `12.3 k`, `4.2 M`.
fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1} k", n as f64 / 1e3),
        _ => format!("{:.1} M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(done: u64, total: Option<u64>, rate: f64, status: JobStatus) -> JobProgress {
        JobProgress {
            rows_done: done,
            rows_total: total,
            rows_per_second: rate,
            eta_seconds: total.filter(|_| rate > 0.0).map(|t| (t - done) as f64 / rate),
            status,
            progress: String::new(),
        }
    }

    #[test]
    fn progress_notices_read_like_a_progress_bar() {
        let p = progress(4_200_000, Some(10_000_000), 1_100_000.0, JobStatus::Running);
        assert_eq!(
            progress_notice("v", &p),
            "backfill of v: 42.00% (4.2 M / 10.0 M rows, 1.1 M rows/s, eta 5 s)"
        );
        let p = progress(1234, None, 0.0, JobStatus::Paused);
        assert_eq!(
            progress_notice("t", &p),
            "backfill of t: 1234 rows read (of an unknown total yet, 0 rows/s, paused)"
        );
        let p = progress(12_345, Some(20_000), 500.0, JobStatus::Throttled);
        assert_eq!(
            progress_notice("t", &p),
            "backfill of t: 61.73% (12.3 k / 20.0 k rows, 500 rows/s, eta 15 s, throttled)"
        );
    }
}
