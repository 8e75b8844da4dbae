//! The catalog: databases, schemas, tables and their columns, persisted in the store.
//!
//! Sluice has one database, `dev`, with one user schema, `public`. Each table is stored as a
//! JSON record under `catalog/table/<id>` in the store's meta column family, written before the
//! DDL statement returns and reloaded at start.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

pub use crate::ids::{ActorId, Epoch, TableId, VirtualNode};

use crate::error::{Error, Result};
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::types::DataType;

/// The only database.
pub const DEFAULT_DATABASE: &str = "dev";
/// The schema user relations live in.
pub const DEFAULT_SCHEMA: &str = "public";
/// The hidden key column of tables declared without a primary key.
pub const ROW_ID_COLUMN: &str = "_row_id";

tokio::task_local! {
    /// While a view's query is planned again ([`with_seen_versions`]): the schema version of
    /// each relation it was created over (0 for those not listed).
    static SEEN_VERSIONS: Vec<(TableId, u32)>;
}

/// Runs `planning` with relations looked up by name as a view created over `seen` (see
/// [`TableCatalog::seen_versions`]) saw them: columns added since are hidden.
pub async fn with_seen_versions<F: std::future::Future>(
    seen: Vec<(TableId, u32)>,
    planning: F,
) -> F::Output {
    SEEN_VERSIONS.scope(seen, planning).await
}

const TABLE_PREFIX: &[u8] = b"catalog/table/";
const SOURCE_PREFIX: &[u8] = b"catalog/source/";
const NEXT_ID_KEY: &[u8] = b"catalog/next_id";

/// A column of a relation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnCatalog {
    /// Column name, lower-cased unless quoted.
    pub name: String,
    /// SQL type.
    pub data_type: DataType,
    /// Hidden columns (the generated row id) are not shown by `SELECT *`.
    pub hidden: bool,
    /// For a column declared `varchar` or `varchar(n)` (not `text`): its length limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub varchar: Option<crate::types::Varchar>,
    /// The column's `DEFAULT` expression, as SQL; `None` for NULL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// For a hidden column of a CDC table holding the display scale of each value of an
    /// unconstrained numeric column (`1.50`: 2): that column's index
    /// ([`crate::batch::display_scale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_of: Option<usize>,
    /// The schema version of its relation that added the column: 0 for the columns the
    /// relation was created with, then 1, 2, .. for columns a CDC table took from its upstream
    /// later. A view reads the columns up to the version it was created over.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub since: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ColumnCatalog {
    /// A visible column of `data_type`, without a `varchar` declaration or a default.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Self {
            name: name.into(),
            data_type,
            hidden: false,
            varchar: None,
            default: None,
            scale_of: None,
            since: 0,
        }
    }

    /// `field`, this column's, marked with what its Arrow type does not say: jsonb, or a
    /// `varchar` declaration. Query results and views of the column carry the marks.
    pub fn mark(&self, field: arrow::datatypes::Field) -> arrow::datatypes::Field {
        match (self.data_type, self.varchar) {
            (DataType::Jsonb, _) => crate::sql::jsonb::mark(field),
            (_, Some(varchar)) => crate::types::mark_varchar(field, varchar),
            _ => field,
        }
    }
}

/// What a relation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelationKind {
    /// A table written by DML.
    Table,
    /// A materialized view maintained by its streaming job.
    MaterializedView,
    /// State of an operator of a streaming job (backfill progress, aggregate groups, ...).
    Internal,
}

impl RelationKind {
    /// The word users know the kind by, as in error messages.
    pub fn noun(self) -> &'static str {
        match self {
            RelationKind::Table => "table",
            RelationKind::MaterializedView => "materialized view",
            RelationKind::Internal => "internal table",
        }
    }
}

