//! The one interface every CDC upstream implements, so the engine, the CDC backfill and the
//! progress views are written once for Postgres and MySQL / MariaDB.
//!
//! - [`SourceConfig`]: a source's settings by connector; validates the upstream and creates
//!   what it needs there (Postgres: a publication and a replication slot), names its tables;
//! - [`UpstreamSession`]: a connection for snapshot reads: describe a table (columns, key,
//!   types), read a page by primary key with the page's low offset, read one row, estimate a
//!   table's rows, report the current position.
//!
//! Offsets are [`CdcOffset`]s (an LSN, or a binlog file and position), which order like the
//! upstream's log; changes carry [`CdcOffset::position`], one number with the same order.
//! Changes and MySQL pages carry values as text in the forms Postgres prints, so one cast reads
//! both upstreams; Postgres snapshot pages arrive in binary, decoded into each column's own
//! Arrow type, and are cast from there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef};

use crate::catalog::Created;
use crate::connector::common::SplitRange;
use crate::connector::common::{SnapshotPage, TypeId, UpstreamTable};
use crate::connector::mysql::binlog;
use crate::connector::mysql::{self, MySqlSourceConfig};
use crate::connector::offset::CdcOffset;
use crate::connector::postgres::PgSourceConfig;
use crate::connector::postgres::{publication, snapshot};
use crate::error::{Error, Result};

/// The connectors a source may name.
pub const CONNECTORS: [&str; 2] = ["postgres-cdc", "mysql-cdc"];

/// A CDC source's settings.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceConfig {
    /// `connector = 'postgres-cdc'`.
    Postgres(PgSourceConfig),
    /// `connector = 'mysql-cdc'` (MySQL or MariaDB).
    MySql(MySqlSourceConfig),
}

impl SourceConfig {
    /// Reads and checks the `WITH (..)` options of `CREATE SOURCE source`.
    pub fn from_options(source: &str, options: &BTreeMap<String, String>) -> Result<Self> {
        match options.get("connector").map(String::as_str) {
            Some("postgres-cdc") => {
                Ok(Self::Postgres(PgSourceConfig::from_options(source, options)?))
            }
            Some("mysql-cdc") => Ok(Self::MySql(MySqlSourceConfig::from_options(source, options)?)),
            Some(other) => Err(Error::Unsupported(format!(
                "connector '{other}'; the supported connectors are {}",
                CONNECTORS.map(|c| format!("'{c}'")).join(" and ")
            ))),
            None => Err(Error::InvalidStatement(
                "a source needs connector = 'postgres-cdc' or 'mysql-cdc'".into(),
            )),
        }
    }

