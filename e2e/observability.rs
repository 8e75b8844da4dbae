//! The HTTP server: `/metrics` scraped during a backfill and parsed as Prometheus text, the
//! JSON API, bad paths and methods, and the dashboard loaded in a real headless Chromium.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, retry_until, text_rows};

/// `/metrics` of `server`, parsed.
pub async fn scrape(server: &Sluice) -> anyhow::Result<prometheus_parse::Scrape> {
    let (status, body) = server.http("GET", "/metrics").await?;
    ensure!(status == 200, "GET /metrics answered {status}: {body}");
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    prometheus_parse::Scrape::parse(lines).context("/metrics is not valid Prometheus text")
}

/// The value of the sample `metric` whose labels include `labels`, if there is one.
pub fn sample(
    scrape: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let found = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))?;
    match &found.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => Some(*v),
        prometheus_parse::Value::Histogram(buckets) => buckets.last().map(|b| b.count),
        prometheus_parse::Value::Summary(_) => None,
    }
}

/// A table of `rows` rows and a view over it, backfilling at `rate` rows/s in the background.
async fn slow_view(client: &Client, rows: u32, rate: u32) -> anyhow::Result<()> {
    client
        .batch_execute(&format!(
            "CREATE TABLE big (id int PRIMARY KEY, v int);
             INSERT INTO big SELECT i, i % 50 FROM generate_series(1, {rows}) AS s(i);
             SET background_ddl = true; SET backfill_rate_limit = {rate};
             CREATE MATERIALIZED VIEW slow AS SELECT v, count(*) AS n FROM big GROUP BY v;
             SET backfill_rate_limit = DEFAULT; SET background_ddl = false;"
        ))
        .await?;
    Ok(())
}

