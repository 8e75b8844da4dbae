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
