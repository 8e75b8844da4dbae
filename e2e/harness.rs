//! A real `sluice` process for end-to-end tests.
//!
//! [`Sluice`] owns one child process and one temporary directory. The directory outlives the
//! process, so a test can [`Sluice::kill9`] the server and [`Sluice::restart`] it on the same
//! data, which is how crash recovery is tested.
//!
//! Layout of the temporary directory:
//! - `data/` is passed as `--data-dir`;
//! - `sluice.log` collects stdout and stderr of every run, each run headed by a `=== start`
//!   line, so [`Sluice::log_tail`] can explain a failure.
//!
//! Every start picks a fresh free port (bind `127.0.0.1:0`, read the port, drop the listener).
//! Another process may grab that port before the server binds it; the server then exits at
//! once, and the start is retried on a new port. Readiness is a retry-until-deadline loop
//! ([`retry_until`]) that connects and runs `SELECT 1`; there are no fixed sleeps.

use std::fs::{self, OpenOptions};
use std::future::Future;
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// How long a starting server may take to answer `SELECT 1`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many fresh ports a start tries when the server exits before becoming ready.
const START_ATTEMPTS: u32 = 3;
/// The barrier interval the test servers run with, short so tests see changes quickly.
const BARRIER_INTERVAL_MS: u64 = 50;
/// How long dropping a [`Sluice`] waits for the killed server to exit.
const DROP_REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How many lines of the server log [`Sluice::log_tail`] returns.
const LOG_TAIL_LINES: usize = 80;

/// A running `sluice` server on a temporary data directory.
///
/// Dropping it kills the child (SIGKILL), waits for it to exit, then removes the directory.
pub struct Sluice {
    /// Holds `data/` and `sluice.log`; kept alive across restarts.
    dir: TempDir,
    /// The current server process; `None` between [`Sluice::kill9`] and [`Sluice::restart`].
    child: Option<Child>,
    /// The port of the current (or last) run.
    port: u16,
    /// The HTTP port (metrics, dashboard) of the current run.
    http_port: u16,
    /// How many times a server process has been spawned, for the log headers.
    spawns: u32,
    /// Milliseconds between checkpoints.
    barrier_interval_ms: u64,
    /// Extra environment of every run.
    env: Vec<(String, String)>,
}