#[tokio::test]
async fn metrics_move_during_a_backfill() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = metrics_scenario(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn metrics_scenario(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    slow_view(&client, 40_000, 1000).await?;
    let job = [("job", "slow")];
    // The backfill's row counter moves between two scrapes.
    let first = retry_until(Duration::from_secs(30), || async {
        let s = scrape(server).await?;
        let rows = sample(&s, "sluice_backfill_rows_total", &job).context("no backfill rows")?;
        ensure!(rows > 0.0, "the backfill has read nothing yet");
        Ok(rows)
    })
    .await?;
    let s = retry_until(Duration::from_secs(30), || async {
        let s = scrape(server).await?;
        let rows = sample(&s, "sluice_backfill_rows_total", &job).context("no backfill rows")?;
        ensure!(rows > first, "backfill rows stayed at {rows}");
        let rate = sample(&s, "sluice_backfill_rows_per_second", &job).context("no rate")?;
        ensure!(rate > 0.0, "no read rate yet");
        Ok(s)
    })
    .await?;
    let throttled = [("job", "slow"), ("status", "throttled")];
    ensure!(sample(&s, "sluice_backfill_status", &throttled) == Some(1.0), "not throttled");
    let ratio = sample(&s, "sluice_backfill_progress_ratio", &job).context("no ratio")?;
    ensure!((0.0..1.0).contains(&ratio), "progress ratio {ratio}");
    let rate = sample(&s, "sluice_backfill_rows_per_second", &job).context("no rate")?;
    ensure!(rate < 5000.0, "a 1000 rows/s backfill reads {rate} rows/s");
    // Event metrics: statements by kind, the open connection, checkpoints and their latency.
    let ok_inserts = [("kind", "insert"), ("outcome", "ok")];
    ensure!(sample(&s, "sluice_statements_total", &ok_inserts) == Some(1.0));
    ensure!(sample(&s, "sluice_pgwire_connections", &[]).is_some_and(|n| n >= 1.0));
    ensure!(sample(&s, "sluice_barrier_latency_seconds", &[]).is_some_and(|n| n > 0.0));
    ensure!(sample(&s, "sluice_checkpoints_total", &[]).is_some_and(|n| n > 0.0));
    ensure!(sample(&s, "sluice_checkpoint_bytes", &[]).is_some());
    // The 40 000-row INSERT commits in one epoch: large enough to be ingested as a file.
    let ingested = sample(&s, "sluice_checkpoints_ingested_total", &[]);
    ensure!(ingested.is_some_and(|n| n >= 1.0), "no checkpoint was ingested: {ingested:?}");
    ensure!(sample(&s, "sluice_rocksdb_estimated_keys", &[]).is_some_and(|n| n > 0.0));
    ensure!(sample(&s, "sluice_rocksdb_memtable_bytes", &[]).is_some());
    for busy in ["running_compactions", "running_flushes", "compaction_pending"] {
        let name = format!("sluice_rocksdb_{busy}");
        ensure!(sample(&s, &name, &[]).is_some_and(|n| n >= 0.0), "no {name}");
    }
    let fragments = text_rows(&client, "SELECT fragment_id FROM rw_catalog.rw_fragments").await?;
    for row in &fragments {
        let id = row[0].as_deref().context("fragment id")?;
        ensure!(
            sample(&s, "sluice_actor_count", &[("fragment", id)]).is_some(),
            "no actor count of fragment {id}"
        );
    }
    // A failed statement counts as an error.
    ensure!(client.batch_execute("SELECT * FROM nowhere").await.is_err());
    let s = scrape(server).await?;
    let failed = [("kind", "select"), ("outcome", "error")];
    ensure!(sample(&s, "sluice_statements_total", &failed) == Some(1.0));

    // The JSON API agrees with rw_ddl_progress.
    let (status, jobs) = server.http("GET", "/api/jobs").await?;
    ensure!(status == 200, "GET /api/jobs: {status}");
    let jobs: serde_json::Value = serde_json::from_str(&jobs)?;
    let slow = jobs.as_array().and_then(|j| j.iter().find(|j| j["name"] == "slow"));
    let slow = slow.context("/api/jobs lacks the view")?;
    ensure!(slow["creating"] == true && slow["status"] == "throttled", "{slow}");
    let (status, graph) = server.http("GET", "/api/graph/slow").await?;
    ensure!(status == 200, "GET /api/graph/slow: {status}");
    let graph: serde_json::Value = serde_json::from_str(&graph)?;
    let boxes = graph["fragments"].as_array().map_or(0, Vec::len);
    let rows =
        text_rows(&client, "SELECT count(*) FROM rw_catalog.rw_fragments WHERE job_name = 'slow'")
            .await?;
    ensure!(
        rows[0][0] == Some(boxes.to_string()),
        "graph has {boxes} fragments, rw_fragments {rows:?}"
    );
    ensure!(
        graph["edges"].as_array().is_some_and(|e| e.iter().any(|e| e["from_job"] == "big")),
        "the scan's upstream edge is missing: {graph}"
    );
    // The backfilling fragment's progress is the record rw_fragment_backfill_progress serves.
    let backfill = graph["fragments"]
        .as_array()
        .and_then(|f| f.iter().find_map(|f| f["backfill"].as_object().cloned()))
        .context("no fragment of the graph backfills")?;
    let table = text_rows(
        &client,
        "SELECT fragment_id, backfill_type, upstream, actor_count \
         FROM rw_catalog.rw_fragment_backfill_progress WHERE job_name = 'slow'",
    )
    .await?;
    let served = [&backfill["state_table"], &backfill["kind"], &backfill["upstream"]]
        .map(|v| v.as_str().map_or(v.to_string(), str::to_owned));
    ensure!(
        table.len() == 1
            && table[0][..3] == served.map(Some)
            && table[0][3] == Some(backfill["actors"].to_string()),
        "the graph's backfill {backfill:?} is not rw_fragment_backfill_progress {table:?}"
    );

    // Read-only: unknown paths are 404, other methods 405, unknown jobs 404.
    ensure!(server.http("GET", "/nowhere").await?.0 == 404);
    ensure!(server.http("GET", "/api/graph/nowhere").await?.0 == 404);
    ensure!(server.http("POST", "/metrics").await?.0 == 405);
    ensure!(server.http("DELETE", "/api/jobs").await?.0 == 405);
    Ok(())
}

/// Where Debian installs Chromium; `.ci/run` installs it.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The DOM of `url` after its scripts ran, as headless Chromium serializes it.
async fn dump_dom(url: &str, profile: &Path) -> anyhow::Result<String> {
    let output = tokio::process::Command::new(CHROMIUM)
        .args(chromium_flags(profile))
        .arg("--virtual-time-budget=1000")
        .arg("--dump-dom")
        .arg(url)
        .kill_on_drop(true)
        .output();
    let output =
        tokio::time::timeout(Duration::from_secs(60), output).await.context("chromium hung")??;
    ensure!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// Headless, sandbox-free (tests run as root) and without any network of its own.
fn chromium_flags(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]
    .iter()
    .map(|f| f.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// The `value` of the progress bar of `job` in a dumped DOM.
fn progress_value(dom: &str, job: &str) -> Option<f64> {
    let tag = format!("<progress id=\"progress-{job}\"");
    let start = dom.find(&tag)?;
    let element = &dom[start..start + dom[start..].find('>')?];
    let value = element.split("value=\"").nth(1)?.split('"').next()?;
    value.parse().ok()
}

/// The status text of `job` in a dumped DOM.
fn status_text(dom: &str, job: &str) -> Option<String> {
    let tag = format!("id=\"status-{job}\">");
    let start = dom.find(&tag)? + tag.len();
    Some(dom[start..start + dom[start..].find('<')?].to_owned())
}

#[tokio::test]
async fn dashboard_in_chromium() -> anyhow::Result<()> {
    if !Path::new(CHROMIUM).exists() {
        eprintln!(
            "\n!!!!!!!! SKIPPED dashboard_in_chromium: {CHROMIUM} is missing. \
             Install Debian's chromium package (.ci/run does) to run the browser test. !!!!!!!!\n"
        );
        return Ok(());
    }
    let server = Sluice::start().await?;
    let outcome = dashboard_scenario(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn dashboard_scenario(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    // 100 k rows at 1000 rows/s per actor: the backfill outlasts the checks by far.
    slow_view(&client, 100_000, 1000).await?;
    let profile = tempfile::Builder::new().prefix("sluice-chromium-").tempdir()?;
    let url = format!("{}/?job=slow", server.http_url());
    // The job's progress bar grows between two loads of the page.
    let first = retry_until(Duration::from_secs(60), || async {
        let dom = dump_dom(&url, profile.path()).await?;
        let value = progress_value(&dom, "slow").context("no progress value yet")?;
        ensure!(value > 0.0, "progress is {value}");
        Ok(value)
    })
    .await?;
    let dom = retry_until(Duration::from_secs(60), || async {
        let dom = dump_dom(&url, profile.path()).await?;
        let value = progress_value(&dom, "slow").context("no progress value")?;
        ensure!(value > first, "progress stayed at {value} (was {first})");
        Ok(dom)
    })
    .await?;
    ensure!(status_text(&dom, "slow").as_deref() == Some("throttled"), "status of slow in\n{dom}");
    // One box per fragment of the job, as rw_fragments lists them.
    let fragments = text_rows(
        &client,
        "SELECT fragment_id FROM rw_catalog.rw_fragments WHERE job_name = 'slow' ORDER BY 1",
    )
    .await?;
    // (The page's script also holds the attribute's name, followed by code, not a digit.)
    let boxes = dom
        .match_indices("data-fragment=\"")
        .filter(|(at, m)| dom[at + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
        .count();
    ensure!(boxes == fragments.len(), "{boxes} boxes for {} fragments", fragments.len());
    for row in &fragments {
        let id = row[0].as_deref().context("fragment id")?;
        ensure!(dom.contains(&format!("data-fragment=\"{id}\"")), "no box for fragment {id}");
    }
    ensure!(dom.contains("<g class=\"fragment backfill\""), "the backfill is not highlighted");
    // Pausing the backfill shows as paused.
    client.batch_execute("ALTER MATERIALIZED VIEW slow SET BACKFILL_RATE_LIMIT = 0").await?;
    retry_until(Duration::from_secs(60), || async {
        let dom = dump_dom(&url, profile.path()).await?;
        match status_text(&dom, "slow") {
            Some(status) if status == "paused" => Ok(()),
            other => bail!("status is {other:?}"),
        }
    })
    .await?;
    // SLUICE_SCREENSHOT=path saves the page, for docs/observability.md.
    if let Ok(path) = std::env::var("SLUICE_SCREENSHOT") {
        client.batch_execute("ALTER MATERIALIZED VIEW slow SET BACKFILL_RATE_LIMIT = 2000").await?;
        let status = tokio::process::Command::new(CHROMIUM)
            .args(chromium_flags(profile.path()))
            .args(["--window-size=1280,860", "--virtual-time-budget=1000"])
            .arg(format!("--screenshot={path}"))
            .arg(&url)
            .status()
            .await?;
        ensure!(status.success(), "screenshot failed");
    }
    Ok(())
}
