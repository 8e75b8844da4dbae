//! Batch queries: DataFusion reads Sluice relations through these providers.
//!
//! A query sees exactly one committed epoch: the engine attaches a [`QuerySnapshot`](crate::batch::QuerySnapshot) to the
//! query's session config, and every scan of that query reads through it. Scans page through
//! the relation's key range in a blocking task, decoding only the projected columns, so memory
//! stays bounded by the page size whatever the table size.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use parking_lot::RwLock;

use crate::catalog::{Catalog, DEFAULT_SCHEMA, RelationKind, TableCatalog};
use crate::storage::keycodec::encode_keys;
use crate::storage::row_codec::RowDecoder;
use crate::storage::store::{ReadSnapshot, Store};
use crate::stream::graph::StreamGraph;
use crate::types::DataType;

pub mod display_scale;
pub mod pg_catalog;
pub mod system;

/// Schema under which tables expose their hidden columns too; used to plan UPDATE and DELETE.
pub const DML_SCHEMA: &str = "__dml";

/// Rows decoded per batch of a scan.
const PAGE_ROWS: usize = 4096;

/// The snapshot every scan of one query reads, attached to the query's session config.
pub struct QuerySnapshot(pub ReadSnapshot);

/// The `dev` catalog: `public` with user tables, and the hidden DML schema.
pub struct SluiceCatalog {
    schemas: [Arc<SluiceSchema>; 2],
    /// Schemas registered by DataFusion extensions, such as `pg_catalog`.
    extra: RwLock<HashMap<String, Arc<dyn SchemaProvider>>>,
    catalog: Arc<Catalog>,
    oids: Arc<pg_catalog::RelationOids>,
}

impl SluiceCatalog {
    /// A catalog provider over Sluice's catalog.
    pub fn new(catalog: Arc<Catalog>, store: Arc<Store>, graph: Arc<StreamGraph>) -> Self {
        let schema = |with_hidden| {
            Arc::new(SluiceSchema {
                catalog: catalog.clone(),
                store: store.clone(),
                graph: graph.clone(),
                with_hidden,
            })
        };
        let system: Arc<dyn SchemaProvider> =
            Arc::new(system::SystemSchema::new(catalog.clone(), store.clone(), graph.clone()));
        let extra = HashMap::from([(system::SYSTEM_SCHEMA.to_owned(), system)]);
        Self {
            schemas: [schema(false), schema(true)],
            extra: RwLock::new(extra),
            catalog,
            oids: Arc::default(),
        }
    }

    /// The OIDs `pg_catalog.pg_class` gives Sluice's relations, for the size functions.
    pub fn relation_oids(&self) -> Arc<pg_catalog::RelationOids> {
        self.oids.clone()
    }
}

impl fmt::Debug for SluiceCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SluiceCatalog")
    }
}

impl CatalogProvider for SluiceCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names = vec![DEFAULT_SCHEMA.to_owned()];
        names.extend(self.extra.read().keys().cloned());
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        match name {
            DEFAULT_SCHEMA => Some(self.schemas[0].clone()),
            DML_SCHEMA => Some(self.schemas[1].clone()),
            _ => self.extra.read().get(name).cloned(),
        }
    }

    fn register_schema(
        &self,
        name: &str,
        schema: Arc<dyn SchemaProvider>,
    ) -> DfResult<Option<Arc<dyn SchemaProvider>>> {
        // `pg_catalog` is told what DataFusion cannot know about Sluice's relations.
        let schema: Arc<dyn SchemaProvider> = match name {
            "pg_catalog" => Arc::new(pg_catalog::PgCatalogOverlay::new(
                schema,
                self.catalog.clone(),
                self.oids.clone(),
            )),
            _ => schema,
        };
        Ok(self.extra.write().insert(name.to_owned(), schema))
    }
}

/// One schema of relations, resolved against the catalog at planning time.
pub struct SluiceSchema {
    catalog: Arc<Catalog>,
    store: Arc<Store>,
    graph: Arc<StreamGraph>,
    with_hidden: bool,
}

impl fmt::Debug for SluiceSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SluiceSchema(with_hidden: {})", self.with_hidden)
    }
}