impl Sluice {
    /// Starts a server on a new temporary data directory and waits until it answers `SELECT 1`.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_barrier_interval(BARRIER_INTERVAL_MS).await
    }

    /// [`Sluice::start`] with checkpoints every `barrier_interval_ms` milliseconds.
    pub async fn start_with_barrier_interval(barrier_interval_ms: u64) -> anyhow::Result<Self> {
        Self::start_with(barrier_interval_ms, &[]).await
    }

    /// [`Sluice::start`] with `env` added to the environment of every run (for example
    /// `SLUICE_FAILPOINTS`).
    pub async fn start_with_env(env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::start_with(BARRIER_INTERVAL_MS, env).await
    }

    async fn start_with(barrier_interval_ms: u64, env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sluice-e2e-").tempdir()?;
        fs::create_dir_all(dir.path().join("data"))?;
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut sluice =
            Sluice { dir, child: None, port: 0, http_port: 0, spawns: 0, barrier_interval_ms, env };
        sluice.launch().await?;
        Ok(sluice)
    }

    /// Runs after this one get no extra environment (failpoints armed at the start are not
    /// armed again).
    pub fn clear_env(&mut self) {
        self.env.clear();
    }

    /// Kills the server with SIGKILL and waits for it to exit. Does nothing if it is not running.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL on unix and then reaps the process.
            child.kill().await.context("kill -9 sluice")?;
        }
        Ok(())
    }

    /// Stops the server with SIGTERM, as a service manager does, and waits up to `deadline`
    /// for it to exit (else kills it and fails).
    pub async fn terminate(
        &mut self,
        deadline: Duration,
    ) -> anyhow::Result<std::process::ExitStatus> {
        let mut child = self.child.take().context("sluice is not running")?;
        let pid = child.id().context("sluice has exited")?.to_string();
        let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status()?;
        ensure!(sent.success(), "kill -TERM {pid} failed");
        match tokio::time::timeout(deadline, child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => {
                child.kill().await?;
                bail!("sluice did not exit within {deadline:?} of SIGTERM")
            }
        }
    }

    /// Starts the server again on the same data directory (on a new port) and waits until it
    /// answers `SELECT 1`. A server that is still running is killed with SIGKILL first.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9().await?;
        self.launch().await
    }

    /// Opens a new session as user `root` on database `dev`; the connection task is spawned.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        connect(&self.conn_string())
            .await
            .with_context(|| format!("connect to sluice\n{}", self.log_tail()))
    }

    /// Fails if the server process has exited: it should be serving.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(child) = self.child.as_mut()
            && let Some(status) = child.try_wait()?
        {
            bail!("sluice exited ({status})\n{}", self.log_tail());
        }
        Ok(())
    }

    /// The libpq-style connection string of the current run.
    pub fn conn_string(&self) -> String {
        format!("host=127.0.0.1 port={} user=root dbname=dev", self.port)
    }

    /// The process id of the current run.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The TCP port of the current run, for clients that take host and port separately.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The base URL of the current run's HTTP server (`http://127.0.0.1:port`).
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// `method path` on the HTTP server: the status code and the body.
    pub async fn http(&self, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
        http_request(self.http_port, method, path).await
    }

    /// The last lines of the server log (all runs), for failure messages.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("<no log: {e}>"));
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        format!("--- sluice log (last {} lines) ---\n{}", tail.len(), tail.join("\n"))
    }

    /// The log of the current run only (from its `=== start` line), to scan for panics.
    pub fn current_run_log(&self) -> String {
        let log = fs::read_to_string(self.log_path()).unwrap_or_default();
        let start = log.rfind("=== start").unwrap_or(0);
        log[start..].to_owned()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("sluice.log")
    }

    /// Spawns the server on a fresh port until one run becomes ready.
    async fn launch(&mut self) -> anyhow::Result<()> {
        for attempt in 1..=START_ATTEMPTS {
            self.port = free_port()?;
            self.http_port = free_port()?;
            let mut child = self.spawn()?;
            let conn = self.conn_string();
            tokio::select! {
                status = child.wait() => {
                    let status = status.context("wait for sluice")?;
                    if attempt == START_ATTEMPTS {
                        bail!("sluice exited during startup ({status})\n{}", self.log_tail());
                    }
                    // Most likely another process took the port first: try a new one.
                }
                ready = retry_until(STARTUP_TIMEOUT, || probe(conn.clone())) => {
                    ready.with_context(|| format!("sluice did not start\n{}", self.log_tail()))?;
                    self.child = Some(child);
                    return Ok(());
                }
            }
        }
        unreachable!("the last attempt returns or bails")
    }

    /// Spawns one server process with its output appended to the log file.
    fn spawn(&mut self) -> anyhow::Result<Child> {
        self.spawns += 1;
        let mut log = OpenOptions::new().create(true).append(true).open(self.log_path())?;
        writeln!(log, "=== start #{} on port {} ===", self.spawns, self.port)?;
        let stdout = log.try_clone()?;
        // `SLUICE_BIN` runs another build (a copy kept for a long soak while this one changes).
        let binary =
            std::env::var_os("SLUICE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_sluice").into());
        Command::new(binary)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .arg("--http")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--barrier-interval-ms")
            .arg(self.barrier_interval_ms.to_string())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("spawn sluice")
    }
}

