//! `ProjectExecutor`: computes output columns from expressions over each row (a row an
//! expression fails on gets NULL for it, see [`crate::stream::eval`]).

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::error::Result;
use crate::stream::eval::eval;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, StreamChunk};

/// Evaluates one expression per output column; ops pass through unchanged.
pub struct ProjectExecutor {
    input: BoxedExecutor,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
}

impl ProjectExecutor {
    /// Projects `input` through `exprs` into rows of `schema`.
    pub fn new(input: BoxedExecutor, exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Self {
        Self { input, exprs, schema }
    }
}

impl Executor for ProjectExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, exprs, schema } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => yield Message::Chunk(project(&chunk, &exprs, &schema)?),
                    // Watermarks refer to input columns; they do not survive a projection.
                    Message::Watermark(_) => {}
                    barrier => yield barrier,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "ProjectExecutor"
    }
}

fn project(
    chunk: &StreamChunk,
    exprs: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
) -> Result<StreamChunk> {
    let columns =
        exprs.iter().map(|e| eval(e.as_ref(), chunk.data())).collect::<Result<Vec<_>>>()?;
    let columns = crate::stream::cast_columns(columns, schema)?;
    let data = crate::stream::batch_with_rows(schema.clone(), columns, chunk.len())?;
    Ok(StreamChunk::new(chunk.ops().to_vec(), data))
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::lit;
    use datafusion::scalar::ScalarValue;

    use super::*;
    use crate::stream::message::Watermark;
    use crate::stream::test_utils::{MockSource, barrier, binary, c, chunk, dedent, run, schema};

    /// Everything `input` projected through `exprs` into rows of types `header` emits.
    async fn project(
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        header: &str,
        input: impl IntoIterator<Item = Message>,
    ) -> String {
        let source = MockSource::boxed(input);
        run(Box::new(ProjectExecutor::new(source, exprs, schema(header)))).await
    }

    #[tokio::test]
    async fn computes_each_output_column_from_its_row() {
        // c1, c0 + c1, c0 * 10
        let exprs = vec![
            c(1),
            binary(c(0), Operator::Plus, c(1)),
            binary(c(0), Operator::Multiply, lit(10)),
        ];
        let input = chunk(
            "i  i
             + 1 2
             - 3 .
             + 5 6",
        );
        let expected = "i i i
                        + 2 3 10
                        - . . 30
                        + 6 11 50";
        assert_eq!(project(exprs, "i i i", [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn outputs_are_cast_to_the_output_schema() {
        let input = chunk("i\n+ 7\n- 8");
        assert_eq!(project(vec![c(0)], "I", [input]).await, dedent("I\n+ 7\n- 8"));
    }

    #[tokio::test]
    async fn update_pairs_are_kept_as_pairs() {
        let input = chunk(
            "i  i
             U- 1 2
             U+ 1 3
             -  4 5
             U- 6 7
             U+ 8 9",
        );
        let expected = "i
                        U- 3
                        U+ 4
                        - 9
                        U- 13
                        U+ 17";
        let exprs = vec![binary(c(0), Operator::Plus, c(1))];
        assert_eq!(project(exprs, "i", [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_row_the_expression_fails_on_gets_null_and_the_others_their_value() {
        // c0, c1 / c0: 10 / 0 fails.
        let exprs = vec![c(0), binary(c(1), Operator::Divide, c(0))];
        let input = chunk(
            "i  i
             + 2 10
             + 0 10
             - 5 10",
        );
        let expected = "i i
                        + 2 5
                        + 0 .
                        - 5 2";
        assert_eq!(project(exprs, "i i", [input]).await, dedent(expected));
    }

    #[tokio::test]
    async fn barriers_pass_through_in_order() {
        let input = [barrier(1), chunk("i i\n+ 1 2"), barrier(2), chunk("i i\n- 3 4"), barrier(3)];
        let expected = "barrier 1

                        i
                        + 3

                        barrier 2

                        i
                        - 7

                        barrier 3";
        let exprs = vec![binary(c(0), Operator::Plus, c(1))];
        assert_eq!(project(exprs, "i", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn watermarks_do_not_pass() {
        let watermark = Message::Watermark(Watermark { col_idx: 0, value: ScalarValue::from(5) });
        let input = [chunk("i\n+ 5"), watermark, barrier(1)];
        let expected = "i
                        + 5

                        barrier 1";
        assert_eq!(project(vec![c(0)], "i", input).await, dedent(expected));
    }
}
