//! Streaming jobs: building, starting and stopping the actors of tables and views.
//!
//! A table's job is its DML actor hash-dispatching changes by key to the table's materialize
//! fragment (`parallelism` actors, each storing its vnodes). A view's job runs its plan in
//! fragments of `parallelism` actors each (scans, operators, then a `MaterializeExecutor`); its
//! scans read from channels attached to the output actors of each upstream relation. At
//! start-up every job is built first and wired, then all actors start together and wait for
//! their first barrier. `ALTER .. SET PARALLELISM` replaces a running job's actors
//! (`rescale.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::{ActorId, CreatingInfo, RelationKind, TableCatalog, TableId};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::stream::actor::Actor;
use crate::stream::build::{BuildContext, build_plan, channels, input_of, key_exprs};
use crate::stream::dispatch::Output;
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::backfill::status::BackfillWatch;
use crate::stream::executor::dml::{DmlExecutor, DmlRequest};
use crate::stream::executor::materialize::MaterializeExecutor;
use crate::stream::message::Barrier;
use crate::stream::plan::StreamPlan;

/// How many DML requests may queue for one table.
const DML_QUEUE: usize = 16;

/// The running jobs, by relation (or source).
pub type JobMap = Arc<Mutex<HashMap<TableId, Arc<Job>>>>;

/// A running streaming job.
pub struct Job {
    /// Its actors and how they are grouped; replaced by a rescale.
    pub layout: Mutex<JobLayout>,
    /// Where DML statements send their changes (tables only).
    pub dml: Option<mpsc::Sender<DmlRequest>>,
    /// Held by a DML statement from its read until its epoch commits, so statements on one
    /// table apply one after another against committed data.
    pub write_lock: Arc<tokio::sync::Mutex<()>>,
    /// For a table: the actor feeding its materialize fragment (the DML or CDC backfill
    /// actor), which a rescale keeps.
    pub feeder: Option<ActorId>,
}

/// The actors of a running job.
pub struct JobLayout {
    /// The actors whose outputs carry the relation's changes.
    pub output_actors: Vec<ActorId>,
    /// Every actor of the job.
    pub actors: Vec<ActorId>,
    /// Their tasks, by actor.
    pub tasks: HashMap<ActorId, JoinHandle<()>>,
    /// The job's fragments, lowest first.
    pub fragments: Vec<Fragment>,
}

/// A group of actors running the same part of a job's plan, each over its own vnodes.
#[derive(Debug, Clone)]
pub struct Fragment {
    /// Unique while the server runs.
    pub id: u32,
    /// The operators it runs, as in `EXPLAIN`.
    pub label: String,
    /// Its actors; actor `i` of `n` owns the vnodes `owned_vnodes(i, n)`.
    pub actors: Vec<ActorId>,
    /// False for a single actor that sees every vnode (a table's DML or CDC backfill actor).
    pub partitioned: bool,
}

/// A job built but not started.
pub(crate) struct PreparedJob {
    relation: TableId,
    /// The job's actors, in the order of `executors`.
    ids: Vec<ActorId>,
    /// The root executor of each actor, until the actors are spawned.
    executors: Vec<BoxedExecutor>,
    /// Outputs between the job's own actors.
    fixed_outputs: HashMap<ActorId, Vec<Output>>,
    /// The actors whose outputs carry the relation's changes.
    output_actors: Vec<ActorId>,
    pub sources: Vec<(ActorId, mpsc::UnboundedSender<Barrier>)>,
    /// Channels to attach to upstream actors.
    pub outputs: HashMap<ActorId, Vec<Output>>,
    /// Progress of the job's backfills.
    pub backfills: Vec<BackfillWatch>,
    dml: Option<mpsc::Sender<DmlRequest>>,
    /// `(label, actors, partitioned)` of each fragment, lowest first.
    fragments: Vec<(String, Vec<ActorId>, bool)>,
    feeder: Option<ActorId>,
}

impl PreparedJob {
    /// A job of one actor; a source actor when it gets a barrier channel.
    pub fn single(
        relation: TableId,
        actor: ActorId,
        root: BoxedExecutor,
        barriers: Option<mpsc::UnboundedSender<Barrier>>,
    ) -> Self {
        let label = root.identity().trim_end_matches("Executor").to_owned();
        Self {
            relation,
            ids: vec![actor],
            executors: vec![root],
            fixed_outputs: HashMap::new(),
            output_actors: vec![actor],
            sources: barriers.into_iter().map(|b| (actor, b)).collect(),
            outputs: HashMap::new(),
            backfills: Vec::new(),
            dml: None,
            fragments: vec![(label, vec![actor], false)],
            feeder: None,
        }
    }

    /// Marks `actor` as the one feeding the job's materialize fragment.
    pub fn set_feeder(&mut self, actor: ActorId) {
        self.feeder = Some(actor);
    }