/// A relation with stored rows: a table, a materialized view or an internal state table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCatalog {
    /// Also the key prefix of its rows.
    pub id: TableId,
    /// Name within [`DEFAULT_SCHEMA`].
    pub name: String,
    /// What the relation is.
    pub kind: RelationKind,
    /// All columns, hidden ones included, in storage order.
    pub columns: Vec<ColumnCatalog>,
    /// Indices of the primary-key columns, in key order.
    pub pk: Vec<usize>,
    /// How many leading primary-key columns choose a row's vnode (the distribution key).
    pub dist_key_len: usize,
    /// The statement that created it.
    pub definition: String,
    /// Relations a materialized view reads.
    pub dependencies: Vec<TableId>,
    /// The internal state tables of this relation's streaming job, in plan order.
    pub internal_tables: Vec<TableId>,
    /// For an internal table, the job (table or view) that owns it.
    pub owner: Option<TableId>,
    /// Snapshot rows per second a view's backfill may read; `None` for no limit.
    #[serde(default)]
    pub backfill_rate_limit: Option<u64>,
    /// Actors per fragment of a view's job (0 reads as 1).
    #[serde(default)]
    pub parallelism: usize,
    /// For a table fed by a CDC source: where its rows come from.
    #[serde(default)]
    pub cdc: Option<CdcTableInfo>,
    /// Set while the relation's streaming job is still backfilling.
    #[serde(default)]
    pub creating: Option<CreatingInfo>,
    /// For an internal table, what it holds.
    #[serde(default)]
    pub purpose: Option<StatePurpose>,
    /// For a view: planned with eager aggregation ([`crate::sql::eager`]), so every later
    /// plan of it (a restart, a rescale) is too.
    #[serde(default)]
    pub eager_aggregation: bool,
    /// For a view: the order its stream scans backfill in (`WITH (backfill_order = ..)`).
    #[serde(default)]
    pub backfill_order: BackfillOrder,
    /// For a view: the schema version (see [`ColumnCatalog::since`]) of each relation it reads,
    /// when it was created. Columns added later are not the view's: `SELECT *` in its query
    /// keeps meaning the columns it meant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen_versions: Vec<(TableId, u32)>,
    /// For a CDC table: columns widened in place when their upstream columns were
    /// (`integer` to `bigint`), as `(column, type before)` in the order they were widened.
    /// Rows written before a widening keep the type's layout until they are written again
    /// ([`RowDecoder::widened`](crate::storage::row_codec::RowDecoder::widened)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub widened: Vec<(usize, DataType)>,
}

/// The order in which a view's stream scans read their snapshots
/// (see [`crate::stream::graph::order`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackfillOrder {
    /// Derived from the plan: for each join, the side whose rows would otherwise be emitted
    /// and then retracted (the inner side of an outer, semi or anti join), or else the side
    /// with fewer rows, is read first.
    #[default]
    Auto,
    /// Every scan reads at once.
    None,
    /// `(before, after)` pairs of upstream relation names: every scan of `after` waits until
    /// every scan of `before` has read its snapshot.
    Fixed(Vec<(String, String)>),
}

/// What an internal state table holds; also the middle of its name
/// (`__internal_<job>_<fragment>_<purpose>_<id>`), as in RisingWave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatePurpose {
    /// A CDC source's committed offset.
    Source,
    /// A CDC table's snapshot progress.
    StreamCdcScan,
    /// A view's stream scan (arrangement backfill) progress, per vnode.
    StreamScan,
    /// A hash aggregation's groups and accumulators.
    HashAgg,
    /// A min/max aggregate's multiset of values per group.
    HashAggValues,
    /// A hash join's left side.
    HashJoinLeft,
    /// A hash join's right side.
    HashJoinRight,
    /// A top-N's rows, by group and order.
    TopN,
    /// A temporal filter's rows still to leave or to enter, by time.
    TemporalFilter,
    /// An over-window's rows, by partition and order, with the window values emitted.
    OverWindow,
    /// A dynamic filter's rows, by compared value.
    DynamicFilterLeft,
    /// A dynamic filter's threshold.
    DynamicFilterRight,
}

impl StatePurpose {
    /// Every purpose.
    pub const ALL: [StatePurpose; 12] = [
        StatePurpose::Source,
        StatePurpose::StreamCdcScan,
        StatePurpose::StreamScan,
        StatePurpose::HashAgg,
        StatePurpose::HashAggValues,
        StatePurpose::HashJoinLeft,
        StatePurpose::HashJoinRight,
        StatePurpose::TopN,
        StatePurpose::TemporalFilter,
        StatePurpose::OverWindow,
        StatePurpose::DynamicFilterLeft,
        StatePurpose::DynamicFilterRight,
    ];

