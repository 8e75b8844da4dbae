//! A MySQL / MariaDB CDC source: its options, connection, validation, table descriptions and
//! snapshot pages.
//!
//! The source reads the upstream's binlog as a replica (`server.id`), so the upstream must log
//! rows: `log_bin` on, `binlog_format = ROW`, `binlog_row_image = FULL` and
//! `binlog_row_metadata = FULL`. [`MySqlSourceConfig::
//! validate`] checks that and the user's privileges before a source is created, and says what
//! to change.
//!
//! Snapshot pages are read in primary-key order, each inside `START TRANSACTION WITH
//! CONSISTENT SNAPSHOT`: MariaDB reports the binlog position that snapshot corresponds to
//! (`binlog_snapshot_file` / `binlog_snapshot_position`), which is the page's exact low offset;
//! elsewhere the end of the binlog read just before the snapshot starts is.
//! Values travel as text in the forms Postgres prints (`\x..` for bytes, `+00` on timestamps
//! read in UTC), so the same casts read them as read a Postgres upstream's; string keys compare
//! and sort by their bytes, as Sluice's keys do.

/// Reading a MySQL / MariaDB binlog: committed transactions as row changes.
pub mod binlog;
/// What the binlog's statements (query events) say: truncates, reshaping DDL, row changes
/// logged as statements.
pub mod statements;

use std::collections::BTreeMap;
use std::time::Duration;

use arrow::array::{StringArray, StringBuilder};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row, Value};

use crate::catalog::ColumnCatalog;
use crate::connector::common::UpstreamTable;
use crate::connector::offset::CdcOffset;
use crate::connector::source::SourceOptions;
use crate::error::{Error, Result};
use crate::stream::executor::backfill::state::SplitRange;
use crate::types::DataType;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The options a mysql-cdc source takes.
const KNOWN: &[&str] = &[
    "connector",
    "hostname",
    "port",
    "username",
    "password",
    "database.name",
    "server.id",
    "ssl.mode",
];

/// `@@log_bin`, `@@binlog_format`, `@@binlog_row_image`, `@@server_id`.
type BinlogSettings = (Option<String>, Option<String>, Option<String>, Option<u64>);

/// A mysql-cdc source's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MySqlSourceConfig {
    /// Upstream host.
    pub hostname: String,
    /// Upstream port.
    pub port: u16,
    /// User to connect as.
    pub username: String,
    /// Its password (may be empty).
    pub password: String,
    /// The upstream database (MySQL's schema) tables are read from by default.
    pub database: String,
    /// The replica id Sluice reads the binlog as: unique among the upstream's replicas.
    pub server_id: u32,
}