    /// Adds `part`'s actors, fed by this job's actors: its outputs from them become fixed
    /// wiring, and its output actors become the job's.
    pub fn absorb(&mut self, mut part: PreparedJob) {
        for (actor, outputs) in part.outputs.drain() {
            if self.ids.contains(&actor) {
                self.fixed_outputs.entry(actor).or_default().extend(outputs);
            } else {
                self.outputs.entry(actor).or_default().extend(outputs);
            }
        }
        self.ids.append(&mut part.ids);
        self.executors.append(&mut part.executors);
        self.fixed_outputs.extend(part.fixed_outputs);
        self.output_actors = part.output_actors;
        self.backfills.append(&mut part.backfills);
        self.fragments.append(&mut part.fragments);
    }

    /// The actor ids of the job.
    pub fn actor_ids(&self) -> Vec<ActorId> {
        self.ids.clone()
    }

    /// The actors whose outputs carry the relation's changes.
    pub fn output_actors(&self) -> Vec<ActorId> {
        self.output_actors.clone()
    }
}

impl Engine {
    pub(crate) fn new_actor_id(&self) -> ActorId {
        ActorId(self.next_actor.fetch_add(1, Ordering::Relaxed))
    }

    /// Builds the job of a table: its DML actor feeding the materialize fragment.
    pub(crate) fn prepare_table_job(&self, table: &TableCatalog) -> PreparedJob {
        let actor = self.new_actor_id();
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let (dml_tx, dml_rx) = mpsc::channel(DML_QUEUE);
        let source = Box::new(DmlExecutor::new(barrier_rx, dml_rx));
        let mut job = PreparedJob::single(table.id, actor, source, Some(barrier_tx));
        job.dml = Some(dml_tx);
        job.absorb(self.prepare_materialize_fragment(table, actor, false));
        job.feeder = Some(actor);
        job
    }

    /// Builds the materialize fragment of a table: `table.parallelism` actors, each storing
    /// the rows of its vnodes, fed by `feeder` hash-dispatching the changes by key.
    pub(crate) fn prepare_materialize_fragment(
        &self,
        table: &TableCatalog,
        feeder: ActorId,
        upsert: bool,
    ) -> PreparedJob {
        let n = table.parallelism.max(1);
        let (senders, receivers) = channels(n);
        let mut ids = Vec::with_capacity(n);
        let mut executors = Vec::with_capacity(n);
        for rx in receivers {
            let input = input_of(vec![rx], &self.store);
            let state = table.state_table(self.store.clone());
            let schema = table.full_schema();
            let root: BoxedExecutor = if upsert {
                Box::new(MaterializeExecutor::upsert(input, state, schema))
            } else {
                Box::new(MaterializeExecutor::new(input, state, schema))
            };
            ids.push(self.new_actor_id());
            executors.push(root);
        }
        let output = Output { keys: key_exprs(table), senders };
        PreparedJob {
            relation: table.id,
            ids: ids.clone(),
            executors,
            fixed_outputs: HashMap::new(),
            output_actors: ids.clone(),
            sources: Vec::new(),
            outputs: HashMap::from([(feeder, vec![output])]),
            backfills: Vec::new(),
            dml: None,
            fragments: vec![(format!("Materialize {{ table: {} }}", table.name), ids, true)],
            feeder: Some(feeder),
        }
    }

