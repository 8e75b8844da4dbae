//! A private PostgreSQL server, the upstream of CDC tests.
//!
//! [`Upstream`] runs `initdb` into a temporary directory and owns one `postgres` process on it,
//! configured for logical decoding (`wal_level=logical`, room for 20 replication slots and WAL
//! senders) and for speed (`fsync=off`). It listens on 127.0.0.1 only, with trust
//! authentication for the superuser `postgres`, and keeps its Unix socket inside the
//! temporary directory so it never touches a system cluster.
//!
//! Layout of the temporary directory:
//! - `data/` is the cluster's data directory;
//! - `postgres.log` collects the output of `initdb` and of every server run, each headed by a
//!   `===` line, so [`Upstream::log_tail`] can explain a failure.
//!
//! Binaries: the first `PATH` entry holding both `initdb` and `postgres`, else the newest
//! `/usr/lib/postgresql/<version>/bin` (Debian keeps them off `PATH`).
//!
//! Root: `initdb` and `postgres` refuse to run as root. When the tests run as root (as in CI),
//! the temporary directory is handed to the OS user `postgres` and both programs run as that
//! user. They are spawned with that uid and gid directly rather than through `runuser` or `su`,
//! so the child process *is* the postmaster and a signal sent to it reaches the server.
//!
//! Stopping is a fast shutdown (SIGINT to the postmaster: roll back open transactions, write a
//! checkpoint, exit). [`Upstream::restart`] stops and starts the server on the same data and
//! port; dropping an [`Upstream`] stops it too, falling back to SIGKILL, so no server outlives
//! its test. Readiness is a retry-until-deadline loop that connects; there are no fixed sleeps.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio_postgres::Client;

use crate::harness::{connect, retry_until, text_rows};

/// How long a starting server may take to accept a session.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many fresh ports [`Upstream::start`] tries when the server exits before becoming ready.
const START_ATTEMPTS: u32 = 3;
/// How long [`Upstream::restart`] waits for a fast shutdown.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long dropping an [`Upstream`] waits for a fast shutdown before sending SIGKILL.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping an [`Upstream`] waits for the SIGKILLed server to exit.
const DROP_REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How many lines of the server log [`Upstream::log_tail`] returns.
const LOG_TAIL_LINES: usize = 80;
/// Where Debian and Ubuntu install each PostgreSQL major version.
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

/// A running PostgreSQL server on a temporary data directory, with logical WAL.
///
/// Dropping it stops the server (SIGINT, then SIGKILL after [`DROP_STOP_TIMEOUT`]) and then
/// removes the directory.
pub struct Upstream {
    /// Holds `data/`, `postgres.log` and the Unix socket; kept alive across restarts.
    dir: TempDir,
    /// The postmaster; `None` only while [`Upstream::restart`] is between stop and start.
    child: Option<Child>,
    /// The TCP port, the same for every run.
    port: u16,
    /// The directory holding `initdb` and `postgres`.
    bin: PathBuf,
    /// The OS user to run as when the tests run as root.
    run_as: Option<OsUser>,
    /// How many server processes have been spawned, for the log headers.
    spawns: u32,
    /// The `wal_level` the server runs with.
    wal_level: &'static str,
    /// More `-c` settings (TLS).
    extra_settings: Vec<String>,
}

/// A uid and gid to run a child process as.
#[derive(Debug, Clone, Copy)]
struct OsUser {
    uid: u32,
    gid: u32,
}

/// How a spawned server's startup ended.
enum Started {
    /// It accepted a session.
    Ready,
    /// It exited first (most likely another process took the port).
    Exited(ExitStatus),
}

