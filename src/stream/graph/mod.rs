//! The streaming job graph: jobs, their fragments and actors, and everything that builds,
//! spawns, stops and replaces them.
//!
//! A *job* maintains one relation (table, view, CDC table) or one source. It runs in
//! *fragments*, each a group of actors running the same part of the plan over their own
//! vnodes. The engine decides what runs (the catalog, the planner); this module builds the
//! actors, wires their channels, spawns them, registers them with the barrier manager, and
//! keeps the registry of running jobs ([`StreamGraph`]) that DML, rescaling, recovery and the
//! system tables read. At start-up every job is built first and wired, then all actors start
//! together and wait for their first barrier; a job created at runtime attaches to its running
//! upstreams at the next checkpoint.
//!
//! - [`job`]: a running job's layout and a job built but not spawned;
//! - [`build`]: a view's stream plan to actors and channels;
//! - [`order`]: the order in which a view's scans read (`backfill_order`);
//! - [`table`]: the jobs of tables and views, and a table's materialize fragment;
//! - [`cdc`]: the jobs of sources and CDC tables;
//! - [`rescale`]: swapping a job's actors for new ones at one checkpoint barrier;
//! - [`creating`]: jobs still creating: their progress, and when they are created;
//! - [`recovery`]: the log of recoveries.

pub mod build;
pub mod cdc;
pub mod creating;
pub mod job;
pub mod order;
pub mod recovery;
pub mod rescale;
pub mod table;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use crate::catalog::{ActorId, Catalog, Epoch, TableId};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::storage::store::Store;
use crate::stream::actor::Actor;
use crate::stream::barrier::BarrierHandle;
use crate::stream::executor::backfill::status::BackfillWatch;
use crate::stream::message::Output;

use creating::ProgressTracker;
use job::{Fragment, Job, JobLayout, PreparedJob};
use recovery::RecoveryLog;

/// The running streaming jobs, and what builds and spawns them.
pub struct StreamGraph {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    barrier: BarrierHandle,
    /// The running jobs, by relation (or source).
    jobs: Mutex<HashMap<TableId, Arc<Job>>>,
    next_actor: AtomicU32,
    next_fragment: AtomicU32,
    /// Jobs still creating.
    pub creating: Arc<ProgressTracker>,
    /// Recoveries of the streaming jobs since the server started.
    pub recoveries: RecoveryLog,
    /// The server's metrics, which CDC readers count their changes in.
    pub metrics: Arc<Metrics>,
    /// What the next recovery changes of CDC tables: columns found added upstream, tables to
    /// read again.
    pub cdc_rebuilds: Arc<cdc::CdcRebuilds>,
}