#[async_trait]
impl SchemaProvider for SluiceSchema {
    /// Tables and views; internal tables are readable by name but not listed.
    fn table_names(&self) -> Vec<String> {
        let tables = self.catalog.tables();
        tables.iter().filter(|t| t.kind != RelationKind::Internal).map(|t| t.name.clone()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if self.catalog.source_by_name(name).is_some() {
            return Err(DataFusionError::NotImplemented(format!(
                "\"{name}\" is a source and cannot be queried directly; create a table from it with \
                 CREATE TABLE t (..) FROM {name} TABLE 'schema.table' and query the table"
            )));
        }
        let Some(table) = self.catalog.table_by_name(name) else { return Ok(None) };
        if table.kind == RelationKind::MaterializedView && table.creating.is_some() {
            let progress = self.graph.creating.progress_text(table.id).unwrap_or_default();
            return Err(DataFusionError::External(Box::new(crate::error::Error::ObjectState(
                format!(
                    "materialized view \"{name}\" is being created ({progress}); WAIT for it, \
                     follow it in rw_catalog.rw_ddl_progress, or CANCEL JOBS {}",
                    table.id
                ),
            ))));
        }
        Ok(Some(Arc::new(RelationProvider::new(table, self.store.clone(), self.with_hidden)) as _))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.catalog.table_by_name(name).is_some()
    }
}

/// Reads one relation's committed rows.
pub struct RelationProvider {
    table: Arc<TableCatalog>,
    store: Arc<Store>,
    /// Storage indices of the columns this provider exposes.
    columns: Vec<usize>,
    schema: SchemaRef,
    /// Exposed column -> the exposed display scale column of it ([`Self::with_display_scales`]).
    scales: HashMap<usize, usize>,
}

impl RelationProvider {
    /// A provider exposing the visible columns, or all of them when `with_hidden`.
    pub fn new(table: Arc<TableCatalog>, store: Arc<Store>, with_hidden: bool) -> Self {
        let (columns, schema): (Vec<usize>, SchemaRef) = if with_hidden {
            ((0..table.columns.len()).collect(), table.full_schema())
        } else {
            (table.visible_indices(), table.visible_schema())
        };
        // jsonb columns say so, for the wire protocol to describe them as jsonb; varchar
        // columns too, for views of them to be declared so.
        let fields: Vec<arrow::datatypes::Field> = schema
            .fields()
            .iter()
            .zip(&columns)
            .map(|(field, &c)| table.columns[c].mark(field.as_ref().clone()))
            .collect();
        let schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        ));
        Self { table, store, columns, schema, scales: HashMap::new() }
    }

    /// This provider with, after its columns, the hidden display scale column of each
    /// unconstrained numeric it exposes ([`display_scale`]); `None` when it has none.
    pub fn with_display_scales(&self) -> Option<RelationProvider> {
        let mut columns = self.columns.clone();
        let mut fields: Vec<arrow::datatypes::FieldRef> = self.schema.fields().to_vec();
        let mut scales = HashMap::new();
        for (at, &c) in self.columns.iter().enumerate() {
            let Some(scale) = self.table.columns.iter().position(|x| x.scale_of == Some(c)) else {
                continue;
            };
            scales.insert(at, columns.len());
            columns.push(scale);
            let column = &self.table.columns[scale];
            let field =
                arrow::datatypes::Field::new(&column.name, column.data_type.to_arrow(), true);
            fields.push(Arc::new(field));
        }
        if scales.is_empty() {
            return None;
        }
        let schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ));
        Some(Self { table: self.table.clone(), store: self.store.clone(), columns, schema, scales })
    }

    /// The position of the display scale column of column `at`, in a provider made by
    /// [`Self::with_display_scales`].
    pub fn scale_column(&self, at: usize) -> Option<usize> {
        self.scales.get(&at).copied()
    }
}

impl fmt::Debug for RelationProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelationProvider({})", self.table.name)
    }
}

#[async_trait]
impl TableProvider for RelationProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        match self.table.kind {
            RelationKind::MaterializedView => TableType::View,
            RelationKind::Table | RelationKind::Internal => TableType::Base,
        }
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Key lookups are used to read less; DataFusion still applies every filter itself.
        Ok(filters
            .iter()
            .map(|f| match self.point_key(f) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.columns.len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&projection)?);
        let scan = RelationScan {
            table: self.table.clone(),
            store: self.store.clone(),
            types: self.table.types(),
            projection: projection.iter().map(|&i| self.columns[i]).collect(),
            schema: schema.clone(),
            limit,
            point: filters.iter().find_map(|f| self.point_key(f)),
        };
        let exec =
            StreamingTableExec::try_new(schema, vec![Arc::new(scan)], None, [], false, limit)?;
        Ok(Arc::new(exec))
    }
}