    /// The connector's name.
    pub fn connector(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres-cdc",
            Self::MySql(_) => "mysql-cdc",
        }
    }

    /// The Postgres settings, for what only Postgres has (slots, publications).
    pub fn postgres(&self) -> Option<&PgSourceConfig> {
        match self {
            Self::Postgres(config) => Some(config),
            Self::MySql(_) => None,
        }
    }

    /// A connection for snapshot reads.
    pub async fn session(&self) -> Result<UpstreamSession> {
        Ok(match self {
            Self::Postgres(config) => UpstreamSession::Postgres(config.connect().await?),
            Self::MySql(config) => UpstreamSession::MySql(config.connect().await?),
        })
    }

    /// Checks the upstream can serve the source and creates what it needs there; returns what
    /// was created (and so belongs to the source).
    pub async fn prepare(&self) -> Result<Created> {
        match self {
            Self::Postgres(config) => config.prepare(&config.connect().await?).await,
            Self::MySql(config) => {
                config.validate(&mut config.connect().await?).await?;
                Ok(Created::default())
            }
        }
    }

    /// Where a new source's change stream starts, for the catalog (see
    /// [`SourceCatalog::start`](crate::catalog::SourceCatalog::start)): a MySQL binlog's end
    /// now; `None` for Postgres, whose slot keeps the place.
    pub async fn start_position(&self) -> Result<Option<(u64, Option<String>)>> {
        match self {
            Self::Postgres(_) => Ok(None),
            Self::MySql(config) => Ok(Some(binlog::current_position(config).await?)),
        }
    }

    /// The upstream's current position (WAL or binlog): every transaction committed so far
    /// ends at or before it.
    pub async fn current_position(&self) -> Result<u64> {
        match self {
            Self::Postgres(config) => snapshot::current_lsn(&config.connect().await?).await,
            Self::MySql(config) => Ok(binlog::current_position(config).await?.0),
        }
    }

    /// Drops what [`SourceConfig::prepare`] created.
    pub async fn cleanup(&self, created: Created) -> Result<()> {
        match self {
            Self::Postgres(config) => config.cleanup(&config.connect().await?, created).await,
            Self::MySql(_) => Ok(()),
        }
    }

    /// Splits the upstream table name of `CREATE TABLE .. FROM source TABLE 'name'`; a MySQL
    /// name without its database is in the source's `database.name`.
    pub fn split_qualified(&self, name: &str) -> Result<(String, String)> {
        match self {
            Self::Postgres(_) => snapshot::split_qualified(name),
            Self::MySql(config) => {
                let (database, table) = match name.contains('.') {
                    true => mysql::split_qualified(name)?,
                    false => (config.database.clone(), name.to_owned()),
                };
                if database != config.database {
                    return Err(Error::InvalidStatement(format!(
                        "the source reads the binlog of database.name = '{}', and {database}.{table} \
                         is in another database: create a source with database.name = '{database}'",
                        config.database
                    )));
                }
                Ok((database, table))
            }
        }
    }

    /// The offset at `position` (see [`CdcOffset::position`]) of this kind of upstream.
    pub fn offset_at(&self, position: u64) -> CdcOffset {
        match self {
            Self::Postgres(_) => CdcOffset::Postgres { lsn: position },
            Self::MySql(_) => CdcOffset::MySql { file_seq: 0, pos: 0 }.at(position),
        }
    }

    /// Bytes of upstream log the source has not confirmed yet (Postgres: its slot's) or not
    /// read past `position`, the source's recorded position (MySQL: the binlog after it);
    /// `None` when the upstream does not answer within `timeout`, or cannot tell.
    pub async fn lag_bytes(&self, timeout: Duration, position: u64) -> Option<i64> {
        match self {
            Self::Postgres(config) => config.slot_lag(timeout).await,
            Self::MySql(config) => {
                let at = self.offset_at(position);
                tokio::time::timeout(timeout, mysql::binlog_lag(config, at)).await.ok()?
            }
        }
    }

    /// Makes the source's change stream carry `table`'s changes, read through `session` (a
    /// session of this source): a Postgres publication gets the table when the source created
    /// it (`owns_publication`), and one it did not create must already publish it; a MySQL
    /// binlog carries every table.
    pub async fn add_table(
        &self,
        session: &UpstreamSession,
        owns_publication: bool,
        table: &UpstreamTable,
    ) -> Result<()> {
        match (self, session) {
            (Self::Postgres(config), UpstreamSession::Postgres(client)) => {
                publication::publish_table(client, &config.publication, owns_publication, table)
                    .await
            }
            _ => Ok(()),
        }
    }

    /// Stops the source's change stream from carrying `schema.table`, where the source chose
    /// what it carries (a Postgres publication it created); nothing for a MySQL binlog.
    pub async fn remove_table(&self, schema: &str, table: &str) -> Result<()> {
        match self {
            Self::Postgres(config) => {
                let client = config.connect().await?;
                publication::unpublish_table(&client, &config.publication, schema, table).await
            }
            Self::MySql(_) => Ok(()),
        }
    }

    /// The upstream's port.
    pub fn port(&self) -> u16 {
        match self {
            Self::Postgres(config) => config.port,
            Self::MySql(config) => config.port,
        }
    }

    /// Where the source reads, `host:port/database`.
    pub fn upstream(&self) -> String {
        let (host, port, database) = match self {
            Self::Postgres(c) => (&c.hostname, c.port, &c.database),
            Self::MySql(c) => (&c.hostname, c.port, &c.database),
        };
        format!("{host}:{port}/{database}")
    }

    /// What the source reads the change stream as: its replication slot (Postgres), its
    /// replica's `server_id N` (MySQL).
    pub fn reader(&self) -> String {
        match self {
            Self::Postgres(config) => config.slot.clone(),
            Self::MySql(config) => format!("server_id {}", config.server_id),
        }
    }

    /// `key = value` pairs describing where the source reads, for EXPLAIN.
    pub fn describe(&self) -> String {
        match self {
            Self::Postgres(config) => {
                format!("slot: {}, publication: {}", config.slot, config.publication)
            }
            Self::MySql(config) => format!("server_id: {}", config.server_id),
        }
    }
}

/// A connection to the upstream for snapshot reads.
pub enum UpstreamSession {
    /// A Postgres session.
    Postgres(tokio_postgres::Client),
    /// A MySQL / MariaDB session.
    MySql(mysql_async::Conn),
}

impl UpstreamSession {
    /// The columns, types and primary key of `schema.table` (a MySQL database is its schema).
    pub async fn describe_table(&mut self, schema: &str, table: &str) -> Result<UpstreamTable> {
        match self {
            Self::Postgres(client) => snapshot::describe_table(client, schema, table).await,
            Self::MySql(conn) => mysql::describe_table(conn, schema, table).await,
        }
    }