impl StreamGraph {
    /// An empty graph whose actors keep their state in `store` and report to `barrier`.
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<Catalog>,
        barrier: BarrierHandle,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            catalog,
            barrier,
            jobs: Mutex::default(),
            next_actor: AtomicU32::new(1),
            next_fragment: AtomicU32::new(1),
            creating: Arc::new(ProgressTracker::default()),
            recoveries: RecoveryLog::default(),
            metrics,
            cdc_rebuilds: Arc::default(),
        }
    }

    /// A new actor id, unique while the server runs.
    pub fn new_actor_id(&self) -> ActorId {
        ActorId(self.next_actor.fetch_add(1, Ordering::Relaxed))
    }

    /// Spawns a prepared job's actors, sending to the given outputs, and records the job.
    pub fn spawn_job(
        &self,
        prepared: &mut PreparedJob,
        outputs: &mut HashMap<ActorId, Vec<Output>>,
    ) {
        let layout = self.spawn_actors(prepared, outputs);
        let job = Job {
            layout: Mutex::new(layout),
            dml: prepared.dml.take(),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            feeder: prepared.feeder,
        };
        self.jobs.lock().insert(prepared.relation, Arc::new(job));
    }

    /// Spawns a prepared job's actors; returns their layout.
    pub fn spawn_actors(
        &self,
        prepared: &mut PreparedJob,
        outputs: &mut HashMap<ActorId, Vec<Output>>,
    ) -> JobLayout {
        let mut tasks = HashMap::new();
        let job = self.job_name(prepared.relation);
        for (&id, root) in prepared.ids.iter().zip(prepared.executors.drain(..)) {
            let mut actor_outputs = prepared.fixed_outputs.remove(&id).unwrap_or_default();
            actor_outputs.extend(outputs.remove(&id).unwrap_or_default());
            let actor = Actor::new(id, job.clone(), root, self.barrier.collector(), actor_outputs);
            tasks.insert(id, actor.spawn());
        }
        let fragments = prepared
            .fragments
            .drain(..)
            .map(|(label, actors, partitioned)| Fragment {
                id: self.next_fragment.fetch_add(1, Ordering::Relaxed),
                label,
                actors,
                partitioned,
            })
            .collect();
        JobLayout {
            output_actors: prepared.output_actors(),
            actors: prepared.ids.clone(),
            tasks,
            fragments,
        }
    }

    /// The name of the relation or source a job maintains.
    fn job_name(&self, relation: TableId) -> Arc<str> {
        let name = match self.catalog.table_by_id(relation) {
            Some(table) => table.name.clone(),
            None => self
                .catalog
                .sources()
                .into_iter()
                .find(|s| s.id == relation)
                .map_or_else(|| relation.to_string(), |s| s.name.clone()),
        };
        Arc::from(name)
    }

    /// Starts a job created at runtime: its actors start, and the next checkpoint attaches its
    /// inputs to the running upstreams. Returns the epoch of that checkpoint.
    pub async fn start_job(
        &self,
        mut prepared: PreparedJob,
    ) -> Result<(Epoch, Vec<BackfillWatch>)> {
        self.spawn_job(&mut prepared, &mut HashMap::new());
        let outputs = std::mem::take(&mut prepared.outputs);
        let sources = std::mem::take(&mut prepared.sources);
        let epoch = self.barrier.register(sources, prepared.actor_ids(), outputs).await?;
        Ok((epoch, prepared.backfills))
    }

    /// Starts jobs built together (at start-up or in a recovery): every job's actors are
    /// spawned with the outputs the others attach to them, and they start together. Returns
    /// each job's backfills, by relation.
    pub async fn start_jobs(
        &self,
        mut prepared: Vec<PreparedJob>,
    ) -> Result<Vec<(TableId, Vec<BackfillWatch>)>> {
        let mut outputs: HashMap<ActorId, Vec<Output>> = HashMap::new();
        for job in &mut prepared {
            for (actor, senders) in job.outputs.drain() {
                outputs.entry(actor).or_default().extend(senders);
            }
        }
        let mut sources = Vec::new();
        let mut actors = Vec::new();
        let mut backfills = Vec::new();
        for mut job in prepared {
            self.spawn_job(&mut job, &mut outputs);
            sources.append(&mut job.sources);
            actors.extend(job.actor_ids());
            backfills.push((job.relation, std::mem::take(&mut job.backfills)));
        }
        self.barrier.register(sources, actors, HashMap::new()).await?;
        Ok(backfills)
    }

    /// Stops a relation's job between checkpoints and forgets it.
    pub async fn stop_job(&self, relation: TableId) -> Result<()> {
        self.creating.stop(relation);
        let Some(job) = self.jobs.lock().remove(&relation) else { return Ok(()) };
        let (actors, tasks) = {
            let mut layout = job.layout.lock();
            (layout.actors.clone(), layout.tasks.drain().map(|(_, t)| t).collect())
        };
        self.barrier.unregister(actors, tasks).await
    }

    /// Stops every actor at once, without a barrier, and forgets every job: a recovery
    /// builds them again from the committed state.
    pub async fn abort_all(&self) {
        let jobs: Vec<Arc<Job>> = self.jobs.lock().drain().map(|(_, job)| job).collect();
        for job in jobs {
            let tasks: Vec<_> = job.layout.lock().tasks.drain().map(|(_, task)| task).collect();
            for task in &tasks {
                task.abort();
            }
            for task in tasks {
                let _ = task.await;
            }
        }
    }

    /// The running job of a relation.
    pub fn job(&self, relation: TableId) -> Result<Arc<Job>> {
        self.jobs
            .lock()
            .get(&relation)
            .cloned()
            // Every relation has a job, except while a recovery rebuilds them.
            .ok_or_else(|| {
                Error::Recovered(format!("the job of relation {relation} is being recovered"))
            })
    }

    /// The output actors of a relation's running job.
    pub fn output_actors(&self, relation: TableId) -> Vec<ActorId> {
        self.jobs
            .lock()
            .get(&relation)
            .map(|j| j.layout.lock().output_actors.clone())
            .unwrap_or_default()
    }

    /// The fragments of every running job, by job id.
    pub fn fragments(&self) -> Vec<(TableId, Vec<Fragment>)> {
        let mut jobs: Vec<_> = self
            .jobs
            .lock()
            .iter()
            .map(|(id, job)| (*id, job.layout.lock().fragments.clone()))
            .collect();
        jobs.sort_by_key(|(id, _)| *id);
        jobs
    }
}