impl MySqlSourceConfig {
    /// Reads and checks the `WITH (..)` options of `CREATE SOURCE source_name`.
    pub fn from_options(source_name: &str, options: &BTreeMap<String, String>) -> Result<Self> {
        let options = SourceOptions::new(options, "mysql-cdc", KNOWN)?;
        let get = |key: &str| options.get(key);
        let port = options.port(3306)?;
        match get("ssl.mode").as_deref() {
            None | Some("disabled") => {}
            Some(other) => {
                return Err(Error::Unsupported(format!(
                    "ssl.mode '{other}' for mysql-cdc; Sluice connects to MySQL without TLS, so \
                     only 'disabled' is accepted"
                )));
            }
        }
        let server_id = match get("server.id") {
            Some(id) => match id.parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(Error::InvalidStatement(format!(
                        "server.id must be a number from 1 to 4294967295, not '{id}'"
                    )));
                }
            },
            None => default_server_id(source_name),
        };
        Ok(Self {
            hostname: options.required("hostname")?,
            port,
            username: options.required("username")?,
            password: get("password").unwrap_or_default(),
            database: options.required("database.name")?,
            server_id,
        })
    }

    fn opts(&self, database: Option<&str>) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname(self.hostname.clone())
            .tcp_port(self.port)
            .user(Some(self.username.clone()))
            .pass(Some(self.password.clone()))
            .db_name(database.map(str::to_owned))
            .prefer_socket(false)
            // Timestamps print in UTC, and reads see committed rows only. On MariaDB (the `/*M!`
            // comment runs there only) a session of Sluice's left idle inside a transaction is
            // ended after 20 s: it holds metadata locks that would block the upstream's own
            // DDL (`TRUNCATE`, `ALTER TABLE`) for as long as it lives (found by the CDC matrix:
            // a snapshot session's transaction outlived its page, and a TRUNCATE waited).
            .init(vec![
                "SET time_zone = '+00:00'".to_owned(),
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ".to_owned(),
                "/*M!100300 SET SESSION idle_transaction_timeout = 20 */".to_owned(),
            ])
    }

    /// Connects to the upstream database; failures say what to fix.
    pub async fn connect(&self) -> Result<Conn> {
        self.connect_to(Some(&self.database)).await
    }

    /// Connects without choosing a database.
    pub async fn connect_to(&self, database: Option<&str>) -> Result<Conn> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(self.opts(database))).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(self.connect_error(e)),
            Err(_) => Err(self.unreachable(&"timed out")),
        }
    }

    fn connect_error(&self, e: mysql_async::Error) -> Error {
        match e {
            mysql_async::Error::Server(s) if s.code == 1045 => Error::Upstream {
                code: "28P01",
                message: format!(
                    "upstream rejected user \"{}\": {}; check username and password",
                    self.username, s.message
                ),
            },
            mysql_async::Error::Server(s) if s.code == 1049 => Error::Upstream {
                code: "3D000",
                message: format!(
                    "upstream database \"{}\" does not exist; check database.name",
                    self.database
                ),
            },
            mysql_async::Error::Server(s) => Error::Upstream {
                code: "08001",
                message: format!("upstream refused the connection: {}", s.message),
            },
            other => self.unreachable(&other),
        }
    }

    fn unreachable(&self, cause: &dyn std::fmt::Display) -> Error {
        Error::Upstream {
            code: "08001",
            message: format!(
                "cannot reach the upstream at {}:{} ({cause}); check hostname and port and that MySQL accepts TCP connections",
                self.hostname, self.port
            ),
        }
    }

    /// Checks the upstream can serve a source: a row-based binlog with full row images, a
    /// server id other than Sluice's, and the privileges to read the binlog and the tables.
    pub async fn validate(&self, conn: &mut Conn) -> Result<()> {
        let row: Option<BinlogSettings> = conn
            .query_first(
                "SELECT CAST(@@log_bin AS CHAR), @@binlog_format, @@binlog_row_image, @@server_id",
            )
            .await
            .map_err(upstream_error)?;
        let (log_bin, format, image, server_id) = row.unwrap_or_default();
        let setting = |what: &str, fix: &str| Error::Upstream {
            code: "55000",
            message: format!("the upstream {what}; {fix}"),
        };
        if !matches!(log_bin.as_deref(), Some("1" | "ON")) {
            return Err(setting(
                "does not write a binlog (log_bin is off)",
                "start it with --log-bin (and --binlog-format=ROW --binlog-row-image=FULL)",
            ));
        }
        if format.as_deref() != Some("ROW") {
            return Err(setting(
                &format!("binlog_format is {}", format.unwrap_or_default()),
                "set binlog_format = ROW (SET GLOBAL binlog_format = 'ROW', and in the server's configuration)",
            ));
        }
        if image.as_deref() != Some("FULL") {
            return Err(setting(
                &format!("binlog_row_image is {}", image.unwrap_or_default()),
                "set binlog_row_image = FULL",
            ));
        }
        let metadata: Option<Option<String>> =
            conn.query_first("SELECT @@binlog_row_metadata").await.map_err(upstream_error)?;
        let metadata = metadata.flatten().unwrap_or_default();
        if metadata != "FULL" {
            return Err(setting(
                &format!("binlog_row_metadata is {metadata}"),
                "set binlog_row_metadata = FULL (the binlog then carries each column's \
                 signedness, character set and ENUM / SET members)",
            ));
        }
        if server_id == Some(u64::from(self.server_id)) {
            return Err(Error::InvalidStatement(format!(
                "server.id {} is the upstream's own server_id; choose another",
                self.server_id
            )));
        }
        let grants: Vec<String> =
            conn.query("SHOW GRANTS FOR CURRENT_USER()").await.map_err(upstream_error)?;
        let missing = missing_privileges(&grants, &self.database);
        if !missing.is_empty() {
            return Err(Error::Upstream {
                code: "42501",
                message: format!(
                    "user \"{}\" lacks {} on the upstream; GRANT {} ON *.* TO '{}'",
                    self.username,
                    missing.join(", "),
                    missing.join(", "),
                    self.username
                ),
            });
        }
        Ok(())
    }
}

