//! The benchmark driver: Sluice beside Postgres on one machine, in one run.
//!
//! It starts a private Postgres (`wal_level = logical`) and a Sluice on a fresh data dir, loads
//! `t(id bigint primary key, a int, b int, c text, d text)` and `dim(id int primary key, name
//! text)` upstream, and measures:
//!
//! 1. the physical limit: a binary `SELECT *` of `t` over one connection (rows decoded) and
//!    `COPY t TO STDOUT`;
//! 2. the CDC backfill of `t` into Sluice, until `rw_ddl_progress` no longer lists it;
//! 3. three materialized views built by Postgres and by Sluice over their own copies;
//! 4. after 1% of `t` changes upstream: until Sluice's view shows it, beside `REFRESH
//!    MATERIALIZED VIEW`;
//! 5. freshness: a writer at a fixed rate of changes upstream, each row carrying its commit
//!    time; the lag until a Sluice view shows it, p50 and p99;
//! 6. Sluice's peak resident memory during 2 and 3;
//! 7. recovery: SIGKILL in the middle of a CDC backfill, restart: rows read again, and time
//!    until the backfill moves again;
//! 8. the same `t` in a private MariaDB (row binlog): a plain `SELECT *` through mysql_async
//!    (rows decoded), and the MySQL CDC backfill of it into Sluice.
//!
//! The same code runs as `bench/run` (release build, 10 M rows by default) and as a smoke test
//! of the e2e suite with a few thousand rows.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use futures::TryStreamExt;
use tokio_postgres::Client;

use crate::harness::{Sluice, text_rows};
use crate::mysql_upstream::MySqlUpstream;
use crate::upstream::Upstream;

/// What to run.
pub struct Options {
    /// Rows of `t`.
    pub rows: u64,
    /// Seconds each freshness rate runs.
    pub freshness_secs: f64,
    /// Sluice's `--barrier-interval-ms`: milliseconds between checkpoints.
    pub barrier_interval_ms: u64,
    /// Where to write the report (a Markdown section of `docs/benchmarks.md`), if anywhere.
    pub out: Option<PathBuf>,
    /// The command line, for the report.
    pub command: String,
}

/// Rows of `dim`, the join's dimension table.
const DIM_ROWS: u64 = 100_000;

/// The views of scenario 3, by name: an aggregate, an aggregate over a join, a filter, a top-N
/// per group, and an anti join with a scalar subquery.
const VIEWS: [(&str, &str); 5] = [
    ("q_a", "SELECT a, count(*) AS n, sum(b) AS sb FROM t WHERE b > 10 GROUP BY a"),
    (
        "q_b",
        "SELECT dim.name, count(*) AS n, sum(t.a) AS sa FROM t JOIN dim ON t.b = dim.id \
         GROUP BY dim.name",
    ),
    ("q_c", "SELECT id, a, c FROM t WHERE b % 2 = 0"),
    (
        "q_d",
        "SELECT a, id, b FROM (SELECT a, id, b, row_number() OVER (PARTITION BY a \
         ORDER BY b DESC, id) AS rn FROM t) x WHERE rn <= 3",
    ),
    (
        "q_e",
        "SELECT t.id, t.a FROM t WHERE NOT EXISTS (SELECT 1 FROM dim WHERE dim.id = t.b \
         AND dim.name < 'name2') AND t.a > (SELECT count(*) / 120 FROM dim)",
    ),
];

/// One line of the report.
struct Line {
    scenario: &'static str,
    metric: String,
    sluice: String,
    reference: String,
    ratio: String,
    target: &'static str,
}

/// Runs every scenario; returns the report as Markdown (also written to `options.out`).
pub async fn run(options: &Options) -> anyhow::Result<String> {
    let upstream = Upstream::start().await?;
    let mut sluice = Sluice::start_with_barrier_interval(options.barrier_interval_ms).await?;
    let outcome = scenarios(options, &upstream, &mut sluice).await;
    let lines =
        outcome.with_context(|| format!("{}\n{}", sluice.log_tail(), upstream.log_tail()))?;
    let version = text_rows(&upstream.connect("postgres").await?, "SHOW server_version").await?;
    let version = version[0][0].clone().unwrap_or_default();
    let report = render(options, &version, &lines);
    if let Some(path) = &options.out {
        write_section(path, &report)?;
    }
    Ok(report)
}

