//! The `postgres-cdc` connector: options, connection, and the upstream objects a source owns.
//!
//! A source reads one logical replication slot (pgoutput) fed by one publication. Creating a
//! source checks what the upstream needs (reachable, right password, `wal_level = logical`,
//! the REPLICATION privilege) and creates the publication and the slot when they are absent;
//! dropping it drops what it created, and nothing else.

/// Postgres snapshot pages in binary `COPY` format, decoded into Arrow arrays.
pub mod copy;
/// The source's publication: CDC tables added and removed.
pub mod publication;
/// A Postgres source's change stream over a streaming replication connection.
pub mod replication;
/// Reading an upstream Postgres: table descriptions, snapshot pages.
pub mod snapshot;
/// TLS to an upstream Postgres (`ssl.mode`, `ssl.root.cert`).
pub mod tls;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use crate::connector::postgres::tls::{SslMode, TlsSettings};

use crate::catalog::Created;
use crate::connector::common::SourceOptions;
use crate::error::{Error, Result};

/// Whether a connection failed in the TLS negotiation or handshake.
fn is_tls_failure(e: &tokio_postgres::Error) -> bool {
    let text = e.to_string();
    text.contains("TLS") || text.contains("tls") || text.contains("certificate")
}

/// How long connecting to the upstream may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The options of a `postgres-cdc` source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSourceConfig {
    /// Upstream host.
    pub hostname: String,
    /// Upstream port.
    pub port: u16,
    /// Role to connect as.
    pub username: String,
    /// Its password (may be empty).
    pub password: String,
    /// Upstream database.
    pub database: String,
    /// Default schema of upstream table names.
    pub schema: String,
    /// Logical replication slot.
    pub slot: String,
    /// Publication the slot decodes.
    pub publication: String,
    /// Whether Sluice may create the publication.
    pub create_publication: bool,
    /// `ssl.mode` and `ssl.root.cert`.
    pub tls: TlsSettings,
    /// `slot.lost = 'resnapshot'`: when the slot is gone upstream (dropped, or invalidated
    /// past `max_slot_wal_keep_size`), create it again and read every table of the source
    /// again in place; `'stop'` (the default) says so and waits.
    pub resnapshot_lost_slot: bool,
}

impl PgSourceConfig {
    /// Bytes of WAL the source's slot has not confirmed yet; `None` when the upstream does not
    /// answer within `timeout`.
    pub async fn slot_lag(&self, timeout: std::time::Duration) -> Option<i64> {
        let query = async {
            let client = self.connect().await.ok()?;
            let row = client
                .query_opt(
                    "SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::int8 \
                     FROM pg_replication_slots WHERE slot_name = $1",
                    &[&self.slot],
                )
                .await
                .ok()??;
            row.get::<_, Option<i64>>(0)
        };
        tokio::time::timeout(timeout, query).await.ok().flatten()
    }