/// The privileges a source needs that `grants` (`SHOW GRANTS` lines) do not give.
fn missing_privileges(grants: &[String], database: &str) -> Vec<&'static str> {
    let global: Vec<String> =
        grants.iter().filter(|g| g.contains(" ON *.* ")).map(|g| g.to_ascii_uppercase()).collect();
    if global.iter().any(|g| g.contains("ALL PRIVILEGES")) {
        return Vec::new();
    }
    let has = |names: &[&str]| global.iter().any(|g| names.iter().any(|n| g.contains(n)));
    let mut missing = Vec::new();
    if !has(&["REPLICATION SLAVE", "REPLICATION REPLICA"]) {
        missing.push("REPLICATION SLAVE");
    }
    if !has(&["REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"]) {
        missing.push("REPLICATION CLIENT");
    }
    let on_database = format!(" ON `{database}`.* ");
    let select = has(&["SELECT"])
        || grants.iter().any(|g| {
            g.contains(&on_database)
                && (g.contains("SELECT") || g.to_ascii_uppercase().contains("ALL PRIVILEGES"))
        });
    if !select {
        missing.push("SELECT");
    }
    missing
}

/// The default replica id of a source: stable per source name, away from small ids people
/// give their servers.
fn default_server_id(source: &str) -> u32 {
    let hash =
        source.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    5400 + hash % 1_000_000
}

/// An upstream error, keeping what the user can act on.
pub fn upstream_error(e: mysql_async::Error) -> Error {
    match e {
        mysql_async::Error::Server(s) => {
            let code = match s.code {
                1146 => "42P01",
                1142 | 1143 | 1227 | 1044 => "42501",
                1236 => "55000",
                _ => "XX000",
            };
            Error::Upstream { code, message: format!("upstream: {}", s.message) }
        }
        other => Error::Upstream {
            code: "08006",
            message: format!("upstream connection failed: {other}"),
        },
    }
}

/// A MySQL identifier, quoted.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A string literal.
fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// Splits `database.table` (each part optionally back-quoted; names keep their case, as MySQL's
/// do on Linux) into its parts.
pub fn split_qualified(name: &str) -> Result<(String, String)> {
    crate::connector::source::split_two_parts(name, '`', false).ok_or_else(|| {
        Error::InvalidStatement(format!(
            "the upstream table must be database-qualified, like 'shop.{name}'; got '{name}'"
        ))
    })
}