async fn scenarios(
    options: &Options,
    upstream: &Upstream,
    sluice: &mut Sluice,
) -> anyhow::Result<Vec<Line>> {
    let n = options.rows;
    let mut lines = Vec::new();
    upstream.create_database("bench").await?;
    let pg = upstream.connect("bench").await?;
    load_upstream(&pg, n).await?;

    // 1. The physical limit.
    let started = Instant::now();
    let mut rows = 0u64;
    let stream = pg.query_raw("SELECT * FROM t", std::iter::empty::<i32>()).await?;
    let mut stream = std::pin::pin!(stream);
    while let Some(row) = stream.try_next().await? {
        let _: (i64, i32, i32, &str, &str) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        rows += 1;
    }
    ensure!(rows == n, "SELECT * returned {rows} rows of {n}");
    let select_rate = rate(n, started.elapsed());
    let started = Instant::now();
    let copy = pg.copy_out("COPY t TO STDOUT").await?;
    let bytes: usize =
        copy.map_ok(|b| b.len()).try_fold(0, |a, b| async move { Ok(a + b) }).await?;
    let copy_rate = rate(n, started.elapsed());
    lines.push(line(
        "1 physical limit",
        "binary SELECT * (rows/s)",
        fmt_rate(select_rate),
        "",
        "",
        "",
    ));
    lines.push(line(
        "1 physical limit",
        &format!("COPY TO STDOUT (rows/s, {} MB)", bytes / 1_000_000),
        fmt_rate(copy_rate),
        "",
        "",
        "",
    ));

    // 2. CDC backfill, with memory sampled.
    let client = sluice.connect().await?;
    client
        .batch_execute(&format!(
            "CREATE SOURCE pg WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', \
             port = '{}', username = 'postgres', password = '', database.name = 'bench')",
            upstream.port()
        ))
        .await?;
    let memory = RssSampler::start(sluice.pid().context("sluice is not running")?);
    let started = Instant::now();
    client
        .batch_execute("SET background_ddl = true; CREATE TABLE t (*) FROM pg TABLE 'public.t'")
        .await?;
    wait_created(&client, "CREATE TABLE t ").await?;
    let cdc_time = started.elapsed();
    let cdc_rss = memory.stop();
    let cdc_rate = rate(n, cdc_time);
    let splits = text_rows(
        &client,
        "SELECT split_total_count FROM rw_catalog.rw_cdc_progress WHERE table_name = 't'",
    )
    .await?;
    let splits = splits.first().and_then(|r| r[0].clone()).unwrap_or_else(|| "?".into());
    lines.push(line(
        "2 CDC backfill",
        &format!(
            "CREATE TABLE t FROM pg, default: {splits} splits ({:.1} s)",
            cdc_time.as_secs_f64()
        ),
        fmt_rate(cdc_rate),
        fmt_rate(select_rate),
        format!("{:.2}x", cdc_rate / select_rate),
        ">= 0.5x",
    ));
    // The snapshot's epochs are merged out of level 0 once it finishes, in the background.
    let started = Instant::now();
    wait_storage_quiet(sluice).await?;
    lines.push(line(
        "2 CDC backfill",
        "then its level-0 files merged, in the background (s)",
        format!("{:.1}", started.elapsed().as_secs_f64()),
        "",
        "",
        "",
    ));
    let count = text_rows(&client, "SELECT count(*) FROM t").await?;
    ensure!(count[0][0].as_deref() == Some(&n.to_string()[..]), "Sluice's t has {count:?} rows");
    let cdc_line = lines.len() - 1;
    client
        .batch_execute(
            "SET background_ddl = false; CREATE TABLE dim (*) FROM pg TABLE 'public.dim'",
        )
        .await?;

    // 3. Materialized views: Postgres beside Sluice.
    let memory = RssSampler::start(sluice.pid().context("sluice is not running")?);
    let mut pg_times = Vec::new();
    for (name, query) in VIEWS {
        wait_storage_quiet(sluice).await?;
        let started = Instant::now();
        pg.batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {query}")).await?;
        let pg_time = started.elapsed();
        pg_times.push(pg_time);
        // Postgres's view went through its WAL: let Sluice's source pass it first, so the two
        // builds are timed on a quiet machine each.
        wait_slot_caught_up(&client).await?;
        let started = Instant::now();
        client.batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {query}")).await?;
        let our_time = started.elapsed();
        lines.push(line(
            "3 view backfill",
            &format!("{name} (s)"),
            format!("{:.2}", our_time.as_secs_f64()),
            format!("{:.2}", pg_time.as_secs_f64()),
            format!("{:.2}", our_time.as_secs_f64() / pg_time.as_secs_f64().max(1e-3)),
            "<= 1.0",
        ));
    }
    let view_rss = memory.stop();
    // q_b again, planned without eager aggregation (the default plans q_b with it; outside the
    // memory figure): the rewrite's before and after in one run.
    let started = Instant::now();
    client
        .batch_execute(&format!(
            "SET eager_aggregation = off; CREATE MATERIALIZED VIEW q_b_plain AS {}; \
             SET eager_aggregation = on",
            VIEWS[1].1
        ))
        .await?;
    let plain_time = started.elapsed();
    lines.push(line(
        "3 view backfill",
        "q_b, eager_aggregation = off (s)",
        format!("{:.2}", plain_time.as_secs_f64()),
        format!("{:.2}", pg_times[1].as_secs_f64()),
        format!("{:.2}", plain_time.as_secs_f64() / pg_times[1].as_secs_f64().max(1e-3)),
        "",
    ));
    for (name, _) in VIEWS {
        let ours = fingerprint(&client, name).await?;
        let theirs = fingerprint(&pg, name).await?;
        ensure!(ours == theirs, "view {name}: Sluice {ours:?}, Postgres {theirs:?}");
    }
    let plain = text_rows(&client, &fingerprint_sql("q_b", "q_b_plain")).await?;
    ensure!(plain == fingerprint(&pg, "q_b").await?, "q_b_plain: Sluice {plain:?}");
    client.batch_execute("DROP MATERIALIZED VIEW q_b_plain").await?;

    // 4. 1% of t changes upstream: incremental beside REFRESH.
    let before = fingerprint(&client, "q_a").await?;
    let started = Instant::now();
    pg.batch_execute("UPDATE t SET a = a + 1 WHERE id % 100 = 0").await?;
    let committed = started.elapsed();
    let expected = async {
        let query = format!("({}) AS v", VIEWS[0].1);
        let rows = text_rows(&pg, &fingerprint_sql("q_a", &query)).await?;
        anyhow::Ok(rows)
    };
    let seen = async {
        let mut samples = Vec::new();
        loop {
            let fp = fingerprint(&client, "q_a").await?;
            let changed = fp != before;
            samples.push((started.elapsed(), fp));
            if changed && samples.len() > 1 {
                // Keep sampling a little: a big transaction may arrive in parts.
                let last = &samples[samples.len() - 1].1;
                let prev = &samples[samples.len() - 2].1;
                if last == prev {
                    return anyhow::Ok(samples);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            ensure!(started.elapsed() < Duration::from_secs(600), "the change never arrived");
        }
    };
    let (expected, samples) = tokio::try_join!(expected, seen)?;
    let reflected = samples
        .iter()
        .find(|(_, fp)| *fp == expected)
        .map(|(t, _)| *t)
        .context("Sluice's q_a never equalled Postgres's query")?;
    let started = Instant::now();
    pg.batch_execute("REFRESH MATERIALIZED VIEW q_a").await?;
    let refresh = started.elapsed();
    let lag = reflected.saturating_sub(committed);
    lines.push(line(
        "4 incremental",
        &format!("q_a after {} rows change (s)", n / 100),
        format!("{:.2}", lag.as_secs_f64()),
        format!("{:.2}", refresh.as_secs_f64()),
        format!("{:.2}", lag.as_secs_f64() / refresh.as_secs_f64().max(1e-3)),
        "",
    ));

    // 5. Freshness.
    pg.batch_execute("CREATE TABLE fresh (id bigint PRIMARY KEY, ts bigint)").await?;
    client
        .batch_execute(
            "CREATE TABLE fresh (*) FROM pg TABLE 'public.fresh'; \
             CREATE MATERIALIZED VIEW fresh_mv AS SELECT max(ts) AS ts, count(*) AS n FROM fresh",
        )
        .await?;
    let mut next_id = 0u64;
    // Up to a rate beyond the target, to show where the change stream stops keeping up (the
    // highest rate with p99 <= 1 s lies between the last two that pass and fail).
    for per_second in [10_000u64, 50_000, 75_000, 100_000, 125_000, 150_000, 175_000, 200_000] {
        let (p50, p99, achieved) =
            freshness(upstream, &client, per_second, options.freshness_secs, &mut next_id).await?;
        lines.push(line(
            "5 freshness",
            &format!("{per_second} changes/s (achieved {achieved:.0}): lag p50 / p99 (ms)"),
            format!("{:.0} / {:.0}", p50 * 1000.0, p99 * 1000.0),
            "",
            "",
            "p99 <= 500 at 50 k/s",
        ));
    }

    // 6. Memory.
    lines.push(line("6 memory", "peak RSS during 2 (MB)", mb(cdc_rss), "", "", "<= 512"));
    lines.push(line("6 memory", "peak RSS during 3 (MB)", mb(view_rss), "", "", "<= 512"));

    // 7. Recovery: SIGKILL in the middle of a CDC backfill.
    client
        .batch_execute("SET background_ddl = true; CREATE TABLE t_r (*) FROM pg TABLE 'public.t'")
        .await?;
    let mut read_before = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        match rows_done(&client, "CREATE TABLE t_r ").await? {
            Some(done) if done >= n / 2 => {
                read_before = Some(done);
                break;
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            None => break,
        }
    }
    match read_before {
        Some(before) => {
            sluice.kill9().await?;
            let restarted = Instant::now();
            sluice.restart().await?;
            let client = sluice.connect().await?;
            let persisted = rows_done(&client, "CREATE TABLE t_r ").await?.unwrap_or(n);
            let moving = loop {
                match rows_done(&client, "CREATE TABLE t_r ").await? {
                    Some(done) if done > persisted => break restarted.elapsed(),
                    Some(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    None => break restarted.elapsed(),
                }
            };
            lines.push(line(
                "7 recovery",
                &format!("killed at {before} of {n} rows: rows read again"),
                before.saturating_sub(persisted).to_string(),
                "",
                "",
                "",
            ));
            lines.push(line(
                "7 recovery",
                "seconds from restart to the backfill moving",
                format!("{:.2}", moving.as_secs_f64()),
                "",
                "",
                "",
            ));
            wait_created(&client, "CREATE TABLE t_r ").await?;
        }
        None => lines.push(line(
            "7 recovery",
            "the backfill finished before the kill",
            "n/a".into(),
            "",
            "",
            "",
        )),
    }

    // 8. MySQL CDC backfill, beside a plain SELECT * of the same table.
    wait_storage_quiet(sluice).await?;
    lines.extend(mysql_backfill(&sluice.connect().await?, n).await?);

    // 2, again in parallel splits: last, as the tables it creates and drops leave compaction
    // work behind that would slow the scenarios after it. Listed under 2.
    let parallel = parallel_cdc(sluice, n, select_rate, splits.parse().ok()).await?;
    let after = lines.split_off(cdc_line + 1);
    lines.extend(parallel);
    lines.extend(after);
    Ok(lines)
}

/// Scenario 2 with `backfill.parallelism` 1, 2 and 4 but the default's (`default_splits`), each
/// into a table dropped afterwards.
async fn parallel_cdc(
    sluice: &Sluice,
    n: u64,
    select_rate: f64,
    default_splits: Option<u64>,
) -> anyhow::Result<Vec<Line>> {
    let client = &sluice.connect().await?;
    let mut lines = Vec::new();
    for parallelism in [1, 2, 4].into_iter().filter(|p| Some(*p) != default_splits) {
        // The table before was merged and dropped in the background.
        wait_storage_quiet(sluice).await?;
        let started = Instant::now();
        client
            .batch_execute(&format!(
                "SET background_ddl = true; CREATE TABLE tp (*) WITH (backfill.parallelism = \
                 '{parallelism}') FROM pg TABLE 'public.t'"
            ))
            .await?;
        wait_created(client, "CREATE TABLE tp ").await?;
        let time = started.elapsed();
        let count = text_rows(client, "SELECT count(*) FROM tp").await?;
        ensure!(count[0][0].as_deref() == Some(&n.to_string()[..]), "tp has {count:?} rows");
        client.batch_execute("DROP TABLE tp").await?;
        let rate = rate(n, time);
        lines.push(line(
            "2 CDC backfill",
            &format!("backfill.parallelism = {parallelism} ({:.1} s)", time.as_secs_f64()),
            fmt_rate(rate),
            fmt_rate(select_rate),
            format!("{:.2}x", rate / select_rate),
            ">= 0.5x",
        ));
    }
    Ok(lines)
}

/// Scenario 8: `t` in a private MariaDB, read by a plain `SELECT *` and by a CDC backfill.
async fn mysql_backfill(client: &Client, n: u64) -> anyhow::Result<Vec<Line>> {
    use mysql_async::prelude::Queryable;
    if !MySqlUpstream::available() {
        let skipped = line("8 MySQL CDC", "skipped: no mariadbd", "n/a".into(), "", "", "");
        return Ok(vec![skipped]);
    }
    let mysql = MySqlUpstream::start().await?;
    mysql
        .execute(&format!(
            "CREATE DATABASE bench;
             CREATE TABLE bench.t (id bigint PRIMARY KEY, a int, b int, c text, d text);
             INSERT INTO bench.t SELECT seq, seq % 1000, seq % {DIM_ROWS},
                 SUBSTR(MD5(seq), 1, 24), SUBSTR(MD5(seq + 1), 1, 9)
               FROM bench.seq_1_to_{n};"
        ))
        .await?;
    let mut conn = mysql.connect().await?;
    let started = Instant::now();
    let mut rows = 0u64;
    let mut result = conn.query_iter("SELECT * FROM bench.t").await?;
    let mut stream = result.stream::<(i64, i32, i32, String, String)>().await?.context("rows")?;
    while let Some(row) = futures::StreamExt::next(&mut stream).await {
        row?;
        rows += 1;
    }
    drop(stream);
    drop(result);
    ensure!(rows == n, "SELECT * returned {rows} rows of {n}");
    let select_rate = rate(n, started.elapsed());
    client
        .batch_execute(&format!(
            "CREATE SOURCE my WITH (connector = 'mysql-cdc', hostname = '127.0.0.1', \
             port = '{}', username = 'root', password = '', database.name = 'bench')",
            mysql.port()
        ))
        .await?;
    let started = Instant::now();
    client
        .batch_execute("SET background_ddl = true; CREATE TABLE mt (*) FROM my TABLE 'bench.t'")
        .await?;
    wait_created(client, "CREATE TABLE mt ").await?;
    let cdc_time = started.elapsed();
    let count = text_rows(client, "SELECT count(*) FROM mt").await?;
    ensure!(count[0][0] == Some(n.to_string()), "the MySQL CDC table holds {count:?} rows");
    let cdc_rate = rate(n, cdc_time);
    Ok(vec![
        line("8 MySQL CDC", "mysql_async SELECT * (rows/s)", fmt_rate(select_rate), "", "", ""),
        line(
            "8 MySQL CDC",
            &format!("CREATE TABLE mt FROM my ({:.1} s)", cdc_time.as_secs_f64()),
            fmt_rate(cdc_rate),
            fmt_rate(select_rate),
            format!("{:.2}x", cdc_rate / select_rate),
            ">= 0.5x",
        ),
    ])
}

/// Creates and fills `t` and `dim` upstream.
async fn load_upstream(pg: &Client, n: u64) -> anyhow::Result<()> {
    pg.batch_execute(&format!(
        "CREATE TABLE t (id bigint PRIMARY KEY, a int, b int, c text, d text);
         INSERT INTO t SELECT i, (i % 1000)::int, (i % {DIM_ROWS})::int,
             substr(md5(i::text), 1, 24), substr(md5((i + 1)::text), 1, 9)
         FROM generate_series(1, {n}) AS i;
         CREATE TABLE dim (id int PRIMARY KEY, name text);
         INSERT INTO dim SELECT i, 'name' || (i % 5000) FROM generate_series(0, {}) AS i;",
        DIM_ROWS - 1
    ))
    .await?;
    // One statement each: VACUUM cannot run in the implicit transaction of a batch.
    pg.batch_execute("VACUUM ANALYZE t").await?;
    pg.batch_execute("VACUUM ANALYZE dim").await?;
    Ok(())
}

/// Order-independent sums over the rows of view `name`'s query, read from `relation`.
fn fingerprint_sql(name: &str, relation: &str) -> String {
    match name {
        "q_a" => format!("SELECT count(*), sum(a * n), sum(sb) FROM {relation}"),
        "q_b" => format!("SELECT count(*), sum(n), sum(sa) FROM {relation}"),
        "q_d" => format!("SELECT count(*), sum(id), sum(b) FROM {relation}"),
        "q_e" => format!("SELECT count(*), sum(id), sum(a) FROM {relation}"),
        _ => format!("SELECT count(*), sum(id), sum(a), sum(length(c)) FROM {relation}"),
    }
}

/// The sums of [`fingerprint_sql`] over view `name`.
async fn fingerprint(client: &Client, name: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    text_rows(client, &fingerprint_sql(name, name)).await
}

/// `rows_done` of the creating job whose statement starts with `prefix`; `None` once created.
async fn rows_done(client: &Client, prefix: &str) -> anyhow::Result<Option<u64>> {
    let rows = text_rows(
        client,
        &format!(
            "SELECT rows_done FROM rw_catalog.rw_ddl_progress WHERE ddl_statement LIKE '{prefix}%'"
        ),
    )
    .await?;
    rows.first().map(|r| Ok(r[0].as_deref().unwrap_or("0").parse()?)).transpose()
}

/// Waits until the job whose statement starts with `prefix` is no longer creating.
async fn wait_created(client: &Client, prefix: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    while rows_done(client, prefix).await?.is_some() {
        ensure!(Instant::now() < deadline, "{prefix}.. did not finish within an hour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until the source's slot has less than 1 MB of WAL left to confirm.
async fn wait_slot_caught_up(client: &Client) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let rows =
            text_rows(client, "SELECT max(slot_lag_bytes) FROM rw_catalog.rw_cdc_progress").await?;
        let lag: i64 = rows[0][0].as_deref().unwrap_or("0").parse()?;
        if lag < 1 << 20 {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "the source is still {lag} bytes behind");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until Sluice's storage runs no compaction or flush and has none to schedule (its
/// `/metrics`, twice in a row 100 ms apart), so that a build is not timed beside background
/// work left by the one before (on either side: Postgres's views run on the same two cores).
async fn wait_storage_quiet(sluice: &Sluice) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut quiet_polls = 0;
    while quiet_polls < 2 {
        let (status, body) = sluice.http("GET", "/metrics").await?;
        ensure!(status == 200, "GET /metrics: {status}");
        let busy =
            ["running_compactions", "running_flushes", "compaction_pending"].iter().any(|m| {
                let name = format!("sluice_rocksdb_{m} ");
                body.lines().find_map(|l| l.strip_prefix(&name)).is_some_and(|v| v.trim() != "0")
            });
        quiet_polls = if busy { 0 } else { quiet_polls + 1 };
        ensure!(Instant::now() < deadline, "Sluice's storage is still compacting after 600 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Microseconds since the Unix epoch.
fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Writes `per_second` rows per second upstream for `secs` seconds while sampling how old the
/// newest row visible in `fresh_mv` is; returns the lag's p50 and p99 in seconds and the rate
/// the writer achieved.
async fn freshness(
    upstream: &Upstream,
    client: &Client,
    per_second: u64,
    secs: f64,
    next_id: &mut u64,
) -> anyhow::Result<(f64, f64, f64)> {
    const TICK: Duration = Duration::from_millis(10);
    let batch = (per_second / 100).max(1);
    let writer = upstream.connect("bench").await?;
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let start_id = *next_id;
    let write = {
        let (stop, written) = (stop.clone(), written.clone());
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(TICK);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut id = start_id;
            while !stop.load(Ordering::Relaxed) {
                ticker.tick().await;
                writer
                    .batch_execute(&format!(
                        "INSERT INTO fresh SELECT i, (extract(epoch FROM clock_timestamp()) * 1e6)::bigint \
                         FROM generate_series({id}, {}) AS i",
                        id + batch - 1
                    ))
                    .await?;
                id += batch;
                written.fetch_add(batch, Ordering::Relaxed);
            }
            anyhow::Ok(id)
        })
    };
    let started = Instant::now();
    let mut lags = Vec::new();
    while started.elapsed().as_secs_f64() < secs {
        let rows = text_rows(client, "SELECT ts FROM fresh_mv").await?;
        if let Some(ts) =
            rows.first().and_then(|r| r[0].as_deref()).and_then(|t| t.parse::<i64>().ok())
            && ts >= 0
            && started.elapsed() > Duration::from_millis(500)
        {
            lags.push((now_us() - ts) as f64 / 1e6);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    *next_id = write.await??;
    let achieved = written.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    ensure!(!lags.is_empty(), "no freshness sample");
    lags.sort_by(f64::total_cmp);
    let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.5), at(0.99), achieved))
}

/// Samples a process's resident memory every 100 ms until stopped; keeps the peak.
struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                if let Some(kb) = rss_kb(pid) {
                    p.fetch_max(kb, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { peak, stop }
    }

    /// The peak resident memory seen, in kB.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.peak.load(Ordering::Relaxed)
    }
}

/// `VmRSS` of a process, in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rate(rows: u64, elapsed: Duration) -> f64 {
    rows as f64 / elapsed.as_secs_f64().max(1e-6)
}

fn fmt_rate(rate: f64) -> String {
    format!("{:.0} k", rate / 1000.0)
}

fn mb(kb: u64) -> String {
    format!("{}", kb / 1024)
}

fn line(
    scenario: &'static str,
    metric: &str,
    sluice: String,
    reference: impl Into<String>,
    ratio: impl Into<String>,
    target: &'static str,
) -> Line {
    Line {
        scenario,
        metric: metric.to_owned(),
        sluice,
        reference: reference.into(),
        ratio: ratio.into(),
        target,
    }
}

/// The machine: cores, CPU model, memory.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_owned(), |m| m.trim().to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gb = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024 / 1024);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cores} cores ({model}), {mem_gb} GiB")
}

fn render(options: &Options, pg_version: &str, lines: &[Line]) -> String {
    let mut out = String::new();
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let _ = writeln!(out, "### `{}`: {} rows\n", options.command, options.rows);
    let _ = writeln!(out, "{date}, {}; Postgres {pg_version}.\n", machine());
    let _ = writeln!(out, "| scenario | metric | Sluice | Postgres / limit | ratio | target |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for l in lines {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            l.scenario, l.metric, l.sluice, l.reference, l.ratio, l.target
        );
    }
    out
}

const BEGIN: &str = "<!-- bench/run: begin -->";
const END: &str = "<!-- bench/run: end -->";

/// Replaces the generated section of `path` (between the markers) with `report`.
fn write_section(path: &PathBuf, report: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let section = format!("{BEGIN}\n{report}{END}");
    let updated = match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{section}{}", &text[..b], &text[e + END.len()..]),
        _ => format!("{text}\n{section}\n"),
    };
    std::fs::write(path, updated).with_context(|| format!("write {}", path.display()))
}
