//! Chunks of row changes: an Arrow batch plus one [`Op`] per row. They flow between
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