impl Upstream {
    /// Creates a cluster in a new temporary directory, starts a server on a free port, and waits
    /// until it accepts a session.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_wal_level("logical").await
    }

    /// Like [`Upstream::start`], with another `wal_level` (to test what needs `logical`).
    pub async fn start_with_wal_level(wal_level: &'static str) -> anyhow::Result<Self> {
        let bin = find_bin_dir()?;
        let run_as = postgres_user_if_root()?;
        let dir = tempfile::Builder::new().prefix("sluice-pg-").tempdir()?;
        let mut upstream = Upstream {
            dir,
            child: None,
            port: 0,
            bin,
            run_as,
            spawns: 0,
            wal_level,
            extra_settings: Vec::new(),
        };
        upstream.prepare_dir()?;
        upstream.initdb().await?;
        for attempt in 1..=START_ATTEMPTS {
            upstream.port = free_port()?;
            match upstream.launch().await? {
                Started::Ready => return Ok(upstream),
                Started::Exited(status) if attempt == START_ATTEMPTS => {
                    bail!("postgres exited during startup ({status})\n{}", upstream.log_tail())
                }
                Started::Exited(_) => {} // Most likely the port was taken: try a new one.
            }
        }
        unreachable!("the last attempt returns or bails")
    }

    /// The libpq-style connection string for database `db`, as the superuser `postgres`.
    pub fn conn_string(&self, db: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={db}", self.port)
    }

    /// The TCP port (on 127.0.0.1), the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `CREATE SOURCE name` over database `shop` of this server, with `extra` options
    /// (`", slot.name = '..'"`) appended.
    pub fn source_sql(&self, name: &str, extra: &str) -> String {
        format!(
            "CREATE SOURCE {name} WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', \
             port = '{}', username = 'postgres', password = '', database.name = 'shop'{extra})",
            self.port
        )
    }

    /// Opens a session on database `db` as `postgres`; the connection task is spawned.
    pub async fn connect(&self, db: &str) -> anyhow::Result<Client> {
        connect(&self.conn_string(db))
            .await
            .with_context(|| format!("connect to upstream postgres\n{}", self.log_tail()))
    }

    /// Creates database `name` (quoted, so it keeps its case).
    pub async fn create_database(&self, name: &str) -> anyhow::Result<()> {
        let client = self.connect("postgres").await?;
        let quoted = name.replace('"', "\"\"");
        client
            .batch_execute(&format!("CREATE DATABASE \"{quoted}\""))
            .await
            .with_context(|| format!("create database {name}"))
    }

    /// Stops the server with a fast shutdown and starts it again on the same data directory and
    /// port, waiting until it accepts a session. Open sessions are closed by the server.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.resume().await
    }

    /// Starts the server again after [`Upstream::stop`], on the same data directory and port.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        match self.launch().await? {
            Started::Ready => Ok(()),
            Started::Exited(status) => {
                bail!("postgres exited while restarting ({status})\n{}", self.log_tail())
            }
        }
    }

    /// The last lines of the log (`initdb` and all runs), for failure messages.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("<no log: {e}>"));
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        format!("--- postgres log (last {} lines) ---\n{}", tail.len(), tail.join("\n"))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Creates the log file and, when running as root, hands the directory to `postgres`.
    fn prepare_dir(&self) -> anyhow::Result<()> {
        File::create(self.log_path())?;
        // Readable by anyone, so the log can be inspected whoever runs the server.
        fs::set_permissions(self.dir.path(), fs::Permissions::from_mode(0o755))?;
        let Some(user) = self.run_as else {
            return Ok(());
        };
        for path in [self.dir.path().to_owned(), self.log_path()] {
            std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))
                .with_context(|| format!("chown {} to postgres", path.display()))?;
        }
        Ok(())
    }

    /// Runs `initdb` into `data/`: superuser `postgres`, trust authentication, UTF8, C locale.
    async fn initdb(&self) -> anyhow::Result<()> {
        let log = self.open_log("initdb")?;
        let status = self
            .command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .await
            .context("run initdb")?;
        ensure!(status.success(), "initdb failed ({status})\n{}", self.log_tail());
        Ok(())
    }

    /// Spawns the server on `self.port` and waits until it accepts a session or exits.
    async fn launch(&mut self) -> anyhow::Result<Started> {
        let mut child = self.spawn_postgres()?;
        let conn = self.conn_string("postgres");
        tokio::select! {
            status = child.wait() => Ok(Started::Exited(status.context("wait for postgres")?)),
            ready = retry_until(STARTUP_TIMEOUT, || probe(conn.clone())) => {
                ready.with_context(|| format!("postgres did not start\n{}", self.log_tail()))?;
                self.child = Some(child);
                Ok(Started::Ready)
            }
        }
    }

    /// Spawns one postmaster with its output appended to the log file.
    fn spawn_postgres(&mut self) -> anyhow::Result<Child> {
        self.spawns += 1;
        let log = self.open_log(&format!("start #{} on port {}", self.spawns, self.port))?;
        let settings = [
            "listen_addresses=127.0.0.1".to_owned(),
            format!("wal_level={}", self.wal_level),
            "max_replication_slots=20".to_owned(),
            "max_wal_senders=20".to_owned(),
            "fsync=off".to_owned(),
            format!("unix_socket_directories={}", self.dir.path().display()),
        ];
        let mut command = self.command("postgres");
        command.arg("-D").arg(self.data_dir()).arg("-p").arg(self.port.to_string());
        for setting in settings.into_iter().chain(self.extra_settings.iter().cloned()) {
            command.arg("-c").arg(setting);
        }
        command.stdout(log.try_clone()?).stderr(log).kill_on_drop(true);
        command.spawn().context("spawn postgres")
    }

    /// Restarts the server with TLS (`ssl = on`): a new CA signs a certificate for `localhost`
    /// and 127.0.0.1. Returns the CA certificate's path (PEM).
    pub async fn enable_tls(&mut self) -> anyhow::Result<PathBuf> {
        let tls = self.dir.path().join("tls");
        fs::create_dir_all(&tls)?;
        let ca = make_ca(&tls, "ca")?;
        let (cert, key) = (tls.join("server.crt"), tls.join("server.key"));
        let san = tls.join("san.ext");
        fs::write(&san, "subjectAltName=DNS:localhost,IP:127.0.0.1\n")?;
        let csr = tls.join("server.csr");
        openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            path(&key)?,
            "-out",
            path(&csr)?,
        ])?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            path(&csr)?,
            "-CA",
            path(&ca)?,
            "-CAkey",
            path(&tls.join("ca.key"))?,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            path(&san)?,
            "-out",
            path(&cert)?,
        ])?;
        // Postgres refuses a key others can read.
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600))?;
        if let Some(user) = self.run_as {
            for file in [&tls, &cert, &key] {
                std::os::unix::fs::chown(file, Some(user.uid), Some(user.gid))?;
            }
        }
        self.extra_settings = vec![
            "ssl=on".to_owned(),
            format!("ssl_cert_file={}", cert.display()),
            format!("ssl_key_file={}", key.display()),
        ];
        self.restart().await?;
        Ok(ca)
    }

    /// Fast shutdown: SIGINT to the postmaster, then waits for it to exit.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self.stop_with("-INT").await
    }

    /// Immediate shutdown (SIGQUIT, as `pg_ctl stop -m immediate`): no shutdown checkpoint,
    /// so the next start runs crash recovery and replication slots fall back to the positions
    /// of the last checkpoint.
    pub async fn crash(&mut self) -> anyhow::Result<()> {
        self.stop_with("-QUIT").await
    }

    async fn stop_with(&mut self, signal: &str) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        send_signal(&child, signal)?;
        if let Ok(status) = tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
            status.context("wait for postgres to stop")?;
            return Ok(());
        }
        child.kill().await.context("kill -9 postgres")?;
        bail!("postgres ignored kill {signal} for {STOP_TIMEOUT:?}; killed it\n{}", self.log_tail())
    }

    /// A command for one of the PostgreSQL binaries, run as [`Upstream::run_as`] if set.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        // A working directory the `postgres` user can enter (the test's may be under /root).
        command.current_dir(self.dir.path()).stdin(Stdio::null());
        if let Some(user) = self.run_as {
            command.uid(user.uid).gid(user.gid);
        }
        command
    }

    /// Appends a `=== what ===` header to the log and returns the file for a child's output.
    fn open_log(&self, what: &str) -> anyhow::Result<File> {
        let mut log = OpenOptions::new().append(true).open(self.log_path())?;
        writeln!(log, "=== {what} ===")?;
        Ok(log)
    }
}