    /// The name used in the table's name and in `rw_catalog.rw_internal_tables`.
    pub fn name(self) -> &'static str {
        match self {
            StatePurpose::Source => "source",
            StatePurpose::StreamCdcScan => "streamcdcscan",
            StatePurpose::StreamScan => "streamscan",
            StatePurpose::HashAgg => "hashagg",
            StatePurpose::HashAggValues => "hashaggvalues",
            StatePurpose::HashJoinLeft => "hashjoinleft",
            StatePurpose::HashJoinRight => "hashjoinright",
            StatePurpose::TopN => "topn",
            StatePurpose::TemporalFilter => "temporalfilter",
            StatePurpose::OverWindow => "overwindow",
            StatePurpose::DynamicFilterLeft => "dynamicfilterleft",
            StatePurpose::DynamicFilterRight => "dynamicfilterright",
        }
    }

    /// True for the progress tables of backfills (see `stream::executor::backfill::state`).
    pub fn is_backfill_progress(self) -> bool {
        matches!(self, StatePurpose::StreamScan | StatePurpose::StreamCdcScan)
    }

    /// The purpose of an internal table created before catalogs recorded it, from its name.
    fn of_legacy_name(name: &str) -> Option<Self> {
        let parts: Vec<&str> = name.strip_prefix("__internal_")?.split('_').collect();
        let middle = parts.get(2..parts.len().checked_sub(1)?)?.join("_");
        Self::ALL.into_iter().find(|p| p.name() == middle)
    }
}

/// A job still creating: how it was started and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatingInfo {
    /// Created with `background_ddl = true`: the statement returned at once.
    pub background: bool,
    /// When the statement started, in milliseconds since the Unix epoch.
    pub initialized_at_ms: i64,
}

/// Where a CDC table's rows come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CdcTableInfo {
    /// The source.
    pub source: TableId,
    /// Upstream schema.
    pub schema: String,
    /// Upstream table.
    pub table: String,
    /// For each column of the Sluice table, its index among the upstream's columns.
    pub upstream_columns: Vec<usize>,
    /// The upstream's column names, in upstream order.
    pub upstream_names: Vec<String>,
    /// The upstream's column types, as Postgres prints them.
    pub upstream_types: Vec<String>,
    /// The upstream's primary-key column indices.
    pub upstream_pk: Vec<usize>,
    /// Rows per snapshot page.
    pub batch_size: usize,
    /// Whether existing rows are read (`snapshot = 'true'`), or only changes from now on.
    pub snapshot: bool,
    /// Snapshot splits read at once (`backfill.parallelism`).
    #[serde(default = "one")]
    pub parallelism: usize,
    /// Rows per snapshot split (`backfill.num_rows_per_split`); `None`: as many splits as
    /// `parallelism`.
    #[serde(default)]
    pub rows_per_split: Option<u64>,
    /// The source was created for this table alone (`CREATE TABLE .. WITH (connector = ..)`)
    /// and is dropped with it.
    #[serde(default)]
    pub private_source: bool,
    /// What identifies the upstream table (a Postgres table's oid) when the table was created:
    /// one dropped and created again under the same name is another table, which the CDC
    /// table stops at rather than mix with its rows. `None` where the upstream has no such
    /// identity (MySQL) or for tables created before it was recorded.
    #[serde(default)]
    pub upstream_identity: Option<String>,
    /// Declared `(*)`: columns added upstream after the others are added to the table too
    /// (else the table keeps the columns it was declared with).
    #[serde(default)]
    pub follow_columns: bool,
    /// Where columns were added upstream and followed: `(position, n)` says that the source's
    /// descriptions of the table before `position` name its first `n` upstream columns (the
    /// later ones did not exist yet), so changes read again from before it are applied with
    /// NULL for them, until the snapshot read since overwrites the rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns_since: Vec<(u64, usize)>,
    /// Set when the snapshot is read again over the rows the table holds (`ALTER TABLE ..
    /// RESNAPSHOT`, columns added, a lost slot): each page overwrites the stored rows of its key
    /// range, deleting those it does not have, and the views downstream see only what differs.
    /// The position is one every page of that snapshot reads after: an upstream `TRUNCATE`
    /// before it, read again from the stream, empties the table and starts the snapshot over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resnapshot_from: Option<u64>,
    /// Upstream columns dropped upstream and followed: `(position, u)` says that the source's
    /// descriptions of the table from `position` on lack upstream column `u` (an index into
    /// [`Self::upstream_names`], which keeps it). Changes from there on hold NULL for it, and
    /// snapshot reads select NULL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<(u64, usize)>,
    /// Text columns retyped upstream to another text type and followed in place: `(position,
    /// u)` says descriptions up to `position` may still name upstream column `u`'s old type.
    /// The snapshot is read again from there (the upstream may have rewritten the values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retyped: Vec<(u64, usize)>,
    /// Upstream columns widened upstream (`integer` to `bigint`) that the table keeps in
    /// their narrower type because views read them (their plans have that type); a value that
    /// does not fit stops the table. Columns no view reads are widened in place instead
    /// ([`TableCatalog::widened`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<usize>,
    /// `schema.change = 'stop'`: the table stops at any change of its upstream's columns
    /// rather than follow it (`'follow'`, the default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_at_schema_change: bool,
}