    /// Builds a view's job from its plan; `upstream` finds the output actor of a relation.
    pub(crate) fn prepare_view_job(
        &self,
        view: &TableCatalog,
        plan: &StreamPlan,
        upstream: &dyn Fn(TableId) -> Vec<ActorId>,
    ) -> Result<PreparedJob> {
        let tables = view
            .internal_tables
            .iter()
            .map(|id| {
                self.catalog.table_by_id(*id).ok_or_else(|| {
                    Error::Storage(format!("internal table {id} of {} is missing", view.name))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if tables.len() != plan.slots.len() {
            return Err(Error::Storage(format!(
                "the plan of {} needs {} state tables but the catalog has {}",
                view.name,
                plan.slots.len(),
                tables.len()
            )));
        }
        let new_actor = || self.new_actor_id();
        let ctx = BuildContext {
            store: self.store.clone(),
            tables: &tables,
            upstream_actors: upstream,
            new_actor: &new_actor,
            parallelism: view.parallelism.max(1),
            rate_limit: view.backfill_rate_limit,
            barrier: self.barrier.clone(),
        };
        let built = build_plan(plan, &ctx)?;
        let mut ids = Vec::new();
        let mut executors = Vec::new();
        let mut fixed_outputs = HashMap::new();
        for (id, executor, outputs) in built.inner_actors {
            ids.push(id);
            executors.push(executor);
            fixed_outputs.insert(id, outputs);
        }
        let mut fragments = built.fragments;
        let mut output_actors = Vec::new();
        for root in built.roots {
            let state = view.state_table(self.store.clone());
            let id = self.new_actor_id();
            ids.push(id);
            output_actors.push(id);
            executors
                .push(Box::new(MaterializeExecutor::new(root, state, view.full_schema())) as _);
        }
        Ok(PreparedJob {
            relation: view.id,
            ids,
            executors,
            fixed_outputs,
            output_actors: output_actors.clone(),
            sources: Vec::new(),
            outputs: built.outputs,
            backfills: built.backfills,
            dml: None,
            fragments: {
                fragments.push((format!("Materialize({})", built.root_label), output_actors));
                fragments.into_iter().map(|(label, actors)| (label, actors, true)).collect()
            },
            feeder: None,
        })
    }

    /// Spawns a prepared job's actors, sending to the given outputs, and records the job.
    pub(crate) fn spawn_job(
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
    pub(crate) fn spawn_actors(
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

    /// Removes internal tables whose view is gone: a crash between writing a new view's
    /// internal tables and the view itself leaves them behind.
    fn drop_orphans(&self) -> Result<()> {
        for table in self.catalog.tables() {
            let owner_exists = table.owner.is_some_and(|o| {
                self.catalog.table_by_id(o).is_some()
                    || self.catalog.sources().iter().any(|s| s.id == o)
            });
            if table.kind == RelationKind::Internal && !owner_exists {
                tracing::info!(table = %table.name, "dropping the orphaned internal table");
                self.catalog.drop_table(table.id)?;
                self.store.drop_table_data(table.id)?;
            }
        }
        Ok(())
    }

    /// Rebuilds the job of every table and view at start-up and starts them together.
    pub(crate) async fn start_jobs(&self) -> Result<()> {
        self.drop_orphans()?;
        let mut actor_of: HashMap<TableId, Vec<ActorId>> = HashMap::new();
        let mut prepared = Vec::new();
        for source in self.catalog.sources() {
            let job = self.prepare_source_job(&source)?;
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
                    self.prepare_cdc_table_job(&relation, actor)?
                }
                RelationKind::Table => self.prepare_table_job(&relation),
                RelationKind::MaterializedView => {
                    let plan = self.plan_view(&relation.definition).await?;
                    self.prepare_view_job(&relation, &plan, &|id| {
                        actor_of.get(&id).cloned().unwrap_or_default()
                    })?
                }
                RelationKind::Internal => continue,
            };
            actor_of.insert(relation.id, job.output_actors());
            prepared.push(job);
        }
        let mut outputs: HashMap<ActorId, Vec<Output>> = HashMap::new();
        for job in &mut prepared {
            for (actor, senders) in job.outputs.drain() {
                outputs.entry(actor).or_default().extend(senders);
            }
        }
        let mut sources = Vec::new();
        let mut actors = Vec::new();
        let mut creating = Vec::new();
        for mut job in prepared {
            self.spawn_job(&mut job, &mut outputs);
            sources.append(&mut job.sources);
            actors.extend(job.actor_ids());
            if let Some(relation) = self.catalog.table_by_id(job.relation)
                && let Some(info) = relation.creating
            {
                // After a recovery, a job still tracked follows its new backfills; a
                // foreground CREATE keeps waiting for it.
                if let Some(creating) = self.tracker.get(relation.id) {
                    creating.replace_backfills(std::mem::take(&mut job.backfills));
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
                creating.push((relation, std::mem::take(&mut job.backfills)));
            }
        }
        self.barrier.register(sources, actors, HashMap::new()).await?;
        // Jobs that were creating go on from their persisted progress, in the background.
        for (relation, backfills) in creating {
            tracing::info!(relation = %relation.name, "resuming the creation");
            self.track_job(&relation, backfills)?;
        }
        Ok(())
    }

    /// Starts a job created at runtime: its actors start, and the next checkpoint attaches its
    /// inputs to the running upstreams. Returns the epoch of that checkpoint.
    pub(crate) async fn start_job(
        &self,
        mut prepared: PreparedJob,
    ) -> Result<(crate::catalog::Epoch, Vec<BackfillWatch>)> {
        self.spawn_job(&mut prepared, &mut HashMap::new());
        let outputs = std::mem::take(&mut prepared.outputs);
        let sources = std::mem::take(&mut prepared.sources);
        let epoch = self.barrier.register(sources, prepared.actor_ids(), outputs).await?;
        Ok((epoch, prepared.backfills))
    }

    /// Stops a relation's job between checkpoints and forgets it.
    pub(crate) async fn stop_job(&self, relation: TableId) -> Result<()> {
        self.tracker.stop(relation);
        let Some(job) = self.jobs.lock().remove(&relation) else { return Ok(()) };
        let (actors, tasks) = {
            let mut layout = job.layout.lock();
            (layout.actors.clone(), layout.tasks.drain().map(|(_, t)| t).collect())
        };
        self.barrier.unregister(actors, tasks).await
    }

    /// The running job of a relation.
    pub(crate) fn job(&self, relation: TableId) -> Result<Arc<Job>> {
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
    pub(crate) fn output_actors(&self, relation: TableId) -> Vec<ActorId> {
        self.jobs
            .lock()
            .get(&relation)
            .map(|j| j.layout.lock().output_actors.clone())
            .unwrap_or_default()
    }
}
