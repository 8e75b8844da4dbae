//! What `pg_catalog` says about Sluice's own relations, and the catalog functions psql calls.
//!
//! The `pg_catalog` schema comes from `datafusion-pg-catalog`, which knows relations only as
//! DataFusion sees them: a materialized view is a view (so psql's `\dm` listed nothing) and a
//! column's type is its Arrow type (`numeric(10,2)` showed as `numeric`, jsonb as `text`).
//! [`PgCatalogOverlay`] wraps that schema and corrects two of its tables from Sluice's catalog:
//! `pg_class.relkind` is `m` for materialized views, and `pg_attribute.atttypid` /
//! `atttypmod` are the declared SQL type's; `pg_attrdef` holds the columns' defaults, as SQL
//! text that `pg_get_expr` returns unchanged.
//!
//! The functions ([`catalog_udfs`]): `pg_table_size` and its kin read RocksDB's estimate of the
//! relation's stored bytes (rows still in the memtable are not counted until flushed);
//! `pg_size_pretty` prints sizes as Postgres does; `pg_function_is_visible`,
//! `pg_type_is_visible` and the other `pg_*_is_visible` are true, as everything is on the search
//! path. `pg_get_viewdef` is the
//! query a materialized view was created with; `pg_database_size` all stored state (there is
//! one database). Sluice has no `COMMENT
//! ON` and no user-defined functions, so `obj_description`, `col_description`,
//! `shobj_description`, `pg_get_function_result` and `pg_get_function_arguments` are NULL.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Int32Type, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarUDF, Volatility, create_udf};
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::RwLock;

use crate::catalog::{Catalog, DEFAULT_SCHEMA, RelationKind, TableCatalog, TableId};
use crate::sql::functions::shaped_like;
use crate::storage::store::Store;
use crate::types::DataType;

/// The OIDs `pg_class` last gave Sluice's relations, for the size functions.
#[derive(Debug, Default)]
pub struct RelationOids(RwLock<HashMap<i32, TableId>>);

/// `pg_catalog` with Sluice's corrections of `pg_class` and `pg_attribute`.
pub struct PgCatalogOverlay {
    inner: Arc<dyn SchemaProvider>,
    catalog: Arc<Catalog>,
    oids: Arc<RelationOids>,
}

impl PgCatalogOverlay {
    /// Wraps the `pg_catalog` schema `inner`.
    pub fn new(
        inner: Arc<dyn SchemaProvider>,
        catalog: Arc<Catalog>,
        oids: Arc<RelationOids>,
    ) -> Self {
        Self { inner, catalog, oids }
    }
}

impl fmt::Debug for PgCatalogOverlay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PgCatalogOverlay")
    }
}

#[async_trait]
impl SchemaProvider for PgCatalogOverlay {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let Some(table) = self.inner.table(name).await? else { return Ok(None) };
        let which = match name.to_ascii_lowercase().as_str() {
            "pg_class" => Corrected::Class,
            "pg_attribute" => Corrected::Attribute,
            "pg_attrdef" => Corrected::AttrDef,
            "pg_namespace" => Corrected::Namespace,
            _ => return Ok(Some(table)),
        };
        Ok(Some(Arc::new(CorrectedTable {
            which,
            inner: table,
            pg_catalog: self.inner.clone(),
            catalog: self.catalog.clone(),
            oids: self.oids.clone(),
        })))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

/// Which table a [`CorrectedTable`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Corrected {
    Class,
    Attribute,
    AttrDef,
    Namespace,
}

/// `pg_class` or `pg_attribute`, read whole from `datafusion-pg-catalog` and corrected.
struct CorrectedTable {
    which: Corrected,
    inner: Arc<dyn TableProvider>,
    pg_catalog: Arc<dyn SchemaProvider>,
    catalog: Arc<Catalog>,
    oids: Arc<RelationOids>,
}

impl fmt::Debug for CorrectedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CorrectedTable({:?})", self.which)
    }
}

/// Every row of a `pg_catalog` table.
async fn read_all(
    table: &Arc<dyn TableProvider>,
    state: &dyn Session,
) -> DfResult<Vec<RecordBatch>> {
    let plan = table.scan(state, None, &[], None).await?;
    datafusion::physical_plan::collect(plan, state.task_ctx()).await
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> DfResult<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog has no column {name}")))
}