    /// Reads and checks the `WITH (..)` options of `CREATE SOURCE source_name`.
    pub fn from_options(source_name: &str, options: &BTreeMap<String, String>) -> Result<Self> {
        match options.get("connector").map(String::as_str) {
            Some("postgres-cdc") => {}
            Some(other) => {
                return Err(Error::Unsupported(format!(
                    "connector '{other}'; the supported connector is 'postgres-cdc'"
                )));
            }
            None => {
                return Err(Error::InvalidStatement(
                    "a source needs connector = 'postgres-cdc'".into(),
                ));
            }
        }
        const KNOWN: &[&str] = &[
            "connector",
            "hostname",
            "port",
            "username",
            "password",
            "database.name",
            "schema.name",
            "slot.name",
            "publication.name",
            "publication.create.enable",
            "ssl.mode",
            "ssl.root.cert",
            "slot.lost",
        ];
        let options = SourceOptions::new(options, "postgres-cdc", KNOWN)?;
        let get = |key: &str| options.get(key);
        let required = |key: &str| options.required(key);
        let port = options.port(5432)?;
        let tls =
            TlsSettings::new(SslMode::parse(get("ssl.mode").as_deref())?, get("ssl.root.cert"))?;
        let create_publication = match get("publication.create.enable").as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(Error::InvalidStatement(format!(
                    "publication.create.enable must be 'true' or 'false', not '{other}'"
                )));
            }
        };
        let resnapshot_lost_slot = options.resnapshot_when_lost("slot.lost")?;
        let slot = match get("slot.name") {
            Some(slot) => valid_slot_name(slot)?,
            None => default_slot_name(source_name),
        };
        let publication =
            get("publication.name").unwrap_or_else(|| format!("sluice_{source_name}"));
        if publication.is_empty() || publication.len() > 63 {
            return Err(Error::InvalidParameter(format!(
                "publication.name must have 1 to 63 characters, not '{publication}'"
            )));
        }
        Ok(Self {
            hostname: required("hostname")?,
            port,
            username: required("username")?,
            password: get("password").unwrap_or_default(),
            database: required("database.name")?,
            schema: get("schema.name").unwrap_or_else(|| "public".into()),
            slot,
            publication,
            create_publication,
            tls,
            resnapshot_lost_slot,
        })
    }

    /// Connects to the upstream database; failures say what to fix.
    pub async fn connect(&self) -> Result<Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.hostname)
            .port(self.port)
            .user(&self.username)
            .password(&self.password)
            .dbname(&self.database)
            .application_name("sluice")
            .connect_timeout(CONNECT_TIMEOUT);
        match self.tls.client_config()? {
            None => self.connect_with(&config, NoTls).await,
            Some(tls) => {
                config.ssl_mode(match self.tls.mode {
                    SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
                    _ => tokio_postgres::config::SslMode::Require,
                });
                let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
                self.connect_with(&config, tls).await
            }
        }
    }

    async fn connect_with<T>(&self, config: &tokio_postgres::Config, tls: T) -> Result<Client>
    where
        T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
        T::Stream: Send + 'static,
    {
        let (client, connection) =
            match tokio::time::timeout(CONNECT_TIMEOUT, config.connect(tls)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(self.connect_error(&e)),
                Err(_) => return Err(self.unreachable(&"timed out")),
            };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "upstream connection closed");
            }
        });
        Ok(client)
    }

    fn connect_error(&self, e: &tokio_postgres::Error) -> Error {
        match e.as_db_error() {
            Some(db) if db.code().code() == "28P01" || db.code().code() == "28000" => {
                Error::Upstream {
                    code: "28P01",
                    message: format!(
                        "upstream rejected user \"{}\": {}; check username and password",
                        self.username,
                        db.message()
                    ),
                }
            }
            Some(db) if db.code().code() == "3D000" => Error::Upstream {
                code: "3D000",
                message: format!(
                    "upstream database \"{}\" does not exist; check database.name",
                    self.database
                ),
            },
            Some(db) => Error::Upstream {
                code: "08001",
                message: format!("upstream refused the connection: {}", db.message()),
            },
            None if self.tls.mode != SslMode::Disable && is_tls_failure(e) => {
                let mut cause = e.to_string();
                let mut source = std::error::Error::source(e);
                while let Some(inner) = source {
                    cause = format!("{cause}: {inner}");
                    source = inner.source();
                }
                Error::Upstream {
                    code: "08001",
                    message: format!(
                        "TLS with the upstream at {}:{} failed ({cause}); check ssl.mode ('{}') \
                         and ssl.root.cert, and that the upstream has ssl = on",
                        self.hostname,
                        self.port,
                        self.tls.mode.name()
                    ),
                }
            }
            None => self.unreachable(e),
        }
    }

    fn unreachable(&self, cause: &dyn std::fmt::Display) -> Error {
        Error::Upstream {
            code: "08001",
            message: format!(
                "cannot reach the upstream at {}:{} ({cause}); check hostname and port and that Postgres accepts TCP connections",
                self.hostname, self.port
            ),
        }
    }

    /// Checks the upstream can serve a source, then creates the publication and slot when
    /// absent. Returns which of the two were created (and so belong to the source).
    pub async fn prepare(&self, client: &Client) -> Result<Created> {
        let wal_level: String = query_one(client, "SHOW wal_level").await?;
        if wal_level != "logical" {
            return Err(Error::Upstream {
                code: "55000",
                message: format!(
                    "upstream wal_level is '{wal_level}', logical decoding needs 'logical': run \
                     ALTER SYSTEM SET wal_level = logical; and restart the upstream Postgres"
                ),
            });
        }
        let can_replicate: bool = client
            .query_one(
                "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .map_err(upstream_error)?
            .get(0);
        if !can_replicate {
            return Err(Error::Upstream {
                code: "42501",
                message: format!(
                    "upstream role \"{}\" lacks the REPLICATION privilege: run ALTER ROLE \"{}\" WITH REPLICATION;",
                    self.username, self.username
                ),
            });
        }
        let mut created = Created::default();
        let has_publication = !client
            .query("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&self.publication])
            .await
            .map_err(upstream_error)?
            .is_empty();
        if !has_publication {
            if !self.create_publication {
                return Err(Error::Upstream {
                    code: "42704",
                    message: format!(
                        "upstream publication \"{}\" does not exist and publication.create.enable is false",
                        self.publication
                    ),
                });
            }
            client
                .batch_execute(&format!(
                    "CREATE PUBLICATION {} WITH (publish_via_partition_root = true)",
                    quote_ident(&self.publication)
                ))
                .await
                .map_err(upstream_error)?;
            created.publication = true;
        }
        let slot = client
            .query(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.slot],
            )
            .await
            .map_err(upstream_error)?;
        if let Some(pid) = slot.first().and_then(|row| row.get::<_, Option<i32>>(0)) {
            if created.publication {
                let _ = self.drop_publication(client).await;
            }
            return Err(Error::Upstream {
                code: "55006",
                message: format!(
                    "upstream replication slot \"{}\" is being read by another process (pid \
                     {pid}); a slot has one reader: give this source another slot.name",
                    self.slot
                ),
            });
        }
        if slot.is_empty() {
            if let Err(e) = self.create_slot(client).await {
                if created.publication {
                    let _ = self.drop_publication(client).await;
                }
                return Err(e);
            }
            created.slot = true;
        }
        Ok(created)
    }

    /// Creates the source's slot again after it was lost upstream (nothing if it exists);
    /// returns where it starts.
    pub async fn create_slot_again(&self) -> Result<Option<String>> {
        let client = self.connect().await?;
        let status = client
            .query(
                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.slot],
            )
            .await
            .map_err(upstream_error)?;
        match status.first().map(|row| row.get::<_, Option<String>>(0)) {
            // Invalidated: it can never send changes again.
            Some(Some(status)) if status == "lost" => self.drop_slot(&client).await?,
            Some(_) => return Ok(None),
            None => {}
        }
        Ok(Some(self.create_slot(&client).await?))
    }

    /// Creates the source's logical slot (pgoutput); returns where it starts.
    async fn create_slot(&self, client: &Client) -> Result<String> {
        let row = client
            .query_one(
                "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&self.slot],
            )
            .await
            .map_err(upstream_error)?;
        Ok(row.get(0))
    }

    /// Drops the upstream objects a source created.
    pub async fn cleanup(&self, client: &Client, created: Created) -> Result<()> {
        if created.slot {
            self.drop_slot(client).await?;
        }
        if created.publication {
            self.drop_publication(client).await?;
        }
        Ok(())
    }

    /// Drops the slot. A reader that just stopped may still hold it for a moment (its backend
    /// finishes the last query), so a slot in use is released and the drop retried.
    async fn drop_slot(&self, client: &Client) -> Result<()> {
        let mut attempt = 0;
        loop {
            let dropped = client
                .execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
                    &[&self.slot],
                )
                .await;
            match dropped {
                Ok(_) => return Ok(()),
                Err(e) if attempt < 20 && e.code().map(|c| c.code()) == Some("55006") => {
                    attempt += 1;
                    let _ = client
                        .execute(
                            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                             WHERE slot_name = $1 AND active_pid IS NOT NULL",
                            &[&self.slot],
                        )
                        .await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(upstream_error(e)),
            }
        }
    }

    async fn drop_publication(&self, client: &Client) -> Result<()> {
        client
            .batch_execute(&format!(
                "DROP PUBLICATION IF EXISTS {}",
                quote_ident(&self.publication)
            ))
            .await
            .map_err(upstream_error)
    }
}

