//! Server-side cursors: `DECLARE name CURSOR FOR query`, `FETCH`, `CLOSE`.
//!
//! A cursor is the running batch query's stream, kept in the session; `FETCH n` reads the next
//! `n` rows of it (a batch is split when it holds more, the rest kept for the next `FETCH`),
//! so a client reads a large result in pieces without the server holding it all. Cursors move
//! forward only (`NO SCROLL`); one lives until `CLOSE` or the end of the session, with or
//! without `HOLD`: Sluice's transactions do not group statements, so there is no transaction
//! end to close it at.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast;
use futures::StreamExt;

use crate::engine::session::{Cursor, Session};
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::unsupported;

impl Cursor {
    /// Up to `limit` next rows (`None`: all of them).
    async fn fetch(&mut self, limit: Option<usize>) -> Result<Vec<RecordBatch>> {
        let mut taken = Vec::new();
        let mut wanted = limit.unwrap_or(usize::MAX);
        while wanted > 0 {
            let batch = match self.rest.take() {
                Some(batch) => batch,
                None => match self.stream.next().await {
                    Some(batch) => batch?,
                    None => break,
                },
            };
            if batch.num_rows() > wanted {
                self.rest = Some(batch.slice(wanted, batch.num_rows() - wanted));
                taken.push(batch.slice(0, wanted));
                break;
            }
            wanted -= batch.num_rows();
            taken.push(batch);
        }
        Ok(taken)
    }
}

/// How many rows a `FETCH` direction asks for (`None`: all); other directions move backward or
/// jump, which a forward-only cursor cannot.
fn fetch_limit(direction: &ast::FetchDirection) -> Result<Option<usize>> {
    use ast::FetchDirection as D;
    let count = |limit: &ast::ValueWithSpan| match &limit.value {
        ast::Value::Number(n, _) => {
            n.parse::<usize>().map_err(|_| unsupported!("FETCH {n}: a count of rows forward"))
        }
        other => Err(unsupported!("FETCH {other}")),
    };
    Ok(match direction {
        D::Next | D::Forward { limit: None } => Some(1),
        D::Count { limit } | D::Forward { limit: Some(limit) } => Some(count(limit)?),
        D::All | D::ForwardAll => None,
        other => {
            return Err(unsupported!(
                "FETCH {other}: cursors move forward only (FETCH n, NEXT, FORWARD n, ALL)"
            ));
        }
    })
}

impl Engine {
    /// `DECLARE name [NO SCROLL] CURSOR [WITH[OUT] HOLD] FOR query`.
    pub(crate) async fn declare(
        &self,
        session: &Session,
        stmts: Vec<ast::Declare>,
    ) -> Result<Output> {
        for declare in stmts {
            let [name] = declare.names.as_slice() else {
                return Err(unsupported!("DECLARE of several names"));
            };
            let name = name.value.clone();
            let Some(query) = declare.for_query else {
                return Err(unsupported!("DECLARE without a cursor query"));
            };
            if declare.binary == Some(true) {
                return Err(unsupported!(
                    "BINARY cursors; fetch in binary with the extended protocol"
                ));
            }
            if declare.scroll == Some(true) {
                return Err(unsupported!("SCROLL cursors: cursors move forward only"));
            }
            let Output::Rows { schema, stream } =
                self.query(session, ast::Statement::Query(query)).await?
            else {
                return Err(Error::InvalidStatement("a cursor's query returns no rows".into()));
            };
            let mut cursors = session.cursors().0.lock().await;
            if cursors.contains_key(&name) {
                return Err(Error::DuplicateCursor(name));
            }
            cursors.insert(name, Cursor { schema, stream, rest: None });
        }
        Ok(Output::Command(CommandTag::new("DECLARE CURSOR")))
    }

