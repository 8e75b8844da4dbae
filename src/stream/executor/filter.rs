//! `FilterExecutor`: keeps the rows that satisfy a predicate.
//!
//! An update whose halves fall on different sides of the predicate becomes a plain insert (only
//! the new row passes) or delete (only the old row passes).

use std::sync::Arc;

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::compute::filter_record_batch;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::error::Result;
use crate::stream::eval::eval;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk};

/// Filters chunks by a boolean expression; NULL counts as false, and so does a row the predicate
/// fails on (see [`crate::stream::eval`]).
pub struct FilterExecutor {
    input: BoxedExecutor,
    predicate: Arc<dyn PhysicalExpr>,
}

impl FilterExecutor {
    /// Filters `input` by `predicate`.
    pub fn new(input: BoxedExecutor, predicate: Arc<dyn PhysicalExpr>) -> Self {
        Self { input, predicate }
    }
}

impl Executor for FilterExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, predicate } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        if let Some(chunk) = filter_chunk(&chunk, predicate.as_ref())? {
                            yield Message::Chunk(chunk);
                        }
                    }
                    other => yield other,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "FilterExecutor"
    }
}

/// The rows of `chunk` that pass, with update halves split where only one passes.
pub fn filter_chunk(
    chunk: &StreamChunk,
    predicate: &dyn PhysicalExpr,
) -> Result<Option<StreamChunk>> {
    let value = eval(predicate, chunk.data())?;
    let passed = value.as_boolean();
    mask_chunk(chunk, |i| passed.is_valid(i) && passed.value(i))
}

/// The rows of `chunk` for which `pass` holds. An update pair of which only one half passes
/// becomes a delete (old half) or an insert (new half).
pub fn mask_chunk(
    chunk: &StreamChunk,
    pass: impl Fn(usize) -> bool,
) -> Result<Option<StreamChunk>> {
    let mut keep = Vec::with_capacity(chunk.len());
    let mut ops = Vec::with_capacity(chunk.len());
    let mut i = 0;
    while i < chunk.len() {
        let op = chunk.ops()[i];
        if op == Op::UpdateDelete && i + 1 < chunk.len() {
            let (old, new) = (pass(i), pass(i + 1));
            keep.extend([old, new]);
            match (old, new) {
                (true, true) => ops.extend([Op::UpdateDelete, Op::UpdateInsert]),
                (true, false) => ops.push(Op::Delete),
                (false, true) => ops.push(Op::Insert),
                (false, false) => {}
            }
            i += 2;
            continue;
        }
        keep.push(pass(i));
        if pass(i) {
            ops.push(op);
        }
        i += 1;
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let data = filter_record_batch(chunk.data(), &BooleanArray::from(keep))?;
    Ok(Some(StreamChunk::new(ops, data)))
}
