//! Job tables: `rw_fragments`, `rw_actors`, `rw_recovery_events` and `rw_rate_limit`.

use arrow::datatypes::DataType;

use super::{BIGINT, BOOLEAN, INT, SystemRow, SystemSchema, VARCHAR, Value, text, timestamptz};
use crate::catalog::VirtualNode;
use crate::stream::dispatch::owned_vnodes;
use crate::stream::graph::recovery::RecoveryEvent;

/// `rw_fragments`: one row per fragment of a running job.
pub struct FragmentRow {
    fragment_id: i64,
    job_id: i64,
    job_name: String,
    kind: String,
    parallelism: i32,
    vnodes_per_actor: String,
}

impl SystemRow for FragmentRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("fragment_id", BIGINT),
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("kind", VARCHAR),
            ("parallelism", INT),
            ("vnodes_per_actor", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.fragment_id)),
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            text(self.kind),
            Value::Int32(Some(self.parallelism)),
            text(self.vnodes_per_actor),
        ]
    }
}

/// `rw_actors`: one row per actor of a running job.
pub struct ActorRow {
    actor_id: i64,
    fragment_id: i64,
    job_id: i64,
    job_name: String,
    vnode_count: i32,
    vnodes: String,
}

impl SystemRow for ActorRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("actor_id", BIGINT),
            ("fragment_id", BIGINT),
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("vnode_count", INT),
            ("vnodes", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.actor_id)),
            Value::Int(Some(self.fragment_id)),
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            Value::Int32(Some(self.vnode_count)),
            text(self.vnodes),
        ]
    }
}

/// `rw_recovery_events`: each time the streaming jobs were rebuilt after an actor failed.
pub struct RecoveryEventRow {
    event: RecoveryEvent,
}

impl SystemRow for RecoveryEventRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![("failed_at", timestamptz()), ("error", VARCHAR), ("recovered", BOOLEAN)]
    }

    fn values(self) -> Vec<Value> {
        let RecoveryEvent { at_ms, error, recovered } = self.event;
        vec![Value::TimestampMs(Some(at_ms)), text(error), Value::Bool(Some(recovered))]
    }
}

/// `rw_rate_limit`: the jobs whose backfill has a rate limit.
pub struct RateLimitRow {
    job_id: i64,
    job_name: String,
    job_kind: &'static str,
    rate_limit: i64,
}

impl SystemRow for RateLimitRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("job_kind", VARCHAR),
            ("rate_limit", BIGINT),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            text(self.job_kind),
            Value::Int(Some(self.rate_limit)),
        ]
    }
}

impl SystemSchema {
    /// `rw_fragments` and `rw_actors`, by job id then fragment.
    pub(super) fn fragments(&self) -> (Vec<FragmentRow>, Vec<ActorRow>) {
        let mut names: std::collections::HashMap<_, String> =
            self.catalog.tables().iter().map(|t| (t.id, t.name.clone())).collect();
        for source in self.catalog.sources() {
            names.insert(source.id, source.name.clone());
        }
        let (mut fragments, mut actors) = (Vec::new(), Vec::new());
        for (id, job_fragments) in self.graph.fragments() {
            let name = names.get(&id).cloned().unwrap_or_default();
            for fragment in &job_fragments {
                let n = fragment.actors.len();
                let vnodes: Vec<Vec<VirtualNode>> = (0..n)
                    .map(|i| match fragment.partitioned {
                        true => owned_vnodes(i, n),
                        false => (0..VirtualNode::COUNT as u16).map(VirtualNode).collect(),
                    })
                    .collect();
                fragments.push(FragmentRow {
                    fragment_id: fragment.id as i64,
                    job_id: id.0 as i64,
                    job_name: name.clone(),
                    kind: fragment.label.clone(),
                    parallelism: n as i32,
                    vnodes_per_actor: vnodes
                        .iter()
                        .map(|v| v.len().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
                for (actor, owned) in fragment.actors.iter().zip(vnodes) {
                    actors.push(ActorRow {
                        actor_id: actor.0 as i64,
                        fragment_id: fragment.id as i64,
                        job_id: id.0 as i64,
                        job_name: name.clone(),
                        vnode_count: owned.len() as i32,
                        vnodes: vnode_ranges(&owned),
                    });
                }
            }
        }
        (fragments, actors)
    }

    pub(super) fn recovery_events(&self) -> Vec<RecoveryEventRow> {
        self.graph.recoveries.events().into_iter().map(|event| RecoveryEventRow { event }).collect()
    }

    pub(super) fn rate_limits(&self) -> Vec<RateLimitRow> {
        self.catalog
            .tables()
            .iter()
            .filter_map(|t| {
                Some(RateLimitRow {
                    job_id: t.id.0 as i64,
                    job_name: t.name.clone(),
                    job_kind: t.kind.noun(),
                    rate_limit: t.backfill_rate_limit? as i64,
                })
            })
            .collect()
    }
}

/// Vnodes as ranges: `0-63, 128-191`.
pub fn vnode_ranges(vnodes: &[VirtualNode]) -> String {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for v in vnodes {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == v.0 => *end = v.0,
            _ => ranges.push((v.0, v.0)),
        }
    }
    let text: Vec<String> = ranges
        .iter()
        .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect();
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnode_ranges_are_compact() {
        let v = |list: &[u16]| list.iter().map(|&n| VirtualNode(n)).collect::<Vec<_>>();
        assert_eq!(vnode_ranges(&v(&[0, 1, 2, 5, 7, 8])), "0-2, 5, 7-8");
        assert_eq!(vnode_ranges(&[]), "");
    }
}
