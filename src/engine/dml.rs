//! DML: `INSERT`, `UPDATE`, `DELETE` and `COPY .. FROM STDIN` become chunks for a table's stream
//! (the COPY data formats are read by [`crate::engine::copy`]).
//!
//! A statement takes its table's write lock, reads what it needs from the committed state
//! (rows to update or delete, keys that would be duplicated), sends its chunks to the table's
//! DML executor as one request, and returns once the epoch holding them is committed. Holding
//! the lock until the commit means every statement reads the effects of all earlier ones.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, new_null_array};
use arrow::compute::{concat_batches, take};
use datafusion::sql::sqlparser::ast;
use futures::TryStreamExt;
use tokio::sync::oneshot;

use crate::batch::DML_SCHEMA;
use crate::catalog::{ColumnCatalog, Epoch, RelationKind, TableCatalog};
use crate::engine::copy::{self, CopyTarget};
use crate::engine::ddl::{normalize_ident, relation_name};
use crate::engine::session::Session;
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::sql::parser::{Statement, parse};
use crate::storage::keycodec::encode_keys;
use crate::stream::executor::dml::DmlRequest;
use crate::stream::graph::job::Job;
use crate::stream::message::{Message, Op, StreamChunk};
use crate::types::{CastMode, DataType, cast_to};
use crate::{invalid, unsupported};

