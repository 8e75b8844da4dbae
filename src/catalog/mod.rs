//! The catalog: databases, schemas, tables and their columns, persisted in the store.
//!
//! Sluice has one database, `dev`, with one user schema, `public`. Each table is stored as a
//! JSON record under `catalog/table/<id>` in the store's meta column family, written before the
//! DDL statement returns and reloaded at start.

mod ids;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

pub use ids::{ActorId, Epoch, TableId, VirtualNode};

use crate::error::{Error, Result};
use crate::storage::store::Store;
use crate::types::DataType;

/// The only database.
pub const DEFAULT_DATABASE: &str = "dev";
/// The schema user relations live in.
pub const DEFAULT_SCHEMA: &str = "public";
/// The hidden key column of tables declared without a primary key.
pub const ROW_ID_COLUMN: &str = "_row_id";

const TABLE_PREFIX: &[u8] = b"catalog/table/";
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
}

/// A table: its columns and primary key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCatalog {
    /// Also the key prefix of its rows.
    pub id: TableId,
    /// Table name within [`DEFAULT_SCHEMA`].
    pub name: String,
    /// All columns, hidden ones included, in storage order.
    pub columns: Vec<ColumnCatalog>,
    /// Indices of the primary-key columns, in key order.
    pub pk: Vec<usize>,
    /// The statement that created it.
    pub definition: String,
}

impl TableCatalog {
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
        (0..self.columns.len())
            .filter(|&i| !self.columns[i].hidden)
            .collect()
    }

    /// The SQL types of all columns, in storage order.
    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| c.data_type).collect()
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
            .map(|(i, c)| Field::new(&c.name, c.data_type.to_arrow(), !self.pk.contains(&i)))
            .collect();
        Arc::new(Schema::new(fields))
    }
}

struct Inner {
    tables: BTreeMap<TableId, Arc<TableCatalog>>,
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
            tables.insert(table.id, Arc::new(table));
        }
        let next_id = match store.scan_meta(NEXT_ID_KEY)?.first() {
            Some((_, v)) => u32::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| Error::Storage("catalog id counter is corrupt".into()))?,
            ),
            None => 1,
        };
        Ok(Self {
            store,
            inner: RwLock::new(Inner { tables, next_id }),
        })
    }

    /// Reserves a fresh relation id, durably.
    pub fn next_table_id(&self) -> Result<TableId> {
        let mut inner = self.inner.write();
        let id = TableId(inner.next_id);
        inner.next_id += 1;
        self.store
            .put_meta(NEXT_ID_KEY, &inner.next_id.to_be_bytes())?;
        Ok(id)
    }

    /// Every table, in id order.
    pub fn tables(&self) -> Vec<Arc<TableCatalog>> {
        self.inner.read().tables.values().cloned().collect()
    }

    /// The table called `name`, if any.
    pub fn table_by_name(&self, name: &str) -> Option<Arc<TableCatalog>> {
        self.inner
            .read()
            .tables
            .values()
            .find(|t| t.name == name)
            .cloned()
    }

    /// Persists a new table. The caller has checked the name is free.
    pub fn create_table(&self, table: TableCatalog) -> Result<Arc<TableCatalog>> {
        let value = serde_json::to_vec(&table).expect("catalog entries serialize");
        self.store.put_meta(&table_key(table.id), &value)?;
        let table = Arc::new(table);
        self.inner.write().tables.insert(table.id, table.clone());
        Ok(table)
    }

    /// Removes a table's catalog entry, durably.
    pub fn drop_table(&self, id: TableId) -> Result<()> {
        self.store.delete_meta(&table_key(id))?;
        self.inner.write().tables.remove(&id);
        Ok(())
    }
}

fn table_key(id: TableId) -> Vec<u8> {
    let mut key = TABLE_PREFIX.to_vec();
    key.extend_from_slice(&id.0.to_be_bytes());
    key
}
