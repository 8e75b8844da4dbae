//! Rescaling a running job: swapping its actors for new ones at one checkpoint barrier.
//!
//! Every piece of operator state is keyed by vnode in shared storage, so which actor owns a
//! vnode is only a matter of routing. A rescale builds a new set of actors for the job (and
//! rebuilds every view downstream of it, whose inputs come from the job's actors), spawns them,
//! and swaps them in at one checkpoint barrier `B`:
//!
//! - the old actors process `B` like any barrier (each commits its state for the epoch `B`
//!   ends), pass it on, and exit;
//! - upstream actors outside the rebuilt set send `B` and everything after it to the new actors
//!   (outputs added by `B`), and drop their outputs to the old ones when those close;
//! - the new actors start with `B`; they read no state and pass nothing on until the epoch `B`
//!   ended is committed (their inputs are gated), so they see every write of the old actors.
//!
//! A backfill moves with its vnodes: its progress rows (`vnode | position | finished |
//! row_count`) are read by whichever actor owns the vnode now. A table keeps its DML (or CDC
//! backfill) actor and rescales the fragment that stores its rows.

use std::collections::{HashMap, HashSet};

use crate::catalog::{ActorId, Epoch, TableId};
use crate::error::Result;
use crate::stream::barrier::Replacement;
use crate::stream::graph::StreamGraph;
use crate::stream::graph::job::{JobLayout, PreparedJob};
use crate::stream::message::Output;

impl StreamGraph {
    /// Swaps the running actors of each prepared job's relation for the prepared ones at one
    /// checkpoint barrier; a table keeps its feeding actor. `prepared` lists upstreams first,
    /// as built (a job's inputs may come from a job before it). Returns the barrier's epoch.
    pub async fn replace_jobs(&self, mut prepared: Vec<PreparedJob>) -> Result<Epoch> {
        // Outputs towards the new actors: fixed wiring when the upstream is new too, otherwise
        // added to the running upstream by the barrier.
        let new_actors: HashSet<ActorId> =
            prepared.iter().flat_map(|job| job.actor_ids()).collect();
        let mut fixed: HashMap<ActorId, Vec<Output>> = HashMap::new();
        let mut added: HashMap<ActorId, Vec<Output>> = HashMap::new();
        for job in &mut prepared {
            for (actor, outputs) in job.outputs.drain() {
                let target = if new_actors.contains(&actor) { &mut fixed } else { &mut added };
                target.entry(actor).or_default().extend(outputs);
            }
        }
        let mut stop = Vec::new();
        for job in &prepared {
            let running = self.job(job.relation)?;
            let layout = running.layout.lock();
            stop.extend(layout.actors.iter().copied().filter(|a| Some(*a) != running.feeder));
        }
        let mut layouts = Vec::with_capacity(prepared.len());
        for job in &mut prepared {
            layouts.push((job.relation, self.spawn_actors(job, &mut fixed)));
            if let Some(creating) = self.creating.get(job.relation) {
                creating.replace_backfills(std::mem::take(&mut job.backfills));
            }
        }
        let start: Vec<ActorId> = new_actors.into_iter().collect();
        let replaced = self.barrier.replace(Replacement { stop, start, outputs: added }).await;
        let epoch = match replaced {
            Ok(epoch) => epoch,
            Err(e) => {
                for (_, layout) in layouts {
                    layout.tasks.values().for_each(|t| t.abort());
                }
                return Err(e);
            }
        };
        for (id, layout) in layouts {
            self.install_layout(id, layout).await?;
        }
        Ok(epoch)
    }

    /// Makes `layout` the running layout of `relation`'s job; the old actors (which stopped at
    /// the replacing barrier) are reaped. A table keeps its feeding actor.
    async fn install_layout(&self, relation: TableId, mut layout: JobLayout) -> Result<()> {
        let job = self.job(relation)?;
        let old = {
            let mut current = job.layout.lock();
            if let Some(feeder) = job.feeder {
                if let Some(task) = current.tasks.remove(&feeder) {
                    layout.tasks.insert(feeder, task);
                }
                layout.actors.insert(0, feeder);
                let kept = current.fragments.iter().find(|f| f.actors == [feeder]).cloned();
                layout.fragments.splice(0..0, kept);
            }
            std::mem::replace(&mut *current, layout)
        };
        // They stopped after the committed barrier; nothing of theirs is left to do.
        for (_, task) in old.tasks {
            task.abort();
            let _ = task.await;
        }
        Ok(())
    }
}