impl CorrectedTable {
    /// Sluice's relations in `pg_class` of these rows, by OID; also remembered for the size
    /// functions.
    async fn relations(
        &self,
        class: &[RecordBatch],
        state: &dyn Session,
    ) -> DfResult<HashMap<i32, Arc<TableCatalog>>> {
        let namespaces = match self.pg_catalog.table("pg_namespace").await? {
            Some(table) => read_all(&table, state).await?,
            None => Vec::new(),
        };
        let mut public = None;
        for batch in &namespaces {
            let oid = column::<Int32Array>(batch, "oid")?;
            let name = column::<StringArray>(batch, "nspname")?;
            for row in 0..batch.num_rows() {
                if name.value(row) == DEFAULT_SCHEMA {
                    public = Some(oid.value(row));
                }
            }
        }
        let mut relations = HashMap::new();
        for batch in class {
            let oid = column::<Int32Array>(batch, "oid")?;
            let name = column::<StringArray>(batch, "relname")?;
            let namespace = column::<Int32Array>(batch, "relnamespace")?;
            for row in 0..batch.num_rows() {
                if Some(namespace.value(row)) != public {
                    continue;
                }
                if let Some(table) = self.catalog.table_by_name(name.value(row)) {
                    relations.insert(oid.value(row), table);
                }
            }
        }
        *self.oids.0.write() = relations.iter().map(|(oid, t)| (*oid, t.id)).collect();
        Ok(relations)
    }

    /// `pg_class` with relkind `m` for materialized views.
    async fn correct_class(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let class = read_all(&self.inner, state).await?;
        let relations = self.relations(&class, state).await?;
        class
            .into_iter()
            .map(|batch| {
                let oid = column::<Int32Array>(&batch, "oid")?;
                let kind = column::<StringArray>(&batch, "relkind")?;
                let corrected: StringArray = (0..batch.num_rows())
                    .map(|row| match relations.get(&oid.value(row)) {
                        Some(t) if t.kind == RelationKind::MaterializedView => Some("m"),
                        _ => kind.is_valid(row).then(|| kind.value(row)),
                    })
                    .collect();
                let batch = replace(&batch, "relkind", Arc::new(corrected))?;
                let schema = class_schema(&batch.schema());
                let mut columns = batch.columns().to_vec();
                for field in &schema.fields()[columns.len()..] {
                    columns.push(arrow::array::new_null_array(field.data_type(), batch.num_rows()));
                }
                Ok(RecordBatch::try_new(schema, columns)?)
            })
            .collect()
    }

    /// `pg_attribute` with the declared types of Sluice's columns.
    async fn correct_attribute(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let class = match self.pg_catalog.table("pg_class").await? {
            Some(table) => read_all(&table, state).await?,
            None => Vec::new(),
        };
        let relations = self.relations(&class, state).await?;
        read_all(&self.inner, state)
            .await?
            .into_iter()
            .map(|batch| {
                let relation = column::<Int32Array>(&batch, "attrelid")?;
                let name = column::<StringArray>(&batch, "attname")?;
                let type_oid =
                    batch.column_by_name("atttypid").map(|c| c.as_primitive::<Int32Type>());
                let type_mod =
                    batch.column_by_name("atttypmod").map(|c| c.as_primitive::<Int32Type>());
                let (Some(type_oid), Some(type_mod)) = (type_oid, type_mod) else {
                    return Err(DataFusionError::Internal("pg_attribute has no types".into()));
                };
                let has_default = column::<arrow::array::BooleanArray>(&batch, "atthasdef")?;
                let mut oids = Vec::with_capacity(batch.num_rows());
                let mut mods = Vec::with_capacity(batch.num_rows());
                let mut defaults = Vec::with_capacity(batch.num_rows());
                for row in 0..batch.num_rows() {
                    let column = relations
                        .get(&relation.value(row))
                        .and_then(|t| t.columns.iter().find(|c| c.name == name.value(row)));
                    let declared = column.map(|c| match c.varchar {
                        Some(v) => (1043, v.max_length.map_or(-1, |n| n as i32 + 4)),
                        None => pg_type(c.data_type),
                    });
                    let (oid, modifier) =
                        declared.unwrap_or((type_oid.value(row), type_mod.value(row)));
                    oids.push(oid);
                    mods.push(modifier);
                    defaults.push(match column {
                        Some(c) => c.default.is_some(),
                        None => has_default.value(row),
                    });
                }
                let batch = replace(&batch, "atttypid", Arc::new(Int32Array::from(oids)))?;
                let batch = replace(&batch, "atttypmod", Arc::new(Int32Array::from(mods)))?;
                let defaults = arrow::array::BooleanArray::from(defaults);
                replace(&batch, "atthasdef", Arc::new(defaults))
            })
            .collect()
    }
}

