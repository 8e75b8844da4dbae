//! A private MariaDB server, the upstream of MySQL CDC tests.
//!
//! [`MySqlUpstream`] runs `mariadb-install-db` into a temporary directory and owns one
//! `mariadbd` process on it, with the binlog a CDC source needs (`log-bin`, `binlog-format=ROW`,
//! `binlog-row-image=FULL`, `binlog-row-metadata=FULL`, `server-id=1`). It listens on 127.0.0.1
//! only, on a free port, with its socket, pid file and binlogs inside the temporary directory,
//! so it never touches a system server; `root` connects over TCP without a password.
//!
//! `--no-defaults` keeps every option file of the machine out. Tests run as root in CI, which
//! `mariadbd` refuses unless told `--user=root`. Stopping is SIGTERM (a clean shutdown);
//! [`MySqlUpstream::crash`] is SIGKILL. Dropping it kills the server. Readiness is a
//! retry-until-deadline loop that connects; there are no fixed sleeps.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use mysql_async::prelude::Queryable;
use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::harness::{free_port, retry_until};

/// How long a starting server may take to accept a session.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a clean shutdown may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many lines of the server log [`MySqlUpstream::log_tail`] returns.
const LOG_TAIL_LINES: usize = 60;

/// A running MariaDB server on a temporary data directory, with a row-based binlog.
pub struct MySqlUpstream {
    /// Holds `data/`, `mariadb.log` and the socket; kept alive across restarts.
    dir: TempDir,
    child: Option<Child>,
    /// The TCP port, the same for every run unless [`MySqlUpstream::move_to`] changes it.
    port: u16,
    spawns: u32,
    /// The server's `server_id`.
    server_id: u32,
}

impl MySqlUpstream {
    /// Whether the machine has MariaDB's server binaries (`.ci/run` installs them).
    pub fn available() -> bool {
        which("mariadbd").is_some() && which("mariadb-install-db").is_some()
    }

    /// Initialises a data directory and starts a server on a free port.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_server_id(1).await
    }

    /// [`MySqlUpstream::start`] with another `server_id` (a replica's must differ).
    pub async fn start_with_server_id(server_id: u32) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sluice-mariadb-").tempdir()?;
        let mut upstream = MySqlUpstream { dir, child: None, port: 0, spawns: 0, server_id };
        upstream.install().await?;
        for attempt in 1..=3 {
            upstream.port = free_port()?;
            match upstream.launch().await {
                Ok(()) => return Ok(upstream),
                Err(e) if attempt == 3 => return Err(e),
                Err(_) => {} // Most likely the port was taken: try another.
            }
        }
        unreachable!("the last attempt returns or fails")
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `CREATE SOURCE name` over database `shop` of this server, with `extra` options
    /// (`", server.id = '..'"`) appended.
    pub fn source_sql(&self, name: &str, extra: &str) -> String {
        format!(
            "CREATE SOURCE {name} WITH (connector = 'mysql-cdc', hostname = '127.0.0.1', \
             port = '{}', username = 'root', password = '', database.name = 'shop'{extra})",
            self.port
        )
    }

    /// A session as root (on no database: statements name theirs).
    pub async fn connect(&self) -> anyhow::Result<mysql_async::Conn> {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false);
        mysql_async::Conn::new(opts)
            .await
            .with_context(|| format!("connect to mariadb\n{}", self.log_tail()))
    }

    /// Runs `sql` (one or more statements) in a new session.
    pub async fn execute(&self, sql: &str) -> anyhow::Result<()> {
        let mut conn = self.connect().await?;
        conn.query_drop(sql).await.with_context(|| format!("mariadb: {sql}"))?;
        conn.disconnect().await?;
        Ok(())
    }

    /// Every row of `sql` as text (NULL as `None`), sorted.
    pub async fn rows(&self, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
        let mut conn = self.connect().await?;
        let rows: Vec<mysql_async::Row> = conn.query(sql).await.with_context(|| sql.to_owned())?;
        conn.disconnect().await?;
        Ok(sorted_text(rows))
    }

    /// Stops the server cleanly and starts it again on the same data and port.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.launch().await
    }

    /// Stops the server and starts it again on `port` (taking over an address, as a failover
    /// does).
    pub async fn move_to(&mut self, port: u16) -> anyhow::Result<()> {
        self.stop().await?;
        self.port = port;
        self.launch().await
    }

    /// A clean shutdown (SIGTERM).
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
        match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => child.kill().await?,
        }
        Ok(())
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("<no log: {e}>"));
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        format!("--- mariadb log (last {} lines) ---\n{}", tail.len(), tail.join("\n"))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("mariadb.log")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A temporary directory of this server's own: in the shared `/tmp`, a bootstrap once
    /// failed to delete its own temporary table there ("Error on delete of
    /// '/tmp/#sql-temptable-..'") while other tests ran servers beside it.
    fn tmp_dir(&self) -> anyhow::Result<PathBuf> {
        let tmp = self.dir.path().join("tmp");
        fs::create_dir_all(&tmp).context("create the server's tmpdir")?;
        Ok(tmp)
    }

    fn open_log(&self, header: &str) -> anyhow::Result<fs::File> {
        let mut log = OpenOptions::new().create(true).append(true).open(self.log_path())?;
        writeln!(log, "=== {header} ===")?;
        Ok(log)
    }

    async fn install(&self) -> anyhow::Result<()> {
        let log = self.open_log("mariadb-install-db")?;
        let status = Command::new(which("mariadb-install-db").context("no mariadb-install-db")?)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--tmpdir={}", self.tmp_dir()?.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .await
            .context("run mariadb-install-db")?;
        ensure!(status.success(), "mariadb-install-db failed ({status})\n{}", self.log_tail());
        Ok(())
    }

    async fn launch(&mut self) -> anyhow::Result<()> {
        self.spawns += 1;
        let log = self.open_log(&format!("start #{} on port {}", self.spawns, self.port))?;
        let dir = self.dir.path();
        let mut child = Command::new(which("mariadbd").context("no mariadbd")?)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--tmpdir={}", self.tmp_dir()?.display()))
            .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--server-id={}", self.server_id))
            .arg(format!("--log-bin={}", self.data_dir().join("binlog").display()))
            .args([
                "--bind-address=127.0.0.1",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",
                "--user=root",
                "--innodb-flush-log-at-trx-commit=2",
                "--skip-name-resolve",
                "--log-slave-updates",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("spawn mariadbd")?;
        let port = self.port;
        tokio::select! {
            status = child.wait() => bail!("mariadbd exited during startup ({status:?})\n{}", self.log_tail()),
            ready = retry_until(STARTUP_TIMEOUT, || probe(port)) => {
                ready.with_context(|| format!("mariadbd did not start\n{}", self.log_tail()))?;
            }
        }
        self.child = Some(child);
        Ok(())
    }
}

/// Connects and runs `SELECT 1`.
async fn probe(port: u16) -> anyhow::Result<()> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false);
    let mut conn = mysql_async::Conn::new(opts).await?;
    conn.query_drop("SELECT 1").await?;
    conn.disconnect().await?;
    Ok(())
}

/// The first `PATH` entry holding `program`, or Debian's `/usr/sbin`.
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// MariaDB's `rows` as text (NULL as `None`), sorted.
pub fn sorted_text(rows: Vec<mysql_async::Row>) -> Vec<Vec<Option<String>>> {
    let mut rows: Vec<Vec<Option<String>>> = rows
        .into_iter()
        .map(|row| {
            row.unwrap()
                .into_iter()
                .map(|v| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}