impl Drop for Upstream {
    /// Stops the server (SIGINT, then SIGKILL) and waits until it has exited, so the temporary
    /// directory is removed after the server stopped writing into it.
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if send_signal(child, "-INT").is_ok() && wait_blocking(child, DROP_STOP_TIMEOUT) {
            return;
        }
        if child.start_kill().is_ok() {
            wait_blocking(child, DROP_REAP_TIMEOUT);
        }
    }
}

/// Sends `signal` to the postmaster with the `kill` command (`-INT`: a fast shutdown).
fn send_signal(child: &Child, signal: &str) -> anyhow::Result<()> {
    let pid = child.id().context("postgres has already exited")?;
    let output = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .output()
        .with_context(|| format!("run kill {signal}"))?;
    ensure!(
        output.status.success(),
        "kill {signal} {pid}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Polls until `child` has exited or `timeout` has passed; returns whether it exited.
fn wait_blocking(child: &mut Child, timeout: Duration) -> bool {
    let give_up = std::time::Instant::now() + timeout;
    loop {
        if !matches!(child.try_wait(), Ok(None)) {
            return true;
        }
        if std::time::Instant::now() >= give_up {
            return false;
        }
        // Drop cannot await; a fast shutdown takes tens of milliseconds.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Checks that a server at `conn` accepts a session and answers a query.
async fn probe(conn: String) -> anyhow::Result<()> {
    let client = connect(&conn).await?;
    client.simple_query("SELECT 1").await?;
    Ok(())
}

/// A new self-signed CA in `dir`: `<name>.crt` (returned) and `<name>.key`.
pub fn make_ca(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=sluice test CA",
        "-keyout",
        path(&key)?,
        "-out",
        path(&cert)?,
    ])?;
    Ok(cert)
}

fn path(p: &Path) -> anyhow::Result<&str> {
    p.to_str().context("a non-UTF-8 path")
}

/// Runs the `openssl` command line tool.
fn openssl(args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("openssl").args(args).output().context("run openssl")?;
    ensure!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind an ephemeral port")?;
    Ok(listener.local_addr()?.port())
}

/// The first `PATH` entry holding `initdb` and `postgres`, else the newest Debian install.
fn find_bin_dir() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(debian_bin_dirs())
        .find(|dir| is_executable(&dir.join("initdb")) && is_executable(&dir.join("postgres")))
        .context("no initdb and postgres on PATH or in /usr/lib/postgresql/*/bin")
}

/// `/usr/lib/postgresql/<version>/bin` for every installed version, newest first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(DEBIAN_PG_ROOT) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let version = name.split('.').map(str::parse).collect::<Result<Vec<u32>, _>>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, bin)| bin).collect()
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The `postgres` OS user when this process runs as root (initdb and postgres refuse root).
fn postgres_user_if_root() -> anyhow::Result<Option<OsUser>> {
    if id(&["-u"])? != 0 {
        return Ok(None);
    }
    let hint = "running as root, but initdb and postgres refuse root and there is no OS user \
                `postgres` to run them as (Debian's postgresql package creates it)";
    let uid = id(&["-u", "postgres"]).context(hint)?;
    let gid = id(&["-g", "postgres"]).context(hint)?;
    Ok(Some(OsUser { uid, gid }))
}

/// Runs `id <args>` and parses the number it prints.
fn id(args: &[&str]) -> anyhow::Result<u32> {
    let output = std::process::Command::new("id").args(args).output().context("run id")?;
    ensure!(
        output.status.success(),
        "id {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim().parse().with_context(|| format!("id {} printed {text:?}", args.join(" ")))
}

#[tokio::test]
async fn private_postgres_starts_with_logical_wal() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    let outcome = logical_wal_and_restart(&mut upstream).await;
    outcome.with_context(|| upstream.log_tail())
}

/// Checks `wal_level`, that a table survives a restart, and that a logical slot can be made.
async fn logical_wal_and_restart(upstream: &mut Upstream) -> anyhow::Result<()> {
    let admin = upstream.connect("postgres").await?;
    let wal_level = text_rows(&admin, "SHOW wal_level").await?;
    ensure!(wal_level == [[Some("logical".to_owned())]], "wal_level is {wal_level:?}");

    upstream.create_database("shop").await?;
    let shop = upstream.connect("shop").await?;
    shop.batch_execute("CREATE TABLE orders (id int PRIMARY KEY, item text)").await?;
    shop.batch_execute("INSERT INTO orders VALUES (1, 'kettle')").await?;
    shop.batch_execute("SELECT pg_create_logical_replication_slot('s1', 'pgoutput')").await?;
    let slots =
        text_rows(&shop, "SELECT slot_name, plugin, database FROM pg_replication_slots").await?;
    let expected = [["s1", "pgoutput", "shop"].map(|s| Some(s.to_owned()))];
    ensure!(slots == expected, "replication slots: {slots:?}");
    shop.batch_execute("SELECT pg_drop_replication_slot('s1')").await?;

    let port = upstream.port();
    upstream.restart().await?;
    ensure!(upstream.port() == port, "restart moved from port {port} to {}", upstream.port());
    let shop = upstream.connect("shop").await?;
    let found = text_rows(&shop, "SELECT id, item FROM orders").await?;
    let expected = [[Some("1".to_owned()), Some("kettle".to_owned())]];
    ensure!(found == expected, "after restart: expected {expected:?}, found {found:?}");
    Ok(())
}