impl CdcTableInfo {
    /// Whether upstream column `u` was dropped upstream (and followed).
    pub fn is_dropped(&self, u: usize) -> bool {
        self.dropped.iter().any(|&(_, d)| d == u)
    }

    /// The upstream columns the upstream table has now, as `(name, type)`, in its order.
    pub fn live_columns(&self) -> Vec<(&str, &str)> {
        let columns = self.upstream_names.iter().zip(&self.upstream_types).enumerate();
        columns
            .filter(|&(u, _)| !self.is_dropped(u))
            .map(|(_, (n, t))| (n.as_str(), t.as_str()))
            .collect()
    }
}

impl TableCatalog {
    /// The relation's rows in `store`, as a state table.
    pub fn state_table(&self, store: Arc<Store>) -> StateTable {
        StateTable::new(store, self.id, self.pk.clone(), self.dist_key_len)
            .with_widened(self.widened.clone())
    }

    /// The Arrow schema of every column, hidden ones included.
    pub fn full_schema(&self) -> SchemaRef {
        self.schema_of(|_| true)
    }

    /// The Arrow schema of the columns users see.
    pub fn visible_schema(&self) -> SchemaRef {
        self.schema_of(|c| !c.hidden)
    }

    /// Indices of the visible columns.
    pub fn visible_indices(&self) -> Vec<usize> {
        (0..self.columns.len()).filter(|&i| !self.columns[i].hidden).collect()
    }

    /// The schema version: the greatest [`ColumnCatalog::since`] of its columns.
    pub fn schema_version(&self) -> u32 {
        self.columns.iter().map(|c| c.since).max().unwrap_or(0)
    }

    /// The relation as a reader created at schema `version` sees it: columns added after it
    /// are hidden (they keep their storage positions).
    pub fn as_of(&self, version: u32) -> TableCatalog {
        let mut table = self.clone();
        for column in &mut table.columns {
            column.hidden |= column.since > version;
        }
        table
    }