impl Engine {
    /// `INSERT INTO t [(cols)] VALUES .. | SELECT ..`.
    pub(crate) async fn insert(&self, insert: ast::Insert) -> Result<Output> {
        if insert.on.is_some() || insert.returning.is_some() {
            return Err(unsupported!("INSERT .. ON CONFLICT / RETURNING"));
        }
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(unsupported!("INSERT INTO a table function"));
        };
        let table = self.table(name)?;
        let mut targets = target_columns(&table, &insert.columns)?;
        let mut source = insert.source.ok_or_else(|| unsupported!("INSERT .. DEFAULT VALUES"))?;
        refuse_subqueries_in_values(&source)?;
        fill_default_values(&table, &targets, &mut source)?;
        numeric_values_as_text(&table, &targets, &mut source);
        alias_positionally(&mut source);
        with_defaults(&table, &mut targets, &mut source)?;
        let job = self.graph.job(table.id)?;
        let _writes = job.write_lock.lock().await;
        let state = self.query_state();
        let plan = self.plan(&state, ast::Statement::Query(source)).await?;
        if plan.schema().fields().len() != targets.len() {
            return Err(invalid!(
                "INSERT has {} expressions but {} target columns",
                plan.schema().fields().len(),
                targets.len()
            ));
        }
        let batches: Vec<RecordBatch> = match self.run_plan(state, plan).await? {
            Output::Rows { stream, .. } => stream.try_collect().await?,
            _ => unreachable!("a query produces rows"),
        };
        let mut rows = Vec::with_capacity(batches.len());
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            rows.push(full_rows(&table, &targets, batch.columns(), batch.num_rows())?);
        }
        let count = self.insert_rows(&table, &job, rows).await?;
        Ok(Output::Command(CommandTag::with_rows("INSERT", count)))
    }

    /// `UPDATE t SET col = expr, .. [WHERE ..]`.
    pub(crate) async fn update(&self, update: ast::Update) -> Result<Output> {
        if update.from.is_some() || update.returning.is_some() || !update.table.joins.is_empty() {
            return Err(unsupported!("UPDATE .. FROM / RETURNING"));
        }
        let (table, alias) = self.table_in_from(&update.table.relation)?;
        let mut assigned = Vec::with_capacity(update.assignments.len());
        for (col, value) in assignments(&update.assignments)? {
            let name =
                col.0.last().and_then(|p| p.as_ident()).map(normalize_ident).unwrap_or_default();
            let index = visible_column(&table, &name)?;
            if assigned.iter().any(|(i, _)| *i == index) {
                return Err(invalid!("multiple assignments to the same column \"{name}\""));
            }
            let value = match is_default(&value) {
                true => default_expr(&table.columns[index])?,
                false => value,
            };
            assigned.push((index, value));
        }
        let exprs: Vec<ast::Expr> = assigned.iter().map(|(_, e)| e.clone()).collect();
        let job = self.graph.job(table.id)?;
        let _writes = job.write_lock.lock().await;
        let old = self.select_rows(&table, &alias, &exprs, update.selection.as_ref()).await?;
        let n = old.num_rows();
        if n == 0 {
            return Ok(Output::Command(CommandTag::with_rows("UPDATE", 0)));
        }
        let width = table.columns.len();
        let mut new_columns: Vec<ArrayRef> = old.columns()[..width].to_vec();
        for (k, (index, _)) in assigned.iter().enumerate() {
            new_columns[*index] = cast_column(&table.columns[*index], &old.columns()[width + k])?;
        }
        let old = RecordBatch::try_new(table.full_schema(), old.columns()[..width].to_vec())?;
        let new = RecordBatch::try_new(table.full_schema(), new_columns)?;
        check_row(&table, &new)?;
        let key_changes = assigned.iter().any(|(i, _)| table.pk.contains(i));
        let chunks = if key_changes {
            self.check_new_keys(&table, &new, Some(&old))?;
            vec![StreamChunk::deletes(old), StreamChunk::inserts(new)]
        } else {
            vec![update_pairs(&old, &new)?]
        };
        self.apply(&job, chunks).await?;
        Ok(Output::Command(CommandTag::with_rows("UPDATE", n)))
    }

    /// `DELETE FROM t [WHERE ..]`.
    pub(crate) async fn delete(&self, delete: ast::Delete) -> Result<Output> {
        if delete.using.is_some() || delete.returning.is_some() || !delete.tables.is_empty() {
            return Err(unsupported!("DELETE .. USING / RETURNING"));
        }
        let from = match &delete.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        let [from] = from.as_slice() else {
            return Err(unsupported!("DELETE from several tables"));
        };
        if !from.joins.is_empty() {
            return Err(unsupported!("DELETE with joins"));
        }
        let (table, alias) = self.table_in_from(&from.relation)?;
        let job = self.graph.job(table.id)?;
        let _writes = job.write_lock.lock().await;
        let rows = self.select_rows(&table, &alias, &[], delete.selection.as_ref()).await?;
        let n = rows.num_rows();
        if n > 0 {
            self.apply(&job, vec![StreamChunk::deletes(rows)]).await?;
        }
        Ok(Output::Command(CommandTag::with_rows("DELETE", n)))
    }

    /// `COPY t [(cols)] FROM STDIN [options]`: checks the target, then waits for the data.
    pub(crate) fn copy_from_stdin(
        &self,
        source: ast::CopySource,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
    ) -> Result<Output> {
        let ast::CopySource::Table { table_name, columns } = source else {
            return Err(unsupported!("COPY (query) FROM"));
        };
        let table = self.table(&table_name)?;
        let names: Vec<ast::ObjectName> =
            columns.into_iter().map(|c| ast::ObjectName::from(vec![c])).collect();
        let columns = target_columns(&table, &names)?;
        let format = copy::format(options, legacy)?;
        Ok(Output::CopyIn(CopyTarget { table, columns, format }))
    }

    /// `COPY table [(columns)] TO STDOUT` and `COPY (query) TO STDOUT`: the rows of the table
    /// (or view) or the query, for the client to read in the format the options name.
    pub(crate) async fn copy_to_stdout(
        &self,
        session: &Session,
        source: ast::CopySource,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
    ) -> Result<Output> {
        let format = copy::format(options, legacy)?;
        let query = match source {
            ast::CopySource::Query(query) => ast::Statement::Query(query),
            ast::CopySource::Table { table_name, columns } => {
                let list = match columns.is_empty() {
                    true => "*".to_owned(),
                    false => columns.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                };
                let sql = format!("SELECT {list} FROM {table_name}");
                let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
                let mut parsed =
                    datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, &sql)
                        .map_err(|e| Error::InvalidStatement(format!("COPY {table_name}: {e}")))?;
                parsed.pop().ok_or_else(|| invalid!("COPY {table_name}: nothing to read"))?
            }
        };
        match self.query(session, query).await? {
            Output::Rows { schema, stream } => Ok(Output::CopyOut { schema, stream, format }),
            _ => Err(invalid!("COPY TO reads rows")),
        }
    }

    /// Loads the data of a finished `COPY .. FROM STDIN`; returns the number of rows.
    pub async fn copy_in(&self, target: &CopyTarget, data: &[u8]) -> Result<usize> {
        let table = &target.table;
        let texts = match target.format.binary {
            true => {
                let types: Vec<DataType> =
                    target.columns.iter().map(|&c| table.columns[c].data_type).collect();
                copy::parse_binary(data, &types)?
            }
            false => copy::parse(data, target.columns.len(), &target.format)?,
        };
        let mut rows = Vec::with_capacity(texts.len());
        for batch in texts.iter().filter(|b| b.num_rows() > 0) {
            rows.push(full_rows(table, &target.columns, batch.columns(), batch.num_rows())?);
        }
        let job = self.graph.job(table.id)?;
        let _writes = job.write_lock.lock().await;
        self.insert_rows(table, &job, rows).await
    }

    /// Inserts complete rows after checking their keys are new; returns the row count.
    async fn insert_rows(
        &self,
        table: &TableCatalog,
        job: &Job,
        rows: Vec<RecordBatch>,
    ) -> Result<usize> {
        if rows.is_empty() {
            return Ok(0);
        }
        let all = concat_batches(&table.full_schema(), &rows)?;
        if !table.has_row_id() {
            self.check_new_keys(table, &all, None)?;
        }
        let n = all.num_rows();
        let chunks = rows.into_iter().map(StreamChunk::inserts).collect();
        self.apply(job, chunks).await?;
        Ok(n)
    }

    /// Fails with a duplicate-key error if a key of `new` repeats within `new` or exists in the
    /// committed table (not counting the keys of `replaced`, which the statement removes).
    fn check_new_keys(
        &self,
        table: &TableCatalog,
        new: &RecordBatch,
        replaced: Option<&RecordBatch>,
    ) -> Result<()> {
        let keys = table_keys(table, new)?;
        let freed: HashSet<Vec<u8>> = match replaced {
            Some(old) => table_keys(table, old)?.into_iter().collect(),
            None => HashSet::new(),
        };
        let mut seen = HashSet::with_capacity(keys.len());
        let snapshot = self.store.snapshot();
        let stored = snapshot.multi_get(&keys)?;
        for (row, (key, existing)) in keys.iter().zip(stored).enumerate() {
            let taken = existing.is_some() && !freed.contains(key);
            if taken || !seen.insert(key.as_slice()) {
                return Err(Error::DuplicateKey {
                    table: table.name.clone(),
                    key: render_key(table, new, row),
                });
            }
        }
        Ok(())
    }

    /// Sends one statement's chunks and waits until the epoch holding them is committed.
    async fn apply(&self, job: &Job, chunks: Vec<StreamChunk>) -> Result<()> {
        self.send_changes(job, chunks.into_iter().map(Message::Chunk).collect()).await
    }

    /// `TRUNCATE [TABLE] t [, ..]`: empties each table in turn (and the views over it follow).
    /// Sluice has no sequences and no foreign keys, so `RESTART IDENTITY` and `CASCADE` have
    /// nothing more to do.
    pub(crate) async fn truncate(&self, truncate: ast::Truncate) -> Result<Output> {
        if truncate.partitions.is_some() || truncate.on_cluster.is_some() || truncate.if_exists {
            return Err(unsupported!("TRUNCATE with PARTITION, ON CLUSTER or IF EXISTS"));
        }
        let tables = truncate
            .table_names
            .iter()
            .map(|target| self.table(&target.name))
            .collect::<Result<Vec<_>>>()?;
        for table in tables {
            let job = self.graph.job(table.id)?;
            let _writes = job.write_lock.lock().await;
            self.send_changes(&job, vec![Message::Truncate]).await?;
        }
        Ok(Output::Command(CommandTag::new("TRUNCATE TABLE")))
    }

    /// Sends one statement's changes and waits until the epoch holding them is committed.
    async fn send_changes(&self, job: &Job, changes: Vec<Message>) -> Result<()> {
        let (reply, epoch) = oneshot::channel();
        let dml = job.dml.as_ref().ok_or_else(|| Error::Stream("not a table".into()))?;
        // A job that stopped between the lookup and the send is being recovered.
        let stopped = || Error::Recovered("the table's streaming job is being recovered".into());
        dml.send(DmlRequest { changes, reply }).await.map_err(|_| stopped())?;
        let epoch = epoch.await.map_err(|_| stopped())?;
        self.wait_committed(epoch).await
    }

    /// Waits until `epoch` is committed, asking for an early checkpoint; fails if a recovery
    /// discarded it.
    pub(crate) async fn wait_committed(&self, epoch: Epoch) -> Result<()> {
        self.barrier.request_checkpoint();
        self.store.wait_committed(epoch).await
    }

    /// All columns (hidden ones too) of the rows matching `selection`, followed by `exprs`
    /// evaluated on each of them.
    async fn select_rows(
        &self,
        table: &TableCatalog,
        alias: &str,
        exprs: &[ast::Expr],
        selection: Option<&ast::Expr>,
    ) -> Result<RecordBatch> {
        let items: Vec<String> = table.columns.iter().map(|c| quote(&c.name)).collect();
        let sql = format!(
            "SELECT {} FROM {}.{} AS {}",
            items.join(", "),
            quote(DML_SCHEMA),
            quote(&table.name),
            quote(alias)
        );
        let Some(Statement::Sql(mut query)) = parse(&sql)?.pop() else {
            unreachable!("a generated SELECT parses to one statement")
        };
        // The user's expressions go in as parsed: printed and parsed again, a string literal
        // holding quotes would lose some.
        if let ast::Statement::Query(q) = query.as_mut()
            && let ast::SetExpr::Select(select) = q.body.as_mut()
        {
            for (k, expr) in exprs.iter().enumerate() {
                let alias = ast::Ident::with_quote('"', format!("__sluice_new_{k}"));
                select
                    .projection
                    .push(ast::SelectItem::ExprWithAlias { expr: expr.clone(), alias });
            }
            select.selection = selection.cloned();
        }
        let state = self.query_state();
        let plan = self.plan(&state, *query).await?;
        // The executed plan's schema: its types can differ from the logical plan's (a CASE of
        // an int column and a bigint literal).
        let (schema, batches): (_, Vec<RecordBatch>) = match self.run_plan(state, plan).await? {
            Output::Rows { schema, stream } => (schema, stream.try_collect().await?),
            _ => unreachable!("a query produces rows"),
        };
        Ok(concat_batches(&schema, &batches)?)
    }

    /// The table a statement names.
    /// Only tables take DML; views and internal tables are written by their jobs.
    pub(crate) fn table(&self, name: &ast::ObjectName) -> Result<Arc<TableCatalog>> {
        let name = relation_name(name)?;
        let table = self
            .catalog
            .table_by_name(&name)
            .ok_or(Error::UnknownRelation { kind: "relation", name: name.clone() })?;
        if table.cdc.is_some() {
            return Err(Error::WrongObjectType(format!(
                "cannot change table \"{name}\": its rows come from a CDC source; change the upstream table instead"
            )));
        }
        if table.kind != RelationKind::Table {
            return Err(Error::WrongObjectType(format!(
                "cannot change {} \"{name}\": only tables take INSERT, UPDATE, DELETE and COPY",
                table.kind.noun()
            )));
        }
        Ok(table)
    }

    /// The table and the name it goes by in an UPDATE or DELETE.
    fn table_in_from(&self, relation: &ast::TableFactor) -> Result<(Arc<TableCatalog>, String)> {
        let ast::TableFactor::Table { name, alias, .. } = relation else {
            return Err(unsupported!("UPDATE or DELETE of {relation}"));
        };
        let table = self.table(name)?;
        let alias = alias.as_ref().map_or(table.name.clone(), |a| normalize_ident(&a.name));
        Ok((table, alias))
    }
}