/// Reads the columns and primary key of an upstream table.
pub async fn describe_table(conn: &mut Conn, database: &str, table: &str) -> Result<UpstreamTable> {
    let columns: Vec<(String, String, String, Option<String>)> = conn
        .exec(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        .await
        .map_err(upstream_error)?;
    if columns.is_empty() {
        return Err(Error::UnknownRelation {
            kind: "upstream table",
            name: format!("{database}.{table}"),
        });
    }
    let pk_names: Vec<String> = conn
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' \
             ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        .await
        .map_err(upstream_error)?;
    let mut out = UpstreamTable {
        schema: database.to_owned(),
        name: table.to_owned(),
        columns: Vec::new(),
        upstream_types: Vec::new(),
        pk: Vec::new(),
    };
    for (name, data_type, column_type, collation) in columns {
        let data_type = map_type(&data_type, &column_type);
        out.columns.push(ColumnCatalog::new(name, data_type));
        // The collation decides how a text key is paged (see `key_column`).
        out.upstream_types.push(match collation {
            Some(collation) if data_type == DataType::Varchar => {
                format!("{column_type} collate {collation}")
            }
            _ => column_type,
        });
    }
    out.set_key(&pk_names)?;
    Ok(out)
}

/// The Sluice type that holds values of a MySQL column (`data_type` as information_schema
/// names it, `column_type` its full type: `int(10) unsigned`, `decimal(10,2)`).
pub fn map_type(data_type: &str, column_type: &str) -> DataType {
    let unsigned = column_type.contains("unsigned");
    match (data_type, unsigned) {
        ("tinyint", _) | ("smallint", false) => DataType::Int16,
        ("smallint", true) | ("mediumint", _) | ("year", _) | ("int", false) => DataType::Int32,
        ("int", true) | ("bigint", false) => DataType::Int64,
        ("bigint", true) | ("bit", _) => DataType::Decimal { precision: 20, scale: 0 },
        ("float", _) => DataType::Float32,
        ("double" | "real", _) => DataType::Float64,
        ("decimal" | "numeric", _) => decimal(column_type),
        ("date", _) => DataType::Date,
        ("datetime", _) => DataType::Timestamp,
        ("timestamp", _) => DataType::Timestamptz,
        ("json", _) => DataType::Jsonb,
        ("binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob", _) => {
            DataType::Bytea
        }
        // Geometry: bytea holding MySQL's stored form, a 4-byte SRID then the WKB.
        (t, _) if GEOMETRY_TYPES.contains(&t) => DataType::Bytea,
        _ => DataType::Varchar,
    }
}

/// MySQL's spatial column types.
const GEOMETRY_TYPES: [&str; 8] = [
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
];

fn decimal(column_type: &str) -> DataType {
    let inner = column_type
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(inner, _)| inner);
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
    match (parts.next(), parts.next()) {
        // MySQL's decimals hold at most 65 digits, Sluice's 76.
        (Some(Ok(p)), Some(Ok(s))) if p <= crate::numeric::MAX_PRECISION => {
            DataType::Decimal { precision: p, scale: s as i8 }
        }
        (Some(Ok(p)), None) if p <= crate::numeric::MAX_PRECISION => {
            DataType::Decimal { precision: p, scale: 0 }
        }
        _ => DataType::Varchar,
    }
}

/// The select-list expression giving a column's value as the text Sluice's upstream cast reads.
fn column_text(table: &UpstreamTable, index: usize) -> String {
    let column = format!("t.{}", quote_ident(&table.columns[index].name));
    let ty = table.upstream_types[index].as_str();
    let base = ty.split(['(', ' ']).next().unwrap_or(ty);
    match base {
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            format!("CONCAT('\\\\x', LOWER(HEX({column})))")
        }
        t if GEOMETRY_TYPES.contains(&t) => format!("CONCAT('\\\\x', LOWER(HEX({column})))"),
        "timestamp" => format!("CONCAT({column}, '+00')"),
        "bit" => format!("CAST({column} AS UNSIGNED)"),
        // FLOAT prints 6 digits; the double it widens to exactly reads back as the same value.
        "float" => format!("CAST({column} AS DOUBLE)"),
        _ => column,
    }
}

/// The Sluice type of upstream column `index`, from its MySQL type (the description a table
/// is bound with; a running backfill knows the types only as text).
fn column_type(table: &UpstreamTable, index: usize) -> DataType {
    let ty = table.upstream_types[index].as_str();
    map_type(ty.split(['(', ' ']).next().unwrap_or(ty), ty)
}

/// Whether a text column's collation orders by bytes, as Sluice orders text keys (the
/// description records it: `varchar(10) collate utf8mb4_bin`).
fn byte_ordered(table: &UpstreamTable, index: usize) -> bool {
    let ty = &table.upstream_types[index];
    ["collate utf8mb4_bin", "collate utf8mb3_bin", "collate utf8_bin", "collate ascii_bin"]
        .iter()
        .any(|c| ty.ends_with(c))
}