    /// The SQL types of all columns, in storage order.
    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| c.data_type).collect()
    }

    /// The internal state table `id` of relation `owner`'s fragment `fragment`, for `purpose`:
    /// named `__internal_{owner}_{fragment}_{purpose}_{id}`, as every system table shows it.
    pub fn internal(
        id: TableId,
        owner: TableId,
        fragment: u32,
        purpose: StatePurpose,
        columns: Vec<ColumnCatalog>,
        pk: Vec<usize>,
        dist_key_len: usize,
    ) -> Self {
        let name = format!("__internal_{}_{fragment}_{}_{}", owner.0, purpose.name(), id.0);
        Self {
            kind: RelationKind::Internal,
            owner: Some(owner),
            purpose: Some(purpose),
            dist_key_len,
            ..Self::new_table(id, name, columns, pk, String::new())
        }
    }

    /// A plain table, as `CREATE TABLE` makes it: its key distributes its rows.
    pub fn new_table(
        id: TableId,
        name: String,
        columns: Vec<ColumnCatalog>,
        pk: Vec<usize>,
        definition: String,
    ) -> Self {
        let dist_key_len = pk.len();
        Self {
            id,
            name,
            kind: RelationKind::Table,
            columns,
            pk,
            dist_key_len,
            definition,
            dependencies: Vec::new(),
            internal_tables: Vec::new(),
            owner: None,
            backfill_rate_limit: None,
            parallelism: 1,
            cdc: None,
            creating: None,
            purpose: None,
            eager_aggregation: false,
            backfill_order: BackfillOrder::Auto,
            seen_versions: Vec::new(),
            widened: Vec::new(),
        }
    }

    /// True if the primary key is the generated row id.
    pub fn has_row_id(&self) -> bool {
        self.pk.len() == 1 && self.columns[self.pk[0]].hidden
    }

    fn schema_of(&self, keep: impl Fn(&ColumnCatalog) -> bool) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| keep(c))
            // Only a table's key is never NULL; a view's key may hold the NULLs of an outer join.
            .map(|(i, c)| {
                let not_null = self.kind == RelationKind::Table && self.pk.contains(&i);
                Field::new(&c.name, c.data_type.to_arrow(), !not_null)
            })
            .collect();
        Arc::new(Schema::new(fields))
    }
}

/// A source: a connection to an upstream system that tables ingest from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceCatalog {
    /// Drawn from the same id space as relations.
    pub id: TableId,
    /// Name within [`DEFAULT_SCHEMA`].
    pub name: String,
    /// The `WITH (..)` options, keys lower-cased.
    pub options: BTreeMap<String, String>,
    /// Upstream objects the source created and drops with it.
    pub created: Created,
    /// The internal table holding the source's committed upstream offset.
    pub state_table: TableId,
    /// The statement that created it (password masked).
    pub definition: String,
    /// Where the change stream starts until the source has recorded an offset of its own: a
    /// mysql-cdc source's binlog position (and MariaDB GTID position) at `CREATE SOURCE`, so
    /// changes made before its first checkpoint are never skipped. `None`: the upstream keeps
    /// the place (a Postgres slot).
    #[serde(default)]
    pub start: Option<(u64, Option<String>)>,
    /// Patterns of upstream tables that get a CDC table each, now and as they are created
    /// upstream (`CREATE TABLE FROM source TABLES '..'`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table_patterns: Vec<TablePattern>,
}

/// `CREATE TABLE FROM source TABLES 'schema.pattern' [WITH (..)]`: which upstream tables get a
/// CDC table each, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePattern {
    /// `schema.table`, each part with `*` (any characters) and `?` (one character).
    pub pattern: String,
    /// The tables' `WITH (..)` options.
    pub options: Vec<(String, String)>,
    /// Seconds between looks upstream for new matching tables.
    pub interval_secs: u64,
    /// Upstream tables (`schema.table`) whose CDC table was dropped: not created again.
    #[serde(default)]
    pub excluded: Vec<String>,
}

impl TablePattern {
    /// Whether upstream table `schema.table` matches.
    pub fn matches(&self, schema: &str, table: &str) -> bool {
        let (s, t) = self.pattern.split_once('.').unwrap_or(("*", &self.pattern));
        glob(s, schema) && glob(t, table)
    }
}

/// Whether `text` matches `pattern` (`*` any characters, `?` one).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Positions of `text` the pattern prefix can reach, one row at a time.
    let mut reach = vec![false; t.len() + 1];
    reach[0] = true;
    for c in p {
        let mut next = vec![false; t.len() + 1];
        for i in 0..=t.len() {
            if !reach[i] {
                continue;
            }
            match c {
                '*' => (i..=t.len()).for_each(|j| next[j] = true),
                '?' if i < t.len() => next[i + 1] = true,
                c if i < t.len() && t[i] == c => next[i + 1] = true,
                _ => {}
            }
        }
        reach = next;
    }
    reach[t.len()]
}

/// Which upstream objects a source created, and so drops with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The replication slot.
    pub slot: bool,
    /// The publication.
    pub publication: bool,
}

struct Inner {
    tables: BTreeMap<TableId, Arc<TableCatalog>>,
    sources: BTreeMap<TableId, Arc<SourceCatalog>>,
    next_id: u32,
}