impl RelationProvider {
    /// The storage key a filter `pk = literal` selects, for a table with a one-column key.
    fn point_key(&self, filter: &Expr) -> Option<Vec<u8>> {
        let [pk] = self.table.pk.as_slice() else { return None };
        let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) = filter else {
            return None;
        };
        let (column, value) = match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => {
                (c, v)
            }
            _ => return None,
        };
        let key_column = &self.table.columns[*pk];
        if column.name != key_column.name || value.is_null() {
            return None;
        }
        let value = value.cast_to(&key_column.data_type.to_arrow()).ok()?;
        let array = value.to_array().ok()?;
        encode_keys(self.table.id, &[array], 1, self.table.dist_key_len).ok()?.pop()
    }
}

/// One scan of a relation, producing batches of the projected columns.
struct RelationScan {
    table: Arc<TableCatalog>,
    store: Arc<Store>,
    types: Vec<DataType>,
    /// Storage indices to decode, in output order.
    projection: Vec<usize>,
    schema: SchemaRef,
    limit: Option<usize>,
    /// Read only the row under this key (a primary-key lookup).
    point: Option<Vec<u8>>,
}

impl fmt::Debug for RelationScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelationScan({}, {:?})", self.table.name, self.projection)
    }
}

impl PartitionStream for RelationScan {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let snapshot = ctx.session_config().get_extension::<QuerySnapshot>();
        let mut builder = RecordBatchReceiverStream::builder(self.schema.clone(), 2);
        let tx = builder.tx();
        let (table, store) = (self.table.clone(), self.store.clone());
        let (types, projection, schema) =
            (self.types.clone(), self.projection.clone(), self.schema.clone());
        let mut remaining = self.limit.unwrap_or(usize::MAX);
        let point = self.point.clone();
        builder.spawn_blocking(move || {
            let owned;
            let snapshot = match &snapshot {
                Some(s) => &s.0,
                None => {
                    owned = store.snapshot();
                    &owned
                }
            };
            if let Some(key) = &point {
                let mut decoder =
                    RowDecoder::widened(&types, &table.pk, &projection, 1, &table.widened);
                let row = snapshot.get(key).map_err(|e| DataFusionError::External(Box::new(e)))?;
                if let Some(row) = row {
                    decoder.push(key, &row).map_err(|e| DataFusionError::External(Box::new(e)))?;
                    let _ = tx.blocking_send(Ok(to_batch(&schema, decoder.finish(), 1)?));
                }
                return Ok(());
            }
            let (mut start, end) = key_range(&table);
            let mut decoder =
                RowDecoder::widened(&types, &table.pk, &projection, PAGE_ROWS, &table.widened);
            while remaining > 0 {
                let page = remaining.min(PAGE_ROWS);
                let mut rows = 0;
                let last = snapshot
                    .scan_once(&start, &end, page, |k, v| {
                        rows += 1;
                        decoder.push(k, v)
                    })
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                if rows > 0 {
                    let batch = to_batch(&schema, decoder.finish(), rows)?;
                    if tx.blocking_send(Ok(batch)).is_err() {
                        return Ok(()); // the query was cancelled
                    }
                }
                remaining -= rows;
                match last {
                    Some(mut key) if rows == page => {
                        key.push(0); // the smallest key after `key`
                        start = key;
                    }
                    _ => break,
                }
            }
            Ok(())
        });
        builder.build()
    }
}

fn key_range(table: &TableCatalog) -> (Vec<u8>, Vec<u8>) {
    use crate::catalog::TableId;
    use crate::storage::keycodec::table_prefix;
    (table_prefix(table.id).to_vec(), table_prefix(TableId(table.id.0 + 1)).to_vec())
}

fn to_batch(
    schema: &SchemaRef,
    columns: Vec<arrow::array::ArrayRef>,
    rows: usize,
) -> DfResult<RecordBatch> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}