impl Drop for Sluice {
    /// Kills the child and waits (up to [`DROP_REAP_TIMEOUT`]) until it has exited, so the
    /// temporary directory is removed after the server stopped writing into it.
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if child.start_kill().is_err() {
            return; // Already exited and reaped.
        }
        let give_up = std::time::Instant::now() + DROP_REAP_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < give_up {
            // Drop cannot await; a SIGKILLed process exits within milliseconds.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One HTTP/1.1 request to `127.0.0.1:port` (the body read to the end of the connection);
/// a dozen lines rather than an HTTP client crate in the test build.
pub async fn http_request(port: u16, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8(response)?;
    let (head, body) = response.split_once("\r\n\r\n").context("no end of the HTTP head")?;
    let status = head.split(' ').nth(1).context("no HTTP status")?.parse()?;
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    Ok((status, if chunked { dechunk(body)? } else { body.to_owned() }))
}

/// The body of a `Transfer-Encoding: chunked` response.
fn dechunk(mut body: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("truncated chunk")?;
        let size = usize::from_str_radix(size.trim(), 16)?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("truncated chunk")?);
        body = rest[size..].strip_prefix("\r\n").context("no chunk end")?;
    }
}

/// Connects to `conn` (a libpq-style connection string) and spawns the connection task.
pub async fn connect(conn: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(conn, NoTls).await?;
    tokio::spawn(async move {
        // The error surfaces again on the client's next request; nothing to do here.
        let _ = connection.await;
    });
    Ok(client)
}

/// Runs `sql` with the simple query protocol and returns its rows as Postgres text, `None` for
/// NULL.
pub async fn text_rows(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let messages = client.simple_query(sql).await?;
    Ok(messages
        .iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => {
                Some((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect())
}

/// Calls `f` until it succeeds or `deadline` has passed, backing off from 10 ms to 200 ms.
///
/// Returns the first success, or the last error with the time spent attached.
pub async fn retry_until<T, F, Fut>(deadline: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let give_up = Instant::now() + deadline;
    let mut backoff = Duration::from_millis(10);
    loop {
        let error = match f().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if Instant::now() + backoff > give_up {
            return Err(error.context(format!("still failing after {deadline:?}")));
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(200));
    }
}

/// Checks that a server at `conn` accepts a session and answers `SELECT 1`.
async fn probe(conn: String) -> anyhow::Result<()> {
    let client = connect(&conn).await?;
    let answer = client.simple_query("SELECT 1").await?;
    let one = answer.iter().find_map(|message| match message {
        SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    });
    ensure!(one == Some("1"), "SELECT 1 answered {one:?}");
    Ok(())
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind an ephemeral port")?;
    Ok(listener.local_addr()?.port())
}

/// The rows of a query, sorted, as text.
pub async fn sorted(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let mut rows = text_rows(client, sql).await?;
    rows.sort();
    Ok(rows)
}

/// Asserts that `view` holds exactly what `query` returns now.
pub async fn assert_view_matches(client: &Client, view: &str, query: &str) -> anyhow::Result<()> {
    let found = sorted(client, &format!("SELECT * FROM {view}")).await?;
    let expected = sorted(client, query).await?;
    ensure!(
        found == expected,
        "{view} differs from its query: {} rows vs {} expected; first differences: {:?}",
        found.len(),
        expected.len(),
        found.iter().zip(&expected).filter(|(a, b)| a != b).take(3).collect::<Vec<_>>()
    );
    Ok(())
}

/// Runs `WAIT` (until no job is creating), failing if it takes longer than `deadline`.
pub async fn wait_jobs(client: &Client, deadline: Duration) -> anyhow::Result<()> {
    tokio::time::timeout(deadline, client.batch_execute("WAIT"))
        .await
        .context("WAIT did not return")??;
    Ok(())
}

/// A small xorshift64 generator for randomized tests (chaos, fuzz): their choices, replayable
/// from the seed they print.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // One splitmix64 step spreads similar seeds apart; the state must not be zero.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `0..n` for a positive `i64` bound.
    pub fn below_i64(&mut self, n: i64) -> i64 {
        self.below(n.max(1) as u64) as i64
    }

    /// True with `percent` % probability.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}