/// The catalog, shared by every session.
pub struct Catalog {
    store: Arc<Store>,
    inner: RwLock<Inner>,
}

impl Catalog {
    /// Loads the catalog persisted in `store`.
    pub fn load(store: Arc<Store>) -> Result<Self> {
        let mut tables = BTreeMap::new();
        for (key, value) in store.scan_meta(TABLE_PREFIX)? {
            let table: TableCatalog = serde_json::from_slice(&value).map_err(|e| {
                Error::Storage(format!(
                    "catalog entry {:?} is corrupt: {e}",
                    String::from_utf8_lossy(&key)
                ))
            })?;
            let mut table = table;
            if table.kind == RelationKind::Internal && table.purpose.is_none() {
                // Data directories from before purposes were recorded.
                table.purpose = StatePurpose::of_legacy_name(&table.name);
            }
            tables.insert(table.id, Arc::new(table));
        }
        let mut sources = BTreeMap::new();
        for (key, value) in store.scan_meta(SOURCE_PREFIX)? {
            let source: SourceCatalog = serde_json::from_slice(&value).map_err(|e| {
                Error::Storage(format!(
                    "catalog entry {:?} is corrupt: {e}",
                    String::from_utf8_lossy(&key)
                ))
            })?;
            sources.insert(source.id, Arc::new(source));
        }
        let next_id = match store.scan_meta(NEXT_ID_KEY)?.first() {
            Some((_, v)) => u32::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| Error::Storage("catalog id counter is corrupt".into()))?,
            ),
            None => 1,
        };
        Ok(Self { store, inner: RwLock::new(Inner { tables, sources, next_id }) })
    }

    /// Reserves a fresh relation id, durably.
    pub fn next_table_id(&self) -> Result<TableId> {
        let mut inner = self.inner.write();
        let id = TableId(inner.next_id);
        inner.next_id += 1;
        self.store.put_meta(NEXT_ID_KEY, &inner.next_id.to_be_bytes())?;
        Ok(id)
    }

    /// Every table, in id order.
    pub fn tables(&self) -> Vec<Arc<TableCatalog>> {
        self.inner.read().tables.values().cloned().collect()
    }

    /// The relation called `name`, of any kind, if any.
    pub fn table_by_name(&self, name: &str) -> Option<Arc<TableCatalog>> {
        let table = self.inner.read().tables.values().find(|t| t.name == name).cloned()?;
        // Planning a view's query again: the relation as the view was created over it.
        let pinned =
            SEEN_VERSIONS.try_with(|seen| match seen.iter().find(|(id, _)| *id == table.id) {
                Some(&(_, version)) => version,
                None => 0,
            });
        match pinned {
            Ok(version) if version < table.schema_version() => Some(Arc::new(table.as_of(version))),
            _ => Some(table),
        }
    }

    /// The relation with id `id`, if any.
    pub fn table_by_id(&self, id: TableId) -> Option<Arc<TableCatalog>> {
        self.inner.read().tables.get(&id).cloned()
    }

    /// Relations whose streaming job reads `id`.
    pub fn dependents(&self, id: TableId) -> Vec<Arc<TableCatalog>> {
        let inner = self.inner.read();
        inner.tables.values().filter(|t| t.dependencies.contains(&id)).cloned().collect()
    }

    /// Persists a new table. The caller has checked the name is free.
    pub fn create_table(&self, table: TableCatalog) -> Result<Arc<TableCatalog>> {
        let mut inner = self.inner.write();
        let value = serde_json::to_vec(&table).expect("catalog entries serialize");
        self.store.put_meta(&table_key(table.id), &value)?;
        let table = Arc::new(table);
        inner.tables.insert(table.id, table.clone());
        Ok(table)
    }

    /// Changes a relation's entry durably; `None` if it no longer exists.
    pub fn update_table(
        &self,
        id: TableId,
        change: impl FnOnce(&mut TableCatalog),
    ) -> Result<Option<Arc<TableCatalog>>> {
        let mut inner = self.inner.write();
        let Some(current) = inner.tables.get(&id) else { return Ok(None) };
        let mut table = TableCatalog::clone(current);
        change(&mut table);
        let value = serde_json::to_vec(&table).expect("catalog entries serialize");
        self.store.put_meta(&table_key(id), &value)?;
        let table = Arc::new(table);
        inner.tables.insert(id, table.clone());
        Ok(Some(table))
    }

    /// Every source, in id order.
    pub fn sources(&self) -> Vec<Arc<SourceCatalog>> {
        self.inner.read().sources.values().cloned().collect()
    }

    /// The source called `name`, if any.
    pub fn source_by_name(&self, name: &str) -> Option<Arc<SourceCatalog>> {
        self.inner.read().sources.values().find(|s| s.name == name).cloned()
    }

    /// Persists a new source. The caller has checked the name is free.
    pub fn create_source(&self, source: SourceCatalog) -> Result<Arc<SourceCatalog>> {
        let value = serde_json::to_vec(&source).expect("catalog entries serialize");
        self.store.put_meta(&entry_key(SOURCE_PREFIX, source.id), &value)?;
        let source = Arc::new(source);
        self.inner.write().sources.insert(source.id, source.clone());
        Ok(source)
    }

    /// Changes source `id`'s entry by `change`, durably.
    pub fn update_source(
        &self,
        id: TableId,
        change: impl FnOnce(&mut SourceCatalog),
    ) -> Result<Arc<SourceCatalog>> {
        let mut inner = self.inner.write();
        let mut source = inner
            .sources
            .get(&id)
            .map(|s| (**s).clone())
            .ok_or_else(|| Error::Storage(format!("source {id} is missing")))?;
        change(&mut source);
        let value = serde_json::to_vec(&source).expect("catalog entries serialize");
        self.store.put_meta(&entry_key(SOURCE_PREFIX, id), &value)?;
        let source = Arc::new(source);
        inner.sources.insert(id, source.clone());
        Ok(source)
    }

    /// Removes a source's catalog entry, durably.
    pub fn drop_source(&self, id: TableId) -> Result<()> {
        self.store.delete_meta(&entry_key(SOURCE_PREFIX, id))?;
        self.inner.write().sources.remove(&id);
        Ok(())
    }

    /// True if a relation or a source is called `name`.
    pub fn name_taken(&self, name: &str) -> bool {
        self.table_by_name(name).is_some() || self.source_by_name(name).is_some()
    }

    /// Removes a table's catalog entry, durably.
    pub fn drop_table(&self, id: TableId) -> Result<()> {
        let mut inner = self.inner.write();
        self.store.delete_meta(&table_key(id))?;
        inner.tables.remove(&id);
        Ok(())
    }
}