/// The columns of Postgres's `pg_class` that `datafusion-pg-catalog` lacks; Sluice's relations
/// have no storage options and no access privileges, so both are NULL.
const CLASS_EXTRA: [&str; 2] = ["reloptions", "relacl"];

/// The access privileges column of a table that has one: an `aclitem[]` in Postgres, text in
/// `datafusion-pg-catalog` (so psql's `\dn+`, which `array_to_string`s them,
/// failed). Sluice has no access privileges: the column is a NULL list.
fn acls_as_lists(inner: &SchemaRef, which: Corrected) -> SchemaRef {
    let acl = match which {
        Corrected::Attribute => "attacl",
        Corrected::Namespace => "nspacl",
        _ => return inner.clone(),
    };
    let fields: Vec<_> = inner
        .fields()
        .iter()
        .map(|f| match f.name() == acl {
            true => Arc::new(Field::new(acl, ArrowType::new_list(ArrowType::Utf8, true), true)),
            false => f.clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, inner.metadata().clone()))
}

/// `pg_class`'s schema with [`CLASS_EXTRA`].
fn class_schema(inner: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<_> = inner.fields().iter().cloned().collect();
    for name in CLASS_EXTRA {
        if inner.index_of(name).is_err() {
            fields.push(Arc::new(Field::new(
                name,
                ArrowType::new_list(ArrowType::Utf8, true),
                true,
            )));
        }
    }
    Arc::new(Schema::new(fields))
}

impl CorrectedTable {
    /// `pg_attrdef`: the defaults of Sluice's columns, `adbin` holding the expression's SQL
    /// (which Sluice's `pg_get_expr` returns as it is).
    async fn correct_attrdef(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let class = match self.pg_catalog.table("pg_class").await? {
            Some(table) => read_all(&table, state).await?,
            None => Vec::new(),
        };
        let mut relations: Vec<_> = self.relations(&class, state).await?.into_iter().collect();
        relations.sort_by_key(|(oid, _)| *oid);
        let (mut oids, mut relids, mut numbers, mut exprs) = (vec![], vec![], vec![], vec![]);
        for (oid, table) in relations {
            let visible = table.columns.iter().filter(|c| !c.hidden);
            for (number, column) in (1i64..).zip(visible) {
                if let Some(default) = &column.default {
                    // An OID of its own, past the relations' (which count up from 16384).
                    oids.push(Some(i64::from(oid) << 16 | number));
                    relids.push(Some(i64::from(oid)));
                    numbers.push(Some(number));
                    exprs.push(Some(default.clone()));
                }
            }
        }
        let schema = self.inner.schema();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let array: ArrayRef = match field.name().as_str() {
                "oid" => Arc::new(Int64Array::from(oids.clone())),
                "adrelid" => Arc::new(Int64Array::from(relids.clone())),
                "adnum" => Arc::new(Int64Array::from(numbers.clone())),
                "adbin" => Arc::new(StringArray::from(exprs.clone())),
                _ => arrow::array::new_null_array(field.data_type(), oids.len()),
            };
            columns.push(arrow::compute::cast(&array, field.data_type())?);
        }
        Ok(vec![RecordBatch::try_new(schema, columns)?])
    }
}

