//! Holding a partial aggregate while its job creates.
//!
//! A partial aggregate of eager aggregation ([`crate::sql::eager`]) built for a creating job
//! runs in *hold* mode ([`Hold`]): it keeps its groups in its result table as always but emits
//! nothing, so the join and the final aggregate above it do no work per backfill epoch. A
//! backfill page touches most groups, so emitting would send every group again at each epoch.
//! Once every backfill of the job has finished, the job's release barrier
//! ([`crate::stream::message::Mutation::release`]) makes it emit each stored group once, as an
//! insert, and it runs as any aggregate from then on. The view cannot be queried while its job
//! creates, so holding is invisible.
//!
//! The release of a vnode writes a marker key ([`crate::storage::keycodec::release_marker`])
//! in the epoch it emits in, so after a restart (or a rescale, which reassigns vnodes) an actor
//! knows which of its vnodes downstream has seen: those run normally, the others hold until the
//! release. An actor holding more than [`HOLD_LIMIT`] groups releases early, so the epoch of a
//! release, and what the operators above write in it, stays bounded.

use datafusion::scalar::ScalarValue;

use super::{Aggregation, rows_to_batch};
use crate::catalog::{TableId, VirtualNode};
use crate::error::Result;
use crate::storage::keycodec::{prefix_successor, release_marker, vnode_prefix};
use crate::stream::message::{Barrier, Op, StreamChunk};

/// Groups one actor may hold (see the module docs) before it releases them early.
pub const HOLD_LIMIT: usize = 100_000;

/// Stored groups emitted per chunk when held groups are released.
const RELEASE_CHUNK: usize = 4096;

/// Where a partial aggregate holds its output while its job creates (see the module docs).
#[derive(Debug, Clone)]
pub struct Hold {
    /// The creating job, whose release barrier ends the hold.
    pub job: TableId,
    /// The vnodes of the result table this actor owns.
    pub vnodes: Vec<VirtualNode>,
    /// The most groups it holds before it releases them early ([`HOLD_LIMIT`]).
    pub limit: usize,
}

/// The vnodes of an actor whose groups are held, and how many groups they store.
pub(super) struct Held {
    pub(super) job: TableId,
    /// By vnode: true while its groups are held.
    pub(super) vnodes: Vec<bool>,
    /// The groups stored in held vnodes.
    pub(super) groups: usize,
    /// See [`Hold::limit`].
    pub(super) limit: usize,
}

impl Aggregation {
    /// Starts holding the groups of the vnodes of `hold` that have not been released yet, and
    /// counts the groups they already store (up to just past its limit).
    pub(super) fn hold(&mut self, hold: Hold) -> Result<()> {
        let mut vnodes = vec![false; VirtualNode::COUNT];
        let mut groups = 0;
        for vnode in hold.vnodes {
            if self.result.get(&release_marker(self.result_def.id, vnode))?.is_some() {
                continue;
            }
            vnodes[vnode.0 as usize] = true;
            let start = vnode_prefix(self.result_def.id, vnode);
            let end = prefix_successor(&start).expect("a vnode prefix has a successor");
            let left = (hold.limit + 1).saturating_sub(groups);
            groups += self.result.iter_range(&start, &end, left)?.len();
        }
        if vnodes.contains(&true) {
            self.held = Some(Held { job: hold.job, vnodes, groups, limit: hold.limit });
        }
        Ok(())
    }

    /// True if the groups held must be emitted at `barrier`: it releases the job, or this
    /// actor holds more groups than it may.
    pub(super) fn must_release(&self, barrier: &Barrier) -> bool {
        self.held.as_ref().is_some_and(|h| barrier.releases(h.job) || h.groups > h.limit)
    }

    /// Emits every group stored in a held vnode, as inserts (downstream has seen none of
    /// them), and marks those vnodes released in this epoch.
    pub(super) fn release(&mut self) -> Result<Vec<StreamChunk>> {
        let Some(held) = self.held.take() else { return Ok(Vec::new()) };
        let mut chunks = Vec::new();
        let mut rows = Vec::new();
        for vnode in (0..VirtualNode::COUNT).filter(|&v| held.vnodes[v]) {
            let vnode = VirtualNode(vnode as u16);
            let mut from = vnode_prefix(self.result_def.id, vnode).to_vec();
            let end = prefix_successor(&from).expect("a vnode prefix has a successor");
            loop {
                let page = self.result.iter_range(&from, &end, RELEASE_CHUNK)?;
                let Some((last, _)) = page.last() else { break };
                from = last.clone();
                from.push(0);
                let rows_of_page = page.iter().map(|(key, row)| (key.as_slice(), row.as_slice()));
                for stored in self.decode_stored(rows_of_page)? {
                    rows.push(self.output_row(&self.stored_group(vnode, &stored)?)?);
                    if rows.len() == RELEASE_CHUNK {
                        chunks.push(self.inserts(std::mem::take(&mut rows))?);
                    }
                }
                if page.len() < RELEASE_CHUNK {
                    break;
                }
            }
            self.result.insert(release_marker(self.result_def.id, vnode), Vec::new());
        }
        if !rows.is_empty() {
            chunks.push(self.inserts(rows)?);
        }
        tracing::debug!(job = %held.job, groups = held.groups, "held aggregate groups released");
        Ok(chunks)
    }

    /// `rows` (output rows) as a chunk of inserts.
    fn inserts(&self, rows: Vec<Vec<ScalarValue>>) -> Result<StreamChunk> {
        let batch = rows_to_batch(&rows, &self.output_schema)?;
        Ok(StreamChunk::new(vec![Op::Insert; rows.len()], batch))
    }

    /// True if the groups of `vnode` are held.
    pub(super) fn is_held(&self, vnode: VirtualNode) -> bool {
        self.held.as_ref().is_some_and(|h| h.vnodes[vnode.0 as usize])
    }
}