fn table_key(id: TableId) -> Vec<u8> {
    entry_key(TABLE_PREFIX, id)
}

fn entry_key(prefix: &[u8], id: TableId) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(&id.0.to_be_bytes());
    key
}

/// The default of a count that is at least one.
fn one() -> usize {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_patterns_match_by_schema_and_name() {
        let pattern = |p: &str| TablePattern {
            pattern: p.into(),
            options: Vec::new(),
            interval_secs: 10,
            excluded: Vec::new(),
        };
        let orders = pattern("public.orders_*");
        assert!(orders.matches("public", "orders_2024"));
        assert!(orders.matches("public", "orders_"));
        assert!(!orders.matches("public", "orders"));
        assert!(!orders.matches("other", "orders_1"));
        assert!(!orders.matches("public", "old_orders_1"));
        assert!(pattern("*.t?").matches("shop", "t1"));
        assert!(!pattern("*.t?").matches("shop", "t12"));
        assert!(pattern("shop.*").matches("shop", "anything"));
        assert!(pattern("s*p.*_log").matches("shop", "a_log"));
        assert!(!pattern("s*p.*_log").matches("shop", "a_logs"));
    }

    #[test]
    fn internal_tables_of_old_catalogs_get_their_purpose_from_their_name() {
        for purpose in StatePurpose::ALL {
            let name = format!("__internal_7_1_{}_9", purpose.name());
            assert_eq!(StatePurpose::of_legacy_name(&name), Some(purpose));
        }
        assert_eq!(StatePurpose::of_legacy_name("__internal_7_1_mystery_9"), None);
        assert_eq!(StatePurpose::of_legacy_name("odd"), None);
    }
}