/// Postgres names replication slots with 1 to 63 lower-case letters, digits and underscores.
fn valid_slot_name(slot: String) -> Result<String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if slot.is_empty() || slot.len() > 63 || !slot.chars().all(ok) {
        return Err(Error::InvalidParameter(format!(
            "slot.name '{slot}' is not a valid replication slot name: use 1 to 63 lower-case \
             letters, digits and underscores"
        )));
    }
    Ok(slot)
}

/// `sluice_<source>`, with what a slot name cannot hold replaced by `_`.
fn default_slot_name(source: &str) -> String {
    let name: String = format!("sluice_{source}")
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '_' })
        .collect();
    name.chars().take(63).collect()
}

async fn query_one(client: &Client, sql: &str) -> Result<String> {
    let rows = client.simple_query(sql).await.map_err(upstream_error)?;
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .ok_or_else(|| Error::Upstream {
            code: "XX000",
            message: format!("upstream returned nothing for {sql}"),
        })
}

/// An upstream error, keeping the upstream's SQLSTATE.
pub fn upstream_error(e: tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => Error::Upstream {
            code: sqlstate_of(db.code().code()),
            message: format!("upstream: {}", db.message()),
        },
        None => {
            Error::Upstream { code: "08006", message: format!("upstream connection failed: {e}") }
        }
    }
}

