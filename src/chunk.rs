//! Chunks of row changes: an Arrow batch plus one [`Op`](crate::chunk::Op) per row. They flow between
//! executors (`stream::message`) and are written to state tables (`storage::state_table`).

use std::fmt;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;

/// The change a row of a chunk makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// The row is added.
    Insert,
    /// The row is removed.
    Delete,
    /// The old half of an update; always directly followed by its [`Op::UpdateInsert`].
    UpdateDelete,
    /// The new half of an update.
    UpdateInsert,
}

impl Op {
    /// True for ops that add their row ([`Op::Insert`], [`Op::UpdateInsert`]).
    pub fn is_insert(self) -> bool {
        matches!(self, Op::Insert | Op::UpdateInsert)
    }
}

/// A batch of row changes: an Arrow batch plus one [`Op`] per row.
#[derive(Debug, Clone)]
pub struct StreamChunk {
    ops: Vec<Op>,
    data: RecordBatch,
}

impl StreamChunk {
    /// A chunk from its ops and rows; they must have the same length.
    pub fn new(ops: Vec<Op>, data: RecordBatch) -> Self {
        assert_eq!(ops.len(), data.num_rows(), "one op per row");
        Self { ops, data }
    }

    /// A chunk that inserts every row of `data`.
    pub fn inserts(data: RecordBatch) -> Self {
        Self::new(vec![Op::Insert; data.num_rows()], data)
    }

    /// A chunk that deletes every row of `data`.
    pub fn deletes(data: RecordBatch) -> Self {
        Self::new(vec![Op::Delete; data.num_rows()], data)
    }

    /// The op of each row.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The rows.
    pub fn data(&self) -> &RecordBatch {
        &self.data
    }

    /// The columns of the rows.
    pub fn columns(&self) -> &[ArrayRef] {
        self.data.columns()
    }

    /// The schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        self.data.schema()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the chunk has no rows.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The chunk cut into chunks of at most `rows` rows (one more where a cut would part an
    /// update pair), in order; the rows are shared, not copied.
    pub fn split(self, rows: usize) -> Vec<StreamChunk> {
        let rows = rows.max(1);
        if self.len() <= rows {
            return vec![self];
        }
        let mut parts = Vec::with_capacity(self.len().div_ceil(rows));
        let mut from = 0;
        while from < self.len() {
            let mut to = (from + rows).min(self.len());
            if self.ops[to - 1] == Op::UpdateDelete && to < self.len() {
                to += 1;
            }
            let data = self.data.slice(from, to - from);
            parts.push(StreamChunk::new(self.ops[from..to].to_vec(), data));
            from = to;
        }
        parts
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Insert => "+",
            Op::Delete => "-",
            Op::UpdateDelete => "U-",
            Op::UpdateInsert => "U+",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::test_utils::dedent;

    #[test]
    fn a_split_chunk_keeps_its_rows_in_order_and_its_update_pairs_whole() {
        let chunk = StreamChunk::from_pretty(
            "i I
             + 1 10
             + 2 20
             U- 3 30
             U+ 3 31
             - 4 40",
        );
        let parts: Vec<String> = chunk.split(3).iter().map(StreamChunk::to_pretty).collect();
        let expected = [
            // The cut after three rows would part the update of 3: it takes its new half too.
            "i I
             + 1 10
             + 2 20
             U- 3 30
             U+ 3 31",
            "i I
             - 4 40",
        ];
        assert_eq!(parts, expected.map(dedent));
        let whole = StreamChunk::from_pretty("i\n+ 1\n+ 2");
        assert_eq!(whole.clone().split(2).len(), 1);
        assert_eq!(whole.split(1).len(), 2);
    }
}
