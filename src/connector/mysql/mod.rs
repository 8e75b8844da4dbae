//! A MySQL / MariaDB CDC source: its options, connection, validation and table descriptions.
//!
//! The source reads the upstream's binlog as a replica (`server.id`), so the upstream must log
//! rows: `log_bin` on, `binlog_format = ROW`, `binlog_row_image = FULL` and
//! `binlog_row_metadata = FULL`. [`MySqlSourceConfig::
//! validate`] checks that and the user's privileges before a source is created, and says what
//! to change.
//! [`snapshot`](crate::connector::mysql::snapshot) reads a table's rows and
//! [`binlog`](crate::connector::mysql::binlog) its changes, both as the text
//! [`text`](crate::connector::mysql::text) defines.

/// Reading a MySQL / MariaDB binlog: committed transactions as row changes.
pub mod binlog;
/// Snapshot pages, single rows, split points and row estimates.
pub mod snapshot;
/// What the binlog's statements (query events) say: truncates, reshaping DDL, row changes
/// logged as statements.
pub mod statements;
/// A MySQL value as the text Postgres prints for it, from the snapshot and from the binlog.
pub mod text;

use std::collections::BTreeMap;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row};

use crate::catalog::ColumnCatalog;
use crate::connector::common::SourceOptions;
use crate::connector::common::UpstreamTable;
use crate::connector::offset::CdcOffset;
use crate::error::{Error, Result};
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
    "binlog.lost",
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
    /// `binlog.lost = 'resnapshot'`: when the upstream no longer has the binlog where the
    /// source stopped (purged), read on from the binlog's end and read every table of the
    /// source again in place; `'stop'` (the default) says so and waits.
    pub resnapshot_lost_binlog: bool,
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
        let resnapshot_lost_binlog = options.resnapshot_when_lost("binlog.lost")?;
        Ok(Self {
            hostname: options.required("hostname")?,
            port,
            username: options.required("username")?,
            password: get("password").unwrap_or_default(),
            database: options.required("database.name")?,
            server_id,
            resnapshot_lost_binlog,
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
pub(super) fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

/// Splits `database.table` (each part optionally back-quoted; names keep their case, as MySQL's
/// do on Linux) into its parts.
pub fn split_qualified(name: &str) -> Result<(String, String)> {
    crate::connector::common::split_two_parts(name, '`', false).ok_or_else(|| {
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
        type_ids: Vec::new(),
        dropped: Vec::new(),
    };
    for (name, data_type, column_type, collation) in columns {
        let data_type = text::map_type(&data_type, &column_type);
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

/// The base tables of `database`, as `(database, table)`, in name order.
pub async fn list_tables(conn: &mut Conn, database: &str) -> Result<Vec<(String, String)>> {
    let names: Vec<String> = conn
        .exec(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? \
             AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (database,),
        )
        .await
        .map_err(upstream_error)?;
    Ok(names.into_iter().map(|t| (database.to_owned(), t)).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

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
