//! Rescaling a running job: `ALTER {TABLE | MATERIALIZED VIEW} name SET PARALLELISM = n`.
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
use std::sync::Arc;

use crate::catalog::{ActorId, RelationKind, TableCatalog, TableId};
use crate::engine::Engine;
use crate::engine::jobs::{JobLayout, PreparedJob};
use crate::error::{Error, Result};
use crate::stream::barrier::Replacement;
use crate::stream::dispatch::Output;

impl Engine {
    /// Rebuilds `relation`'s job with `parallelism` actors per fragment, and the jobs of every
    /// view downstream, at one checkpoint barrier. The caller holds the DDL lock.
    pub(crate) async fn reschedule(
        &self,
        relation: &TableCatalog,
        parallelism: usize,
    ) -> Result<()> {
        let relation = self
            .catalog
            .update_table(relation.id, |t| t.parallelism = parallelism)?
            .ok_or_else(|| Error::Stream(format!("{} was dropped", relation.name)))?;
        let affected = self.downstream_of(&relation);
        let mut prepared: Vec<(Arc<TableCatalog>, PreparedJob)> = Vec::new();
        let mut new_outputs: HashMap<TableId, Vec<ActorId>> = HashMap::new();
        for rel in &affected {
            let job = match rel.kind {
                RelationKind::Table => {
                    let feeder = self.job(rel.id)?.feeder.ok_or_else(|| {
                        Error::Stream(format!("table {} has no feeding actor", rel.name))
                    })?;
                    self.prepare_materialize_fragment(rel, feeder, rel.cdc.is_some())
                }
                _ => {
                    let plan = self.plan_view(&rel.definition).await?;
                    let upstream = |id: TableId| {
                        new_outputs.get(&id).cloned().unwrap_or_else(|| self.output_actors(id))
                    };
                    self.prepare_view_job(rel, &plan, &upstream)?
                }
            };
            new_outputs.insert(rel.id, job.output_actors());
            prepared.push((rel.clone(), job));
        }

        // Outputs towards the new actors: fixed wiring when the upstream is new too, otherwise
        // added to the running upstream by the barrier.
        let new_actors: HashSet<ActorId> =
            prepared.iter().flat_map(|(_, job)| job.actor_ids()).collect();
        let mut fixed: HashMap<ActorId, Vec<Output>> = HashMap::new();
        let mut added: HashMap<ActorId, Vec<Output>> = HashMap::new();
        for (_, job) in &mut prepared {
            for (actor, outputs) in job.outputs.drain() {
                let target = if new_actors.contains(&actor) { &mut fixed } else { &mut added };
                target.entry(actor).or_default().extend(outputs);
            }
        }
        let mut stop = Vec::new();
        for rel in &affected {
            let job = self.job(rel.id)?;
            let layout = job.layout.lock();
            stop.extend(layout.actors.iter().copied().filter(|a| Some(*a) != job.feeder));
        }
        let mut layouts = Vec::with_capacity(prepared.len());
        for (rel, job) in &mut prepared {
            layouts.push((rel.id, self.spawn_actors(job, &mut fixed)));
            if let Some(creating) = self.tracker.get(rel.id) {
                creating.replace_backfills(std::mem::take(&mut job.backfills));
            }
        }
        let start: Vec<ActorId> = new_actors.into_iter().collect();
        let replaced = self.barrier.replace(Replacement { stop, start, outputs: added }).await;
        if let Err(e) = replaced {
            for (_, layout) in layouts {
                layout.tasks.values().for_each(|t| t.abort());
            }
            return Err(e);
        }
        let epoch = replaced.expect("checked");
        for (id, layout) in layouts {
            self.install_layout(id, layout).await?;
        }
        tracing::info!(relation = %relation.name, parallelism, %epoch, rebuilt = affected.len(), "rescaled");
        Ok(())
    }

    /// `relation` and every view reading it, directly or not, upstreams first.
    fn downstream_of(&self, relation: &Arc<TableCatalog>) -> Vec<Arc<TableCatalog>> {
        let mut ids = HashSet::from([relation.id]);
        let mut affected = vec![relation.clone()];
        // A view's id is larger than the ids of the relations it reads.
        for table in self.catalog.tables() {
            if table.kind == RelationKind::MaterializedView
                && table.id != relation.id
                && table.dependencies.iter().any(|d| ids.contains(d))
            {
                ids.insert(table.id);
                affected.push(table);
            }
        }
        affected
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