/// The codes passed through from the upstream; others become a generic upstream error.
fn sqlstate_of(code: &str) -> &'static str {
    match code {
        "42501" => "42501",
        "42P01" => "42P01",
        "42704" => "42704",
        "55000" => "55000",
        "53400" => "53400",
        _ => "XX000",
    }
}

/// A Postgres identifier, quoted.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// An upstream type as `format_type` prints it, without its modifier: `timestamp(3) without
/// time zone` is a `timestamp without time zone`, `numeric(10,2)` a `numeric`.
pub fn base_type(ty: &str) -> String {
    match (ty.find('('), ty.find(')')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &ty[..open], &ty[close + 1..]).trim().to_owned()
        }
        _ => ty.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn options_have_defaults_and_are_checked() {
        let o = options(&[
            ("connector", "postgres-cdc"),
            ("hostname", "h"),
            ("username", "u"),
            ("database.name", "d"),
        ]);
        let c = PgSourceConfig::from_options("pg", &o).unwrap();
        assert_eq!((c.port, c.schema.as_str(), c.slot.as_str()), (5432, "public", "sluice_pg"));
        let mut bad = o.clone();
        bad.insert("slot_name".into(), "x".into());
        assert!(matches!(
            PgSourceConfig::from_options("pg", &bad),
            Err(Error::InvalidStatement(_))
        ));
        let mut spaced = o.clone();
        spaced.insert("slot.name".into(), "a b".into());
        assert!(matches!(
            PgSourceConfig::from_options("pg", &spaced),
            Err(Error::InvalidParameter(_))
        ));
        let quoted = PgSourceConfig::from_options("My Src", &o).unwrap();
        assert_eq!(quoted.slot, "sluice_my_src");
        let mut empty = o.clone();
        empty.insert("publication.name".into(), String::new());
        assert!(matches!(
            PgSourceConfig::from_options("pg", &empty),
            Err(Error::InvalidParameter(_))
        ));
        let mut missing = o.clone();
        missing.remove("hostname");
        assert!(
            PgSourceConfig::from_options("pg", &missing)
                .unwrap_err()
                .to_string()
                .contains("hostname")
        );
    }
}
