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
    if chunk.ops().iter().all(|&op| op == Op::Insert) {
        // Inserts only (a backfill's pages): the predicate's result is the mask as it is, a
        // NULL dropping its row as `false` does.
        let kept = passed.true_count();
        if kept == 0 {
            return Ok(None);
        }
        let data = filter_record_batch(chunk.data(), passed)?;
        return Ok(Some(StreamChunk::new(vec![Op::Insert; kept], data)));
    }
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

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::lit;

    use super::*;
    use crate::stream::test_utils::{MockSource, barrier, binary, c, chunk, dedent, run};

    /// `c0 > 2`.
    fn c0_above_2() -> Arc<dyn PhysicalExpr> {
        binary(c(0), Operator::Gt, lit(2))
    }

    /// Everything `input` filtered by `predicate` emits.
    async fn filter(
        predicate: Arc<dyn PhysicalExpr>,
        input: impl IntoIterator<Item = Message>,
    ) -> String {
        run(Box::new(FilterExecutor::new(MockSource::boxed(input), predicate))).await
    }

    #[tokio::test]
    async fn keeps_the_rows_that_pass_and_drops_the_others() {
        let input = chunk(
            "i  i
             + 1 10
             + 3 30
             - 5 50
             - 2 20",
        );
        let expected = "i i
                        + 3 30
                        - 5 50";
        assert_eq!(filter(c0_above_2(), [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_null_predicate_drops_the_row() {
        let input = chunk(
            "i  i
             + .  10
             + 3  30
             - .  40",
        );
        assert_eq!(filter(c0_above_2(), [input]).await, dedent("i i\n+ 3 30"));
    }

    #[tokio::test]
    async fn a_chunk_of_inserts_only_is_filtered_by_the_predicate_as_a_whole() {
        let pages = [
            chunk(
                "i  i
                 + 1  10
                 + .  20
                 + 3  30
                 + 4  .",
            ),
            chunk(
                "i  i
                 + 0  10
                 + .  20",
            ),
        ];
        let expected = "i i
                        + 3 30
                        + 4 .";
        assert_eq!(filter(c0_above_2(), pages).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_row_the_predicate_fails_on_is_dropped_and_the_others_are_filtered() {
        // c1 / c0 > 1: 10 / 2 = 5 passes, 10 / 0 fails, 5 / 10 = 0 does not pass.
        let predicate = binary(binary(c(1), Operator::Divide, c(0)), Operator::Gt, lit(1));
        let input = chunk(
            "i  i
             + 2  10
             + 0  10
             + 10 5",
        );
        assert_eq!(filter(predicate, [input]).await, dedent("i i\n+ 2 10"));
    }

    #[tokio::test]
    async fn update_with_both_rows_passing_stays_an_update() {
        let input = chunk(
            "i  i
             U- 3 30
             U+ 4 40",
        );
        let expected = "i i
                        U- 3 30
                        U+ 4 40";
        assert_eq!(filter(c0_above_2(), [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn update_with_only_the_old_row_passing_becomes_a_delete() {
        let input = chunk(
            "i  i
             U- 3 30
             U+ 1 10",
        );
        assert_eq!(filter(c0_above_2(), [input]).await, dedent("i i\n- 3 30"));
    }

    #[tokio::test]
    async fn update_with_only_the_new_row_passing_becomes_an_insert() {
        let input = chunk(
            "i  i
             U- 1 10
             U+ 3 30",
        );
        assert_eq!(filter(c0_above_2(), [input]).await, dedent("i i\n+ 3 30"));
    }

    #[tokio::test]
    async fn update_with_neither_row_passing_is_dropped() {
        let input = chunk(
            "i  i
             +  5 50
             U- 1 10
             U+ 2 20
             -  6 60",
        );
        let expected = "i i
                        + 5 50
                        - 6 60";
        assert_eq!(filter(c0_above_2(), [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn split_updates_keep_their_rows_and_ops_aligned_with_the_other_rows() {
        let input = chunk(
            "i  i
             +  5 50
             U- 1 10
             U+ 7 70
             U- 8 80
             U+ 0 0
             U- 9 90
             U+ 9 91
             -  4 40",
        );
        let expected = "i i
                        + 5 50
                        + 7 70
                        - 8 80
                        U- 9 90
                        U+ 9 91
                        - 4 40";
        assert_eq!(filter(c0_above_2(), [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn barriers_pass_through_unchanged_and_in_order() {
        let input = [
            chunk("i i\n+ 3 30"),
            barrier(1),
            chunk("i i\n+ 4 40\n+ 1 10"),
            barrier(2),
            barrier(3),
        ];
        let expected = "i i
                        + 3 30

                        barrier 1

                        i i
                        + 4 40

                        barrier 2

                        barrier 3";
        assert_eq!(filter(c0_above_2(), input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_chunk_where_nothing_passes_emits_nothing() {
        let input = [chunk("i i\n+ 1 10\nU- 2 20\nU+ 0 0\n- . 5"), barrier(1)];
        assert_eq!(filter(c0_above_2(), input).await, "barrier 1");
    }
}