/// A key column for comparisons and ordering: text compares by its bytes, as Sluice's keys do
/// (a case-insensitive collation would order `a` and `B` otherwise; such a key cannot use its
/// index for the order, so paging it costs a sort per page).
fn key_column(table: &UpstreamTable, index: usize) -> String {
    let column = format!("t.{}", quote_ident(&table.columns[index].name));
    match column_type(table, index) {
        DataType::Varchar if !byte_ordered(table, index) => format!("CAST({column} AS BINARY)"),
        _ => column,
    }
}

/// A key value (as text) for comparing against [`key_column`].
fn key_literal(table: &UpstreamTable, index: usize, value: &Option<String>) -> String {
    match value {
        None => "NULL".to_owned(),
        Some(v) => match column_type(table, index) {
            DataType::Varchar if !byte_ordered(table, index) => {
                format!("CAST({} AS BINARY)", quote_literal(v))
            }
            DataType::Bytea => format!("UNHEX({})", quote_literal(v.trim_start_matches("\\x"))),
            DataType::Timestamptz => quote_literal(v.trim_end_matches("+00")),
            _ => quote_literal(v),
        },
    }
}

/// `(keys) > (values)` as MariaDB's range optimizer takes it: `k1 > v1 OR (k1 = v1 AND k2 >
/// v2) OR ..` (it reads a row comparison by scanning the whole index, making paging
/// quadratic).
fn after_cursor(keys: &[String], values: &[String]) -> String {
    let terms: Vec<String> = (0..keys.len())
        .map(|k| {
            let mut parts: Vec<String> =
                (0..k).map(|j| format!("{} = {}", keys[j], values[j])).collect();
            parts.push(format!("{} > {}", keys[k], values[k]));
            format!("({})", parts.join(" AND "))
        })
        .collect();
    terms.join(" OR ")
}

/// One page of the snapshot, read in a consistent snapshot: rows after `cursor` (a key, as
/// text values) in key order, as one text column per upstream column, and the binlog position
/// the snapshot corresponds to.
pub async fn snapshot_page(
    conn: &mut Conn,
    table: &UpstreamTable,
    cursor: Option<&[Option<String>]>,
    range: &SplitRange,
    limit: usize,
) -> Result<(Vec<StringArray>, CdcOffset)> {
    let columns: Vec<String> = (0..table.columns.len()).map(|i| column_text(table, i)).collect();
    let key: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let mut sql = format!(
        "SELECT {} FROM {}.{} AS t",
        columns.join(", "),
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let mut conditions = Vec::new();
    if let Some(cursor) = cursor {
        let values: Vec<String> =
            table.pk.iter().zip(cursor).map(|(&i, v)| key_literal(table, i, v)).collect();
        conditions.push(format!("({})", after_cursor(&key, &values)));
    }
    let first = table.pk[0];
    if let Some(start) = &range.start {
        conditions.push(format!(
            "{} >= {}",
            key[0],
            key_literal(table, first, &Some(start.clone()))
        ));
    }
    if let Some(end) = &range.end {
        conditions.push(format!("{} < {}", key[0], key_literal(table, first, &Some(end.clone()))));
    }
    if !conditions.is_empty() {
        sql.push_str(&format!(" WHERE {}", conditions.join(" AND ")));
    }
    sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", key.join(", ")));
    // The end of the binlog before the snapshot starts is a safe low offset anywhere (a change
    // between it and the snapshot is applied twice, harmlessly); MariaDB then tells the
    // snapshot's exact position.
    let before = current_offset(conn).await?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT").await.map_err(upstream_error)?;
    let read = async {
        let offset = snapshot_offset(conn).await?.unwrap_or(before);
        let rows: Vec<Row> = conn.query(&sql).await.map_err(upstream_error)?;
        Ok::<_, Error>((offset, rows))
    }
    .await;
    // The transaction ends whatever happened: its locks must not outlive the page.
    let ended = conn.query_drop("COMMIT").await.map_err(upstream_error);
    let (offset, rows) = read?;
    ended?;
    let mut builders: Vec<StringBuilder> = table
        .columns
        .iter()
        .map(|_| StringBuilder::with_capacity(rows.len(), rows.len() * 16))
        .collect();
    for row in rows {
        for (builder, value) in builders.iter_mut().zip(row.unwrap()) {
            builder.append_option(value_text(value));
        }
    }
    Ok((builders.iter_mut().map(StringBuilder::finish).collect(), offset))
}

/// The current row with `key` (text of the key columns), as text in upstream column order.
pub async fn fetch_row(
    conn: &mut Conn,
    table: &UpstreamTable,
    key: &[Option<String>],
) -> Result<Option<Vec<Option<String>>>> {
    let columns: Vec<String> = (0..table.columns.len()).map(|i| column_text(table, i)).collect();
    let key_columns: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let values: Vec<String> =
        table.pk.iter().zip(key).map(|(&i, v)| key_literal(table, i, v)).collect();
    let sql = format!(
        "SELECT {} FROM {}.{} AS t WHERE ({}) = ({})",
        columns.join(", "),
        quote_ident(&table.schema),
        quote_ident(&table.name),
        key_columns.join(", "),
        values.join(", ")
    );
    let row: Option<Row> = conn.query_first(&sql).await.map_err(upstream_error)?;
    Ok(row.map(|row| row.unwrap().into_iter().map(value_text).collect()))
}

/// A text-protocol value as text.
fn value_text(value: Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
        other => Some(other.as_sql(true).trim_matches('\'').to_owned()),
    }
}

