//! A job's parts: its fragments and actors while it runs ([`Job`]), and while it is built
//! but not yet spawned ([`PreparedJob`]).

use std::collections::HashMap;

use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::{ActorId, TableId};
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::backfill::status::BackfillWatch;
use crate::stream::executor::dml::DmlRequest;
use crate::stream::message::Barrier;
use crate::stream::message::Output;

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
pub struct PreparedJob {
    /// The relation (or source) it maintains.
    pub(super) relation: TableId,
    /// The job's actors, in the order of `executors`.
    pub(super) ids: Vec<ActorId>,
    /// The root executor of each actor, until the actors are spawned.
    pub(super) executors: Vec<BoxedExecutor>,
    /// Outputs between the job's own actors.
    pub(super) fixed_outputs: HashMap<ActorId, Vec<Output>>,
    /// The actors whose outputs carry the relation's changes.
    pub(super) output_actors: Vec<ActorId>,
    /// Barrier channels of its source actors, for the barrier manager.
    pub sources: Vec<(ActorId, mpsc::UnboundedSender<Barrier>)>,
    /// Channels to attach to upstream actors.
    pub outputs: HashMap<ActorId, Vec<Output>>,
    /// Progress of the job's backfills.
    pub backfills: Vec<BackfillWatch>,
    pub(super) dml: Option<mpsc::Sender<DmlRequest>>,
    /// `(label, actors, partitioned)` of each fragment, lowest first.
    pub(super) fragments: Vec<(String, Vec<ActorId>, bool)>,
    pub(super) feeder: Option<ActorId>,
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

    /// The relation (or source) the job maintains.
    pub fn relation(&self) -> TableId {
        self.relation
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