    /// `FETCH [direction] [FROM | IN] name`: the next rows of the cursor.
    pub(crate) async fn fetch(
        &self,
        session: &Session,
        name: &ast::Ident,
        direction: &ast::FetchDirection,
        into: Option<ast::ObjectName>,
    ) -> Result<Output> {
        if into.is_some() {
            return Err(unsupported!("FETCH .. INTO"));
        }
        let limit = fetch_limit(direction)?;
        let mut cursors = session.cursors().0.lock().await;
        let cursor =
            cursors.get_mut(&name.value).ok_or_else(|| Error::UnknownCursor(name.value.clone()))?;
        let batches = cursor.fetch(limit).await?;
        let schema = cursor.schema.clone();
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        Ok(Output::Rows {
            schema: schema.clone(),
            stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
        })
    }

    /// `CLOSE name` or `CLOSE ALL`.
    pub(crate) async fn close(
        &self,
        session: &Session,
        cursor: ast::CloseCursor,
    ) -> Result<Output> {
        let mut cursors = session.cursors().0.lock().await;
        match cursor {
            ast::CloseCursor::All => cursors.clear(),
            ast::CloseCursor::Specific { name } => {
                cursors.remove(&name.value).ok_or(Error::UnknownCursor(name.value))?;
            }
        }
        Ok(Output::Command(CommandTag::new("CLOSE CURSOR")))
    }

    /// The columns `FETCH` from the session's cursor `name` returns.
    pub(crate) async fn cursor_schema(&self, session: &Session, name: &str) -> Result<SchemaRef> {
        let cursors = session.cursors().0.lock().await;
        let cursor = cursors.get(name).ok_or_else(|| Error::UnknownCursor(name.to_owned()))?;
        Ok(cursor.schema.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int32Array};
    use arrow::datatypes::{DataType, Field, Int32Type, Schema};

    use super::*;

    /// A cursor over batches of the given ids.
    fn cursor(batches: &[&[i32]]) -> Cursor {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        let batches: Vec<_> = batches
            .iter()
            .map(|ids| {
                let column = Arc::new(Int32Array::from(ids.to_vec()));
                Ok(RecordBatch::try_new(schema.clone(), vec![column]).unwrap())
            })
            .collect();
        let stream = RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(batches));
        Cursor { schema, stream: Box::pin(stream), rest: None }
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i32> {
        batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int32Type>().values().to_vec())
            .collect()
    }

    #[tokio::test]
    async fn fetches_split_batches_and_keep_the_rest_for_the_next() {
        let mut c = cursor(&[&[1, 2, 3], &[4, 5], &[6]]);
        assert_eq!(ids(&c.fetch(Some(2)).await.unwrap()), [1, 2]);
        assert_eq!(ids(&c.fetch(Some(2)).await.unwrap()), [3, 4]);
        assert_eq!(ids(&c.fetch(Some(0)).await.unwrap()), Vec::<i32>::new());
        assert_eq!(ids(&c.fetch(None).await.unwrap()), [5, 6]);
        assert!(c.fetch(Some(5)).await.unwrap().is_empty(), "past the end");
    }

    #[test]
    fn fetch_directions_forward_are_counts_and_others_are_refused() {
        let parse = |sql: &str| match crate::sql::parser::parse(sql).unwrap().pop() {
            Some(crate::sql::parser::Statement::Sql(stmt)) => match *stmt {
                ast::Statement::Fetch { direction, .. } => fetch_limit(&direction),
                other => panic!("{other}"),
            },
            _ => panic!("{sql}"),
        };
        assert_eq!(parse("FETCH 7 FROM c").unwrap(), Some(7));
        assert_eq!(parse("FETCH NEXT FROM c").unwrap(), Some(1));
        assert_eq!(parse("FETCH FORWARD 20 IN c").unwrap(), Some(20));
        assert_eq!(parse("FETCH ALL FROM c").unwrap(), None);
        assert!(matches!(parse("FETCH PRIOR FROM c"), Err(Error::Unsupported(_))));
        assert!(matches!(parse("FETCH BACKWARD 2 FROM c"), Err(Error::Unsupported(_))));
    }
}
