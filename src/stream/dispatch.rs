//! Dispatchers: how an actor's output reaches the actors of a downstream fragment.
//!
//! A downstream fragment runs one actor per share of the 256 vnodes. A hash dispatcher computes
//! each row's vnode from its key columns, exactly as storage does for a distribution key, and
//! sends the row to the actor owning that vnode. An update whose halves land on different actors
//! is split into a delete and an insert. Barriers go to every actor.

use std::cell::RefCell;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::compute::filter_record_batch;

use crate::catalog::{TableId, VirtualNode};
use crate::error::Result;
use crate::storage::keycodec::{encode_keys_into, vnode_in_key};
use crate::stream::message::{Message, Op, Output, StreamChunk};

/// Which actor of a fragment owns each vnode: actor `i` of `n` owns a contiguous share.
pub fn owner_of(vnode: usize, parallelism: usize) -> usize {
    vnode * parallelism / VirtualNode::COUNT
}

/// The vnodes actor `index` of `parallelism` owns.
pub fn owned_vnodes(index: usize, parallelism: usize) -> Vec<VirtualNode> {
    (0..VirtualNode::COUNT)
        .filter(|&v| owner_of(v, parallelism) == index)
        .map(|v| VirtualNode(v as u16))
        .collect()
}

/// The vnode of every row, from its distribution-key columns.
pub fn vnodes_of(keys: &[ArrayRef], rows: usize) -> Result<Vec<VirtualNode>> {
    thread_local! {
        /// Key buffers reused from chunk to chunk: encoding allocates nothing per row.
        static ENCODED: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }
    ENCODED.with_borrow_mut(|encoded| {
        encode_keys_into(TableId(0), keys, rows, keys.len(), encoded)?;
        Ok(encoded.iter().map(|k| vnode_in_key(k)).collect())
    })
}

impl Output {
    /// Sends `msg` to the downstream actors; returns false when they are gone. An error
    /// (rows that cannot be routed) fails the sending actor: dropping the output instead would
    /// leave the downstream actors waiting for its barriers forever.
    pub async fn send(&self, msg: Message) -> Result<bool> {
        match msg {
            Message::Chunk(chunk) => self.send_chunk(chunk).await,
            other => {
                for sender in &self.senders {
                    if sender.send(other.clone()).await.is_err() {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    async fn send_chunk(&self, chunk: StreamChunk) -> Result<bool> {
        let n = self.senders.len();
        if n == 1 {
            return Ok(self.senders[0].send(Message::Chunk(chunk)).await.is_ok());
        }
        if self.broadcast {
            for sender in &self.senders {
                if sender.send(Message::Chunk(chunk.clone())).await.is_err() {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        for (actor, part) in self.split(&chunk)?.into_iter().enumerate() {
            if let Some(part) = part
                && self.senders[actor].send(Message::Chunk(part)).await.is_err()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The rows of `chunk` for each downstream actor.
    fn split(&self, chunk: &StreamChunk) -> Result<Vec<Option<StreamChunk>>> {
        let n = self.senders.len();
        let keys = self
            .keys
            .iter()
            .map(|k| crate::stream::eval::eval(k.as_ref(), chunk.data()))
            .collect::<Result<Vec<_>>>()?;
        let owners: Vec<usize> =
            vnodes_of(&keys, chunk.len())?.iter().map(|v| owner_of(v.0 as usize, n)).collect();
        let mut ops = chunk.ops().to_vec();
        for i in 0..ops.len().saturating_sub(1) {
            if ops[i] == Op::UpdateDelete && owners[i] != owners[i + 1] {
                ops[i] = Op::Delete;
                ops[i + 1] = Op::Insert;
            }
        }
        let mut parts = Vec::with_capacity(n);
        for actor in 0..n {
            let mask: BooleanArray = owners.iter().map(|&o| Some(o == actor)).collect();
            let part_ops: Vec<Op> =
                ops.iter().zip(&owners).filter(|(_, o)| **o == actor).map(|(op, _)| *op).collect();
            if part_ops.is_empty() {
                parts.push(None);
                continue;
            }
            let data = filter_record_batch(chunk.data(), &mask)?;
            parts.push(Some(StreamChunk::new(part_ops, data)));
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vnode_has_exactly_one_owner() {
        for n in 1..=8 {
            let mut owned: Vec<VirtualNode> = (0..n).flat_map(|i| owned_vnodes(i, n)).collect();
            owned.sort();
            assert_eq!(owned.len(), VirtualNode::COUNT);
            owned.dedup();
            assert_eq!(owned.len(), VirtualNode::COUNT);
        }
    }
}