/// `batch` with its column `name` replaced.
fn replace(batch: &RecordBatch, name: &str, array: ArrayRef) -> DfResult<RecordBatch> {
    let index = batch.schema().index_of(name)?;
    let mut columns = batch.columns().to_vec();
    columns[index] = array;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The Postgres type OID and type modifier of a Sluice type, as `pg_attribute` holds them.
pub fn pg_type(ty: DataType) -> (i32, i32) {
    match ty {
        DataType::Boolean => (16, -1),
        DataType::Int16 => (21, -1),
        DataType::Int32 => (23, -1),
        DataType::Int64 => (20, -1),
        DataType::Float32 => (700, -1),
        DataType::Float64 => (701, -1),
        DataType::Decimal { precision, scale }
            if crate::types::numeric::is_unconstrained(precision, scale) =>
        {
            (1700, -1)
        }
        DataType::Decimal { precision, scale } => {
            (1700, ((i32::from(precision) << 16) | i32::from(scale as u8)) + 4)
        }
        DataType::Varchar => (25, -1),
        DataType::Date => (1082, -1),
        DataType::Timestamp => (1114, -1),
        DataType::Timestamptz => (1184, -1),
        DataType::Jsonb => (3802, -1),
        DataType::Bytea => (17, -1),
        DataType::Interval => (1186, -1),
        DataType::Time => (1083, -1),
        DataType::Array(element) => (array_oid(element.get()), -1),
    }
}

/// The type OID of Postgres's array of `element`s (`_int4` of `integer`).
pub fn array_oid(element: DataType) -> i32 {
    match element {
        DataType::Boolean => 1000,
        DataType::Bytea => 1001,
        DataType::Int16 => 1005,
        DataType::Int32 => 1007,
        DataType::Varchar => 1009,
        DataType::Int64 => 1016,
        DataType::Float32 => 1021,
        DataType::Float64 => 1022,
        DataType::Timestamp => 1115,
        DataType::Date => 1182,
        DataType::Time => 1183,
        DataType::Timestamptz => 1185,
        DataType::Interval => 1187,
        DataType::Decimal { .. } => 1231,
        DataType::Jsonb => 3807,
        DataType::Array(_) => 2277,
    }
}

#[async_trait]
impl TableProvider for CorrectedTable {
    fn schema(&self) -> SchemaRef {
        match self.which {
            Corrected::Class => class_schema(&self.inner.schema()),
            Corrected::Attribute | Corrected::Namespace => {
                acls_as_lists(&self.inner.schema(), self.which)
            }
            Corrected::AttrDef => self.inner.schema(),
        }
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batches = match self.which {
            Corrected::Class => self.correct_class(state).await?,
            Corrected::Attribute => self.correct_attribute(state).await?,
            Corrected::AttrDef => self.correct_attrdef(state).await?,
            Corrected::Namespace => read_all(&self.inner, state).await?,
        };
        let schema = self.schema();
        let batches = batches
            .into_iter()
            .map(|batch| {
                let columns = schema
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(field, column)| match field.data_type() == column.data_type() {
                        true => column.clone(),
                        false => arrow::array::new_null_array(field.data_type(), batch.num_rows()),
                    })
                    .collect();
                RecordBatch::try_new(schema.clone(), columns)
            })
            .collect::<Result<Vec<_>, _>>()?;
        MemTable::try_new(self.schema(), vec![batches])?
            .scan(state, projection, filters, limit)
            .await
    }
}

/// The query of a materialized view's definition, as `pg_get_viewdef` returns it.
fn view_query(definition: &str) -> String {
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    match Parser::parse_sql(&PostgreSqlDialect {}, definition).as_deref() {
        Ok([Statement::CreateView(view)]) => format!("{};", view.query),
        _ => definition.to_owned(),
    }
}

/// `format_type(oid, typmod)` of `datafusion-pg-catalog`, except that a numeric of scale 0 is
/// `numeric(p,0)`, as Postgres prints it (it printed `numeric(p)`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FormatType {
    inner: ScalarUDF,
}