    /// The upstream's name of the type `id` (oid and modifier) as a column shows it, `None`
    /// where the upstream does not name types by id (MySQL). The name does not depend on which
    /// transactions the session sees, unlike a table's description.
    pub async fn type_name(&mut self, id: TypeId) -> Result<Option<String>> {
        match self {
            Self::Postgres(client) => {
                let row = client
                    .query_one("SELECT format_type($1::oid, $2::int4)", &[&id.0, &id.1])
                    .await
                    .map_err(crate::connector::postgres::upstream_error)?;
                Ok(row.get(0))
            }
            Self::MySql(_) => Ok(None),
        }
    }

    /// Up to `limit` rows after `cursor` (a key, as text) in key order, one array per upstream
    /// column (text, or the column's own Arrow type), and the page's low offset: every change committed at or below it is in
    /// the page's rows.
    pub async fn snapshot_page(
        &mut self,
        table: &UpstreamTable,
        cursor: Option<&[Option<String>]>,
        range: &SplitRange,
        limit: usize,
    ) -> Result<(SnapshotPage, CdcOffset)> {
        match self {
            Self::Postgres(client) => {
                // Pipelined on the one connection: requests run in the order they are first
                // polled, so the position is read before the page's snapshot is taken.
                let (low, page) = tokio::try_join!(
                    snapshot::current_lsn(client),
                    snapshot::snapshot_page(client, table, cursor, range, limit)
                )?;
                Ok((page, CdcOffset::Postgres { lsn: low }))
            }
            Self::MySql(conn) => {
                let (page, low) =
                    mysql::snapshot::snapshot_page(conn, table, cursor, range, limit).await?;
                let n = page.first().map_or(0, |c| c.len());
                let last_key = (n > 0).then(|| {
                    let key = table.pk.iter().map(|&i| &page[i]);
                    key.map(|c| c.is_valid(n - 1).then(|| c.value(n - 1).to_owned())).collect()
                });
                let columns = page.into_iter().map(|c| Arc::new(c) as ArrayRef).collect();
                Ok((SnapshotPage { columns, last_key }, low))
            }
        }
    }

    /// Values of the first key column that cut `table` into about `splits` parts of as many
    /// rows (none when the upstream cannot tell), in no particular order.
    pub async fn split_points(
        &mut self,
        table: &UpstreamTable,
        splits: usize,
    ) -> Result<Vec<String>> {
        match self {
            Self::Postgres(client) => {
                let estimate = snapshot::estimate_rows(client, &table.schema, &table.name).await?;
                snapshot::split_points(client, table, splits, estimate).await
            }
            Self::MySql(conn) => mysql::snapshot::split_points(conn, table, splits).await,
        }
    }

    /// The rows of `schema.table`, as the upstream estimates them (Postgres: `reltuples`;
    /// MySQL: `TABLE_ROWS`), or counted when it has no estimate; it scales progress bars.
    pub async fn estimate_rows(&mut self, schema: &str, table: &str) -> Result<u64> {
        match self {
            Self::Postgres(client) => snapshot::estimate_rows(client, schema, table).await,
            Self::MySql(conn) => mysql::snapshot::estimate_rows(conn, schema, table).await,
        }
    }

    /// The upstream's tables as `(schema, table)`: Postgres's ordinary and partitioned tables
    /// outside its system schemas; MySQL's base tables of `database`.
    pub async fn list_tables(&mut self, database: &str) -> Result<Vec<(String, String)>> {
        match self {
            Self::Postgres(client) => {
                let rows = client
                    .query(
                        "SELECT n.nspname::text, c.relname::text FROM pg_class c \
                         JOIN pg_namespace n ON c.relnamespace = n.oid \
                         WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition \
                         AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
                         AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1, 2",
                        &[],
                    )
                    .await
                    .map_err(crate::connector::postgres::upstream_error)?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            }
            Self::MySql(conn) => mysql::list_tables(conn, database).await,
        }
    }

    /// What identifies `schema.table` upstream now, `None` when there is no such table: a
    /// Postgres table's oid (a table dropped and created again has another); for MySQL only
    /// whether it exists.
    pub async fn table_identity(&mut self, schema: &str, table: &str) -> Result<Option<String>> {
        match self {
            Self::Postgres(client) => snapshot::table_identity(client, schema, table).await,
            Self::MySql(conn) => mysql::table_exists(conn, schema, table)
                .await
                .map(|exists| exists.then(|| "table".to_owned())),
        }
    }

    /// The current row with `key` (text of the key columns), as text in upstream column order.
    pub async fn fetch_row(
        &mut self,
        table: &UpstreamTable,
        key: &[Option<String>],
    ) -> Result<Option<Vec<Option<String>>>> {
        match self {
            Self::Postgres(client) => snapshot::fetch_row(client, table, key).await,
            Self::MySql(conn) => mysql::snapshot::fetch_row(conn, table, key).await,
        }
    }
}
