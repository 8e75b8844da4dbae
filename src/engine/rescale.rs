//! `ALTER {TABLE | MATERIALIZED VIEW} name SET PARALLELISM = n`: which jobs are rebuilt.
//!
//! The relation's job and the job of every view downstream of it (whose inputs come from the
//! relation's actors) are built again with the new parallelism and swapped in at one
//! checkpoint barrier by `stream::graph::rescale`, whose docs say why no change is lost.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::{ActorId, RelationKind, TableCatalog, TableId};
use crate::engine::Engine;
use crate::error::{Error, Result};

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
        let mut prepared = Vec::new();
        let mut new_outputs: HashMap<TableId, Vec<ActorId>> = HashMap::new();
        for rel in &affected {
            let job = match rel.kind {
                RelationKind::Table => {
                    let feeder = self.graph.job(rel.id)?.feeder.ok_or_else(|| {
                        Error::Stream(format!("table {} has no feeding actor", rel.name))
                    })?;
                    self.graph.prepare_materialize_fragment(rel, feeder, rel.cdc.is_some())
                }
                _ => {
                    let plan = self.replan_view(rel).await?;
                    let upstream = |id: TableId| {
                        new_outputs
                            .get(&id)
                            .cloned()
                            .unwrap_or_else(|| self.graph.output_actors(id))
                    };
                    self.graph.prepare_view_job(rel, &plan, &upstream)?
                }
            };
            new_outputs.insert(rel.id, job.output_actors());
            prepared.push(job);
        }
        let epoch = self.graph.replace_jobs(prepared).await?;
        tracing::info!(relation = %relation.name, parallelism, %epoch, rebuilt = affected.len(), "rescaled");
        Ok(())
    }

    /// `relation` and every view reading it, directly or not, upstreams first.
    fn downstream_of(&self, relation: &Arc<TableCatalog>) -> Vec<Arc<TableCatalog>> {
        let mut ids = std::collections::HashSet::from([relation.id]);
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
}