/// Names the output columns of an INSERT's SELECT by position: INSERT maps them by position,
/// and DataFusion refuses a SELECT list with two columns of the same name.
/// DataFusion cannot run a subquery inside `VALUES`; the same rows as `SELECT` work.
fn refuse_subqueries_in_values(query: &ast::Query) -> Result<()> {
    use std::ops::ControlFlow;

    use datafusion::sql::sqlparser::ast::{Visit, Visitor};

    struct Subquery;
    impl Visitor for Subquery {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &ast::Expr) -> ControlFlow<()> {
            match expr {
                ast::Expr::Subquery(_)
                | ast::Expr::Exists { .. }
                | ast::Expr::InSubquery { .. } => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    if let ast::SetExpr::Values(values) = query.body.as_ref()
        && values.visit(&mut Subquery).is_break()
    {
        return Err(unsupported!(
            "a subquery inside INSERT .. VALUES; write INSERT INTO t SELECT .. instead"
        ));
    }
    Ok(())
}

fn alias_positionally(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else { return };
    for (i, item) in select.projection.iter_mut().enumerate() {
        let alias = ast::Ident::new(format!("column{}", i + 1));
        match item {
            ast::SelectItem::UnnamedExpr(expr) => {
                *item = ast::SelectItem::ExprWithAlias { expr: expr.clone(), alias };
            }
            ast::SelectItem::ExprWithAlias { alias: existing, .. } => *existing = alias,
            _ => {}
        }
    }
}

/// Storage indices of the target columns of an INSERT or COPY; all visible columns if none.
/// The assignments of an UPDATE, one per column: `SET (a, b) = (x, y)` is `SET a = x, b = y`.
fn assignments(list: &[ast::Assignment]) -> Result<Vec<(ast::ObjectName, ast::Expr)>> {
    let mut out = Vec::with_capacity(list.len());
    for a in list {
        match (&a.target, &a.value) {
            (ast::AssignmentTarget::ColumnName(col), value) => {
                out.push((col.clone(), value.clone()))
            }
            (ast::AssignmentTarget::Tuple(cols), ast::Expr::Tuple(values))
                if cols.len() == values.len() =>
            {
                out.extend(cols.iter().cloned().zip(values.iter().cloned()));
            }
            (ast::AssignmentTarget::Tuple(cols), ast::Expr::Tuple(values)) => {
                return Err(Error::InvalidStatement(format!(
                    "number of columns ({}) does not match number of values ({})",
                    cols.len(),
                    values.len()
                )));
            }
            _ => return Err(unsupported!("UPDATE .. SET (columns) = (subquery)")),
        }
    }
    Ok(out)
}

/// Whether `expr` is the keyword `DEFAULT` (in VALUES or SET).
fn is_default(expr: &ast::Expr) -> bool {
    matches!(expr, ast::Expr::Identifier(id) if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("default"))
}

/// Parses a query Sluice wrote itself.
fn parse_query(sql: &str) -> Result<Box<ast::Query>> {
    if let Some(crate::sql::parser::Statement::Sql(stmt)) = crate::sql::parser::parse(sql)?.pop()
        && let ast::Statement::Query(query) = *stmt
    {
        return Ok(query);
    }
    Err(invalid!("not a query: {sql}"))
}

/// `column`'s DEFAULT expression, or NULL.
fn default_expr(column: &ColumnCatalog) -> Result<ast::Expr> {
    let Some(default) = &column.default else {
        return Ok(ast::Expr::Value(ast::Value::Null.into()));
    };
    let query = parse_query(&format!("SELECT {default}"))?;
    if let ast::SetExpr::Select(select) = *query.body
        && let Some(
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. },
        ) = select.projection.into_iter().next()
    {
        return Ok(e);
    }
    Err(invalid!("DEFAULT {default} is not an expression"))
}

/// Replaces `DEFAULT` in the rows of `INSERT .. VALUES` by the target column's default.
fn fill_default_values(
    table: &TableCatalog,
    targets: &[usize],
    source: &mut ast::Query,
) -> Result<()> {
    let ast::SetExpr::Values(values) = source.body.as_mut() else { return Ok(()) };
    for row in &mut values.rows {
        for (j, value) in row.iter_mut().enumerate() {
            if is_default(value)
                && let Some(&column) = targets.get(j)
            {
                *value = default_expr(&table.columns[column])?;
            }
        }
    }
    Ok(())
}

/// In `INSERT .. VALUES` rows, writes the number literals of a numeric or float column as text when
/// another row gives that column text (`(1.5), ('NaN')`): the rows then share a type (text),
/// which is cast to the column's type as one text value alone would be, where the planner
/// would cast the text to a number type and fail on `NaN` or `Infinity`.
fn numeric_values_as_text(table: &TableCatalog, targets: &[usize], source: &mut ast::Query) {
    let ast::SetExpr::Values(values) = source.body.as_mut() else { return };
    let text = |v: &ast::Expr| {
        matches!(
            v,
            ast::Expr::Value(ast::ValueWithSpan { value: ast::Value::SingleQuotedString(_), .. })
        )
    };
    for (j, &column) in targets.iter().enumerate() {
        let numeric = matches!(
            table.columns[column].data_type,
            crate::types::DataType::Decimal { .. }
                | crate::types::DataType::Float32
                | crate::types::DataType::Float64
        );
        if !numeric || !values.rows.iter().any(|row| row.get(j).is_some_and(text)) {
            continue;
        }
        for row in &mut values.rows {
            let Some(value) = row.get_mut(j) else { continue };
            let written = match &*value {
                ast::Expr::Value(ast::ValueWithSpan {
                    value: ast::Value::Number(n, _), ..
                }) => n.clone(),
                ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => match expr.as_ref() {
                    ast::Expr::Value(ast::ValueWithSpan {
                        value: ast::Value::Number(n, _),
                        ..
                    }) => format!("-{n}"),
                    _ => continue,
                },
                _ => continue,
            };
            *value = ast::Expr::Value(ast::Value::SingleQuotedString(written).into());
        }
    }
}

/// When the INSERT leaves out columns that have a DEFAULT, extends the source by their default
/// expressions, evaluated per row (`SELECT *, default.. FROM (source)`), and the targets by them.
fn with_defaults(
    table: &TableCatalog,
    targets: &mut Vec<usize>,
    source: &mut Box<ast::Query>,
) -> Result<()> {
    let missing: Vec<usize> = table
        .visible_indices()
        .into_iter()
        .filter(|i| !targets.contains(i) && table.columns[*i].default.is_some())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut defaults = String::new();
    for (k, &i) in missing.iter().enumerate() {
        defaults
            .push_str(&format!(", {} AS __sluice_default_{k}", default_expr(&table.columns[i])?));
    }
    *source = parse_query(&format!("SELECT *{defaults} FROM ({source}) AS __sluice_insert"))?;
    targets.extend(missing);
    Ok(())
}

fn target_columns(table: &TableCatalog, names: &[ast::ObjectName]) -> Result<Vec<usize>> {
    if names.is_empty() {
        return Ok(table.visible_indices());
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let col = name.0.last().and_then(|p| p.as_ident()).map(normalize_ident).unwrap_or_default();
        let index = visible_column(table, &col)?;
        if out.contains(&index) {
            return Err(invalid!("column \"{col}\" specified more than once"));
        }
        out.push(index);
    }
    Ok(out)
}

fn visible_column(table: &TableCatalog, name: &str) -> Result<usize> {
    table
        .columns
        .iter()
        .position(|c| c.name == name && !c.hidden)
        .ok_or_else(|| Error::UnknownColumn(format!("{name}\" of relation \"{}", table.name)))
}

/// Casts values written to `column` to its type, holding a `varchar(n)` to its length.
fn cast_column(column: &ColumnCatalog, values: &ArrayRef) -> Result<ArrayRef> {
    let cast = cast_to(values, column.data_type, CastMode::Strict)?;
    match column.varchar {
        Some(varchar) => varchar.enforce(&cast),
        None => Ok(cast),
    }
}

/// Builds complete rows of `table` from values for the `targets` columns: values are cast to
/// the column types, other columns are NULL, and a generated row id is filled in.
fn full_rows(
    table: &TableCatalog,
    targets: &[usize],
    values: &[ArrayRef],
    n: usize,
) -> Result<RecordBatch> {
    let mut columns = Vec::with_capacity(table.columns.len());
    for (i, column) in table.columns.iter().enumerate() {
        let array = match targets.iter().position(|&t| t == i) {
            Some(j) => cast_column(column, &values[j])?,
            None if column.hidden => {
                Arc::new(Int64Array::from_iter_values((0..n).map(|_| next_row_id())))
            }
            None => new_null_array(&column.data_type.to_arrow(), n),
        };
        columns.push(array);
    }
    let batch = RecordBatch::try_new(table.full_schema(), columns).map_err(nullability_error)?;
    check_row(table, &batch)?;
    Ok(batch)
}

/// Checks values a column type cannot enforce by itself: key columns are not NULL, jsonb is
/// valid JSON.
fn check_row(table: &TableCatalog, batch: &RecordBatch) -> Result<()> {
    for (i, column) in table.columns.iter().enumerate() {
        let array = batch.column(i);
        if table.pk.contains(&i) && array.null_count() > 0 {
            return Err(Error::NotNull(column.name.clone()));
        }
        if column.data_type == DataType::Jsonb {
            for value in array.as_string::<i32>().iter().flatten() {
                serde_json::from_str::<serde_json::Value>(value).map_err(|e| {
                    Error::InvalidInput(format!("invalid input syntax for type json: {e}"))
                })?;
            }
        }
    }
    Ok(())
}

fn nullability_error(e: arrow::error::ArrowError) -> Error {
    Error::InvalidInput(e.to_string())
}

/// A chunk of `U-`/`U+` pairs: row i of `old` followed by row i of `new`.
fn update_pairs(old: &RecordBatch, new: &RecordBatch) -> Result<StreamChunk> {
    let n = old.num_rows();
    let both = concat_batches(&old.schema(), [old, new])?;
    let order =
        arrow::array::UInt32Array::from_iter_values((0..n as u32).flat_map(|i| [i, i + n as u32]));
    let columns = both
        .columns()
        .iter()
        .map(|c| take(c, &order, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let data = RecordBatch::try_new(old.schema(), columns)?;
    let ops = (0..n).flat_map(|_| [Op::UpdateDelete, Op::UpdateInsert]).collect();
    Ok(StreamChunk::new(ops, data))
}

fn table_keys(table: &TableCatalog, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    let pk: Vec<ArrayRef> = table.pk.iter().map(|&i| batch.column(i).clone()).collect();
    encode_keys(table.id, &pk, batch.num_rows(), table.dist_key_len)
}

/// `id=5` style rendering of one row's key, for error messages.
fn render_key(table: &TableCatalog, batch: &RecordBatch, row: usize) -> String {
    let names: Vec<&str> = table.pk.iter().map(|&i| table.columns[i].name.as_str()).collect();
    let values: Vec<String> = table
        .pk
        .iter()
        .map(|&i| {
            arrow::util::display::array_value_to_string(batch.column(i), row).unwrap_or_default()
        })
        .collect();
    format!("{})=({}", names.join(", "), values.join(", "))
}

/// Quotes an identifier for generated SQL.
fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// A row id unique across restarts: microseconds since the epoch, shifted to leave room for
/// ids generated within the same microsecond, and never decreasing within the process.
fn next_row_id() -> i64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64) << 8;
    let prev = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| Some(now.max(last + 1)))
        .expect("the update closure always succeeds");
    now.max(prev + 1) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_increase() {
        let a = next_row_id();
        let b = next_row_id();
        assert!(b > a);
    }
}