/// The binlog position of the consistent snapshot the session's transaction reads, where the
/// server tells it (MariaDB).
async fn snapshot_offset(conn: &mut Conn) -> Result<Option<CdcOffset>> {
    let status: Vec<(String, String)> =
        conn.query("SHOW STATUS LIKE 'binlog_snapshot_%'").await.map_err(upstream_error)?;
    let get = |name: &str| status.iter().find(|(n, _)| n.eq_ignore_ascii_case(name));
    match (get("binlog_snapshot_file"), get("binlog_snapshot_position")) {
        (Some((_, file)), Some((_, pos))) if !file.is_empty() => {
            Ok(Some(CdcOffset::mysql(file, pos.parse().unwrap_or_default())?))
        }
        _ => Ok(None),
    }
}

/// Bytes of binlog after `at`: the rest of its file and every later file; `None` when the
/// upstream cannot be asked or no longer has that file.
pub async fn binlog_lag(config: &MySqlSourceConfig, at: CdcOffset) -> Option<i64> {
    let CdcOffset::MySql { file_seq, pos } = at else { return None };
    let mut conn = config.connect_to(None).await.ok()?;
    let logs: Vec<Row> = conn.query("SHOW BINARY LOGS").await.ok()?;
    let mut lag = 0i64;
    let mut found = false;
    for row in logs {
        let name: String = row.get(0)?;
        let size: i64 = row.get(1)?;
        let CdcOffset::MySql { file_seq: seq, .. } = CdcOffset::mysql(&name, 0).ok()? else {
            return None;
        };
        if seq == file_seq {
            found = true;
            lag += (size - i64::from(pos)).max(0);
        } else if seq > file_seq {
            lag += size;
        }
    }
    found.then_some(lag)
}

/// The end of the upstream's binlog.
pub async fn current_offset(conn: &mut Conn) -> Result<CdcOffset> {
    let (file, pos) = master_status(conn).await?;
    CdcOffset::mysql(&file, pos)
}

/// Whether `database.table` exists.
pub async fn table_exists(conn: &mut Conn, database: &str, table: &str) -> Result<bool> {
    let found: Option<u8> = conn
        .exec_first(
            "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (database, table),
        )
        .await
        .map_err(upstream_error)?;
    Ok(found.is_some())
}

/// The upstream's current binlog file (`binlog.000003`) and the position of its end.
pub async fn master_status(conn: &mut Conn) -> Result<(String, u64)> {
    let row: Option<Row> = conn.query_first("SHOW MASTER STATUS").await.map_err(upstream_error)?;
    let row = row.ok_or_else(|| Error::Upstream {
        code: "55000",
        message: "the upstream does not write a binlog; start it with --log-bin".to_owned(),
    })?;
    Ok((row.get(0).unwrap_or_default(), row.get(1).unwrap_or_default()))
}