impl Default for FormatType {
    fn default() -> Self {
        Self { inner: datafusion_pg_catalog::pg_catalog::format_type::create_format_type_udf() }
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for FormatType {
    fn name(&self) -> &str {
        "format_type"
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        self.inner.signature()
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let cast = |v: &ColumnarValue| -> DfResult<Int64Array> {
            let array = arrow::compute::cast(&v.to_array(rows)?, &ArrowType::Int64)?;
            Ok(array.as_primitive::<arrow::datatypes::Int64Type>().clone())
        };
        let (oids, mods) = (cast(&args.args[0])?, cast(&args.args[1])?);
        let formatted = self.inner.invoke_with_args(args)?.to_array(rows)?;
        let formatted = formatted.as_string::<i32>();
        let out: StringArray = (0..rows)
            .map(|i| {
                let modifier = if mods.is_valid(i) { mods.value(i) } else { -1 };
                match (oids.is_valid(i) && oids.value(i) == 1700, modifier) {
                    (true, m) if m >= 4 && (m - 4) & 0xffff == 0 => {
                        Some(format!("numeric({},0)", ((m - 4) >> 16) & 0xffff))
                    }
                    _ => formatted.is_valid(i).then(|| formatted.value(i).to_owned()),
                }
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The catalog functions of the module docs, reading sizes from `store`.
pub fn catalog_udfs(
    oids: Arc<RelationOids>,
    catalog: Arc<Catalog>,
    store: Arc<Store>,
) -> Vec<ScalarUDF> {
    let viewdef = {
        let oids = oids.clone();
        let signature = datafusion::logical_expr::Signature::one_of(
            vec![
                datafusion::logical_expr::TypeSignature::Exact(vec![ArrowType::Int64]),
                datafusion::logical_expr::TypeSignature::Exact(vec![
                    ArrowType::Int64,
                    ArrowType::Boolean,
                ]),
            ],
            Volatility::Stable,
        );
        let fun: datafusion::logical_expr::ScalarFunctionImplementation =
            Arc::new(move |args: &[ColumnarValue]| {
                let array = args[0].to_array(1)?;
                let out: StringArray = array
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|oid| {
                        let oid = i32::try_from(oid?).ok()?;
                        let id = *oids.0.read().get(&oid)?;
                        let table = catalog.table_by_id(id)?;
                        (table.kind == RelationKind::MaterializedView)
                            .then(|| view_query(&table.definition))
                    })
                    .collect();
                shaped_like(&args[0], Arc::new(out))
            });
        ScalarUDF::from(datafusion::logical_expr::SimpleScalarUDF::new_with_signature(
            "pg_get_viewdef",
            signature,
            ArrowType::Utf8,
            fun,
        ))
    };
    let size = |name: &str| {
        let (oids, store) = (oids.clone(), store.clone());
        create_udf(
            name,
            vec![ArrowType::Int64],
            ArrowType::Int64,
            Volatility::Volatile,
            Arc::new(move |args| {
                let sizes = |oid: Option<i64>| {
                    let oid = i32::try_from(oid?).ok()?;
                    let table = *oids.0.read().get(&oid)?;
                    Some(store.approximate_table_size(table) as i64)
                };
                map_int64(&args[0], sizes)
            }),
        )
    };
    let visible = |name: &str| {
        create_udf(
            name,
            vec![ArrowType::Int64],
            ArrowType::Boolean,
            Volatility::Stable,
            Arc::new(|args| {
                Ok(match &args[0] {
                    ColumnarValue::Array(a) => ColumnarValue::Array(Arc::new(
                        (0..a.len())
                            .map(|i| a.is_valid(i).then_some(true))
                            .collect::<arrow::array::BooleanArray>(),
                    )),
                    ColumnarValue::Scalar(s) => ColumnarValue::Scalar(
                        datafusion::scalar::ScalarValue::Boolean((!s.is_null()).then_some(true)),
                    ),
                })
            }),
        )
    };
    let no_indexes = create_udf(
        "pg_indexes_size",
        vec![ArrowType::Int64],
        ArrowType::Int64,
        Volatility::Stable,
        Arc::new(|args| map_int64(&args[0], |oid| oid.map(|_| 0))),
    );
    let pretty = create_udf(
        "pg_size_pretty",
        vec![ArrowType::Int64],
        ArrowType::Utf8,
        Volatility::Immutable,
        Arc::new(|args| {
            let array = args[0].to_array(1)?;
            let sizes = array.as_primitive::<arrow::datatypes::Int64Type>();
            let out: StringArray = sizes.iter().map(|s| s.map(size_pretty)).collect();
            shaped_like(&args[0], Arc::new(out))
        }),
    );
    // Sluice has no COMMENT ON and no user-defined functions: there is no description, and no
    // function these could describe.
    let none = |name: &str, args: Vec<ArrowType>| {
        create_udf(
            name,
            args,
            ArrowType::Utf8,
            Volatility::Stable,
            Arc::new(|_| Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::Utf8(None)))),
        )
    };
    let database_size = {
        let store = store.clone();
        create_udf(
            "pg_database_size",
            vec![ArrowType::Utf8],
            ArrowType::Int64,
            Volatility::Volatile,
            Arc::new(move |_| {
                let size = store.state_property("rocksdb.total-sst-files-size").unwrap_or(0);
                Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::Int64(Some(size as i64))))
            }),
        )
    };
    let get_expr = {
        let mut signatures = Vec::new();
        for oid in [ArrowType::Int32, ArrowType::UInt32, ArrowType::Int64, ArrowType::UInt64] {
            use datafusion::logical_expr::TypeSignature::Exact;
            signatures.push(Exact(vec![ArrowType::Utf8, oid.clone()]));
            signatures.push(Exact(vec![ArrowType::Utf8, oid, ArrowType::Boolean]));
        }
        let signature = datafusion::logical_expr::Signature::one_of(signatures, Volatility::Stable);
        let fun: datafusion::logical_expr::ScalarFunctionImplementation =
            Arc::new(|args: &[ColumnarValue]| Ok(args[0].clone()));
        ScalarUDF::from(datafusion::logical_expr::SimpleScalarUDF::new_with_signature(
            "pg_get_expr",
            signature,
            ArrowType::Utf8,
            fun,
        ))
    };
    vec![
        ScalarUDF::from(FormatType::default()),
        get_expr,
        viewdef,
        database_size,
        none("obj_description", vec![ArrowType::Int64, ArrowType::Utf8]),
        none("col_description", vec![ArrowType::Int64, ArrowType::Int64]),
        none("shobj_description", vec![ArrowType::Int64, ArrowType::Utf8]),
        none("pg_get_function_result", vec![ArrowType::Int64]),
        none("pg_get_function_arguments", vec![ArrowType::Int64]),
        size("pg_table_size"),
        size("pg_relation_size"),
        size("pg_total_relation_size"),
        no_indexes,
        pretty,
        visible("pg_function_is_visible"),
        visible("pg_type_is_visible"),
        visible("pg_operator_is_visible"),
        visible("pg_conversion_is_visible"),
        visible("pg_collation_is_visible"),
        visible("pg_opclass_is_visible"),
        visible("pg_opfamily_is_visible"),
        visible("pg_statistics_obj_is_visible"),
        visible("pg_ts_config_is_visible"),
        visible("pg_ts_dict_is_visible"),
        visible("pg_ts_parser_is_visible"),
        visible("pg_ts_template_is_visible"),
    ]
}

/// Maps an int8 argument, array or scalar.
fn map_int64(
    arg: &ColumnarValue,
    f: impl Fn(Option<i64>) -> Option<i64>,
) -> DfResult<ColumnarValue> {
    let array = arg.to_array(1)?;
    let values = array.as_primitive::<arrow::datatypes::Int64Type>();
    let out: Int64Array = values.iter().map(&f).collect();
    shaped_like(arg, Arc::new(out))
}

/// A size in bytes as Postgres's `pg_size_pretty` prints it: bytes below 10 kB, then the
/// largest unit that keeps the number below 20480, rounded half away from zero.
pub fn size_pretty(size: i64) -> String {
    // (name, limit, rounds, bits of the unit)
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    let mut size = size;
    for (i, &(name, limit, round, bits)) in UNITS.iter().enumerate() {
        let last = i + 1 == UNITS.len();
        if last || size.abs() < limit {
            if round {
                size = (size + if size < 0 { -1 } else { 1 }) / 2;
            }
            return format!("{size} {name}");
        }
        let (_, _, next_round, next_bits) = UNITS[i + 1];
        let shift = next_bits - bits - u32::from(next_round) + u32::from(round);
        size /= 1i64 << shift;
    }
    unreachable!("the last unit always prints")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_postgres_prints_them() {
        // Expected values from PostgreSQL 15's pg_size_pretty.
        let cases = [
            (0, "0 bytes"),
            (8192, "8192 bytes"),
            (10239, "10239 bytes"),
            (10240, "10 kB"),
            (20971519, "20 MB"),
            (10485247, "10239 kB"),
            (20971520, "20 MB"),
            (1_000_000_000, "954 MB"),
            (-10240, "-10 kB"),
            (1 << 60, "1024 PB"),
        ];
        for (size, expected) in cases {
            assert_eq!(size_pretty(size), expected, "{size}");
        }
    }

    #[test]
    fn declared_types_map_to_postgres_oids_and_modifiers() {
        assert_eq!(pg_type(DataType::Decimal { precision: 10, scale: 2 }), (1700, 655366));
        assert_eq!(pg_type(DataType::Decimal { precision: 38, scale: 10 }), (1700, -1));
        assert_eq!(pg_type(DataType::Decimal { precision: 76, scale: 20 }), (1700, -1));
        assert_eq!(pg_type(DataType::Decimal { precision: 50, scale: 2 }), (1700, 3276806));
        assert_eq!(pg_type(DataType::Jsonb), (3802, -1));
    }
}