/// Up to `splits - 1` values of the first key column cutting the table into `splits` ranges:
/// evenly between its lowest and highest value for an integer column (the index answers both
/// at once); none for other types, which are read as one split.
pub async fn split_points(
    conn: &mut Conn,
    table: &UpstreamTable,
    splits: usize,
) -> Result<Vec<String>> {
    let first = table.pk[0];
    if !matches!(column_type(table, first), DataType::Int16 | DataType::Int32 | DataType::Int64) {
        return Ok(Vec::new());
    }
    let column = quote_ident(&table.columns[first].name);
    let sql = format!(
        "SELECT CAST(MIN({column}) AS CHAR), CAST(MAX({column}) AS CHAR) FROM {}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let bounds: Option<(Option<String>, Option<String>)> =
        conn.query_first(sql).await.map_err(upstream_error)?;
    let Some((Some(low), Some(high))) = bounds else { return Ok(Vec::new()) };
    let (Ok(low), Ok(high)) = (low.parse::<i128>(), high.parse::<i128>()) else {
        return Ok(Vec::new());
    };
    Ok(even_points(low, high, splits))
}

/// The values cutting `low..=high` into `splits` ranges of about equal width, without repeats.
pub fn even_points(low: i128, high: i128, splits: usize) -> Vec<String> {
    let width = high - low + 1;
    let mut points: Vec<i128> =
        (1..splits as i128).map(|i| low + width * i / splits as i128).collect();
    points.dedup();
    points.retain(|&p| p > low && p <= high);
    points.iter().map(i128::to_string).collect()
}

/// The rows of an upstream table as the server estimates them (`TABLE_ROWS`), or counted when
/// it has no estimate yet (a table never analyzed says 0).
pub async fn estimate_rows(conn: &mut Conn, database: &str, table: &str) -> Result<u64> {
    let estimate: Option<Option<u64>> = conn
        .exec_first(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (database, table),
        )
        .await
        .map_err(upstream_error)?;
    match estimate.flatten() {
        Some(n) if n > 0 => Ok(n),
        _ => {
            let sql =
                format!("SELECT count(*) FROM {}.{}", quote_ident(database), quote_ident(table));
            let count: Option<u64> = conn.query_first(sql).await.map_err(upstream_error)?;
            Ok(count.unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_points_cut_an_integer_range() {
        assert_eq!(even_points(1, 100, 4), ["26", "51", "76"]);
        assert_eq!(even_points(-10, 9, 2), ["0"]);
        // Fewer values than splits: no empty split, no repeated point.
        assert_eq!(even_points(5, 6, 4), ["6"]);
        assert!(even_points(7, 7, 4).is_empty());
    }

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn options_have_defaults_and_are_checked() {
        let base = [
            ("connector", "mysql-cdc"),
            ("hostname", "h"),
            ("username", "u"),
            ("database.name", "shop"),
        ];
        let config = MySqlSourceConfig::from_options("my", &options(&base)).unwrap();
        assert_eq!((config.port, config.password.as_str()), (3306, ""));
        assert_eq!(config.server_id, default_server_id("my"));
        assert!(config.server_id > 5400);
        let with = |extra: (&str, &str)| {
            let mut o = options(&base);
            o.insert(extra.0.to_owned(), extra.1.to_owned());
            MySqlSourceConfig::from_options("my", &o)
        };
        assert_eq!(with(("server.id", "5401")).unwrap().server_id, 5401);
        assert!(with(("server.id", "0")).is_err());
        assert!(with(("port", "x")).is_err());
        assert!(with(("ssl.mode", "disabled")).is_ok());
        let tls = with(("ssl.mode", "required")).unwrap_err();
        assert!(matches!(tls, Error::Unsupported(_)), "{tls}");
        let unknown = with(("slot.name", "s")).unwrap_err().to_string();
        assert!(unknown.contains("unknown mysql-cdc option slot.name"), "{unknown}");
        let mut missing = options(&base);
        missing.remove("hostname");
        assert!(MySqlSourceConfig::from_options("my", &missing).is_err());
    }

    #[test]
    fn types_map_to_sluice_types() {
        assert_eq!(map_type("tinyint", "tinyint(4)"), DataType::Int16);
        assert_eq!(map_type("smallint", "smallint(5) unsigned"), DataType::Int32);
        assert_eq!(map_type("int", "int(11)"), DataType::Int32);
        assert_eq!(map_type("int", "int(10) unsigned"), DataType::Int64);
        assert_eq!(map_type("bigint", "bigint(20)"), DataType::Int64);
        assert_eq!(
            map_type("bigint", "bigint(20) unsigned"),
            DataType::Decimal { precision: 20, scale: 0 }
        );
        assert_eq!(
            map_type("decimal", "decimal(10,2)"),
            DataType::Decimal { precision: 10, scale: 2 }
        );
        assert_eq!(
            map_type("decimal", "decimal(65,30)"),
            DataType::Decimal { precision: 65, scale: 30 }
        );
        assert_eq!(map_type("datetime", "datetime(6)"), DataType::Timestamp);
        assert_eq!(map_type("timestamp", "timestamp"), DataType::Timestamptz);
        assert_eq!(map_type("varbinary", "varbinary(10)"), DataType::Bytea);
        assert_eq!(map_type("enum", "enum('a','b')"), DataType::Varchar);
        assert_eq!(map_type("time", "time(3)"), DataType::Varchar);
        assert_eq!(map_type("year", "year(4)"), DataType::Int32);
    }

    #[test]
    fn keys_page_by_index_order() {
        let table = UpstreamTable {
            schema: "shop".into(),
            name: "t".into(),
            columns: ["id", "name", "code"]
                .map(|n| ColumnCatalog::new(n, DataType::Varchar))
                .to_vec(),
            upstream_types: vec![
                "bigint(20)".into(),
                "varchar(10) collate utf8mb4_general_ci".into(),
                "varchar(10) collate utf8mb4_bin".into(),
            ],
            pk: vec![0, 1, 2],
        };
        // Numbers by value (not as text, whatever the backfill's own column types say).
        assert_eq!(key_column(&table, 0), "t.`id`");
        assert_eq!(key_column(&table, 1), "CAST(t.`name` AS BINARY)");
        assert_eq!(key_column(&table, 2), "t.`code`");
        let keys: Vec<String> = (0..3).map(|i| key_column(&table, i)).collect();
        let values: Vec<String> = ["1", "a", "b"]
            .iter()
            .enumerate()
            .map(|(i, v)| key_literal(&table, i, &Some((*v).to_owned())))
            .collect();
        assert_eq!(
            after_cursor(&keys, &values),
            "(t.`id` > '1') OR (t.`id` = '1' AND CAST(t.`name` AS BINARY) > CAST('a' AS BINARY)) \
             OR (t.`id` = '1' AND CAST(t.`name` AS BINARY) = CAST('a' AS BINARY) AND t.`code` > 'b')"
        );
    }

    #[test]
    fn qualified_names_keep_their_case() {
        assert_eq!(split_qualified("shop.Orders").unwrap(), ("shop".into(), "Orders".into()));
        assert_eq!(split_qualified("`my.db`.`t``x`").unwrap(), ("my.db".into(), "t`x".into()));
        assert!(split_qualified("orders").is_err());
    }

    #[test]
    fn privileges_are_read_from_grants() {
        let all =
            ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION".to_owned()];
        assert!(missing_privileges(&all, "shop").is_empty());
        let partial = [
            "GRANT REPLICATION SLAVE ON *.* TO `cdc`@`%`".to_owned(),
            "GRANT SELECT ON `shop`.* TO `cdc`@`%`".to_owned(),
        ];
        assert_eq!(missing_privileges(&partial, "shop"), ["REPLICATION CLIENT"]);
        assert_eq!(missing_privileges(&partial, "other"), ["REPLICATION CLIENT", "SELECT"]);
    }
}
