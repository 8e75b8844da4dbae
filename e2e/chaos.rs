//! Exactly once under chaos: CDC tables and the views over them end up exactly equal to the
//! upstream Postgres after many rounds of SIGKILL, upstream restarts and crashes, and severed
//! upstream connections, while a writer keeps changing the upstream.
//!
//! The upstream database `shop` holds `acct` (bigint key; int, text, numeric and timestamptz
//! columns) and `pairs` (composite text-and-int key). Sluice follows both through one
//! `postgres-cdc` source with a rate-limited snapshot that spans the first rounds, and keeps
//! three views on top: an aggregate created up front (so it streams the CDC snapshot), and a
//! join and a min/max aggregate created at later rounds with rate-limited backfills. Kills thus
//! land in the CDC snapshot, in view backfills, and in steady streaming.
//!
//! A writer task on its own upstream connection makes about 1.5 k changes per second of every
//! kind: inserts (spread over the key space, ahead of and behind the snapshot's cursor),
//! updates of any column subset (TOASTed text values included, later left unchanged), updates
//! that change the key (to lower and to higher keys), deletes, `INSERT .. ON CONFLICT DO
//! UPDATE`, multi-statement and rolled-back transactions, and now and then a multi-thousand-row
//! transaction. It reconnects whenever the upstream goes away.
//!
//! Each round waits a random pause, then either SIGKILLs Sluice (sometimes with an extra burst
//! of upstream changes while it is down, one in three of them a `TRUNCATE` of `pairs` that
//! fills it again) or terminates Sluice's upstream sessions; sometimes it
//! also restarts the upstream (fast shutdown) or crashes it (immediate shutdown, which sends the
//! replication slot back to the last upstream checkpoint). After each round Sluice must still
//! run and checkpoint (`FLUSH`), and progress must never go back: neither a job's `rows_done`
//! in `rw_ddl_progress` nor the `row_count` persisted in a CDC table's backfill state.
//!
//! At the end the writer stops, the jobs finish, and each CDC table must equal its upstream
//! table row for row (missing, extra and differing keys are counted and printed), each view its
//! query; then once more after a last SIGKILL and restart.
//!
//! Size: by default 8 rounds over 30 k `acct` rows with pauses of 0.5 to 4 s (about a minute
//! on two cores). `SLUICE_CHAOS_ROUNDS` and `SLUICE_CHAOS_ROWS` make a long run (for example
//! 100 and 1500000), with pauses of 0.5 to 8 s once either is set. The round plan comes from a
//! xorshift generator seeded by `SLUICE_CHAOS_SEED` (else the clock); the seed is printed, and
//! setting it replays the same plan (the writer's interleaving still depends on timing).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_postgres::Client;

use crate::harness::{
    Rng, Sluice, assert_view_matches, connect, retry_until, text_rows, wait_jobs,
};
use crate::upstream::Upstream;

/// Rounds of the default (short) run.
const SHORT_ROUNDS: u32 = 8;
/// Initial `acct` rows of the default run.
const SHORT_ROWS: i64 = 30_000;
/// The pause before each round's fault, in milliseconds, short and long runs.
const SHORT_PAUSE_MS: (u64, u64) = (500, 4_000);
const LONG_PAUSE_MS: (u64, u64) = (500, 8_000);
/// Changes per second the writer aims at.
const WRITER_RATE: f64 = 1_500.0;
/// How long the writer may take to finish its unit once told to stop.
const WRITER_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `FLUSH` may take after a start.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(120);
/// Names of the initial `pairs` grid, and the extra names fresh rows may take.
const PAIR_NAMES: [&str; 2] = ["alpha", "Beta"];
const FRESH_PAIR_NAMES: [&str; 4] = ["alpha", "Beta", "Zeta", "ß-x"];

/// The size and randomness of one run.
struct Config {
    rounds: u32,
    rows: i64,
    seed: u64,
    pause_ms: (u64, u64),
}

impl Config {
    fn from_env() -> anyhow::Result<Self> {
        let rounds = env_number("SLUICE_CHAOS_ROUNDS")?;
        let rows = env_number("SLUICE_CHAOS_ROWS")?;
        let long = rounds.is_some() || rows.is_some();
        let seed = match env_number("SLUICE_CHAOS_SEED")? {
            Some(seed) => seed,
            None => SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64,
        };
        let config = Config {
            rounds: rounds.map_or(Ok(SHORT_ROUNDS), u32::try_from)?,
            rows: rows.map_or(Ok(SHORT_ROWS), i64::try_from)?,
            seed,
            pause_ms: if long { LONG_PAUSE_MS } else { SHORT_PAUSE_MS },
        };
        ensure!(config.rounds >= 1, "SLUICE_CHAOS_ROUNDS must be at least 1");
        ensure!(config.rows >= 1_000, "SLUICE_CHAOS_ROWS must be at least 1000");
        Ok(config)
    }

    /// Distinct join keys of the initial `pairs` grid; `acct.a` ranges over four times as many.
    fn pair_keys(&self) -> i64 {
        (self.rows / 20).max(10)
    }

    /// The mean time Sluice runs per round, in seconds: the pause plus about a second of
    /// restart and checks.
    fn mean_uptime(&self) -> f64 {
        (self.pause_ms.0 + self.pause_ms.1) as f64 / 2_000.0 + 1.0
    }

    /// Snapshot rows per second for `acct`, so that its snapshot spans about half the rounds.
    fn cdc_rate(&self) -> i64 {
        let rounds = f64::from((self.rounds / 2).max(2));
        ((self.rows as f64 / (rounds * self.mean_uptime())) as i64).max(200)
    }

    /// Backfill rows per second per actor for later views: about three rounds on two actors.
    fn view_rate(&self) -> i64 {
        ((self.rows as f64 / (6.0 * self.mean_uptime())) as i64).max(200)
    }
}

fn env_number(name: &str) -> anyhow::Result<Option<u64>> {
    match std::env::var(name) {
        Ok(text) => Ok(Some(text.trim().parse().with_context(|| format!("{name}={text}"))?)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(e).context(name.to_owned()),
    }
}

/// What the rounds did, for the summary line.
#[derive(Debug, Default)]
struct Tally {
    kills: u32,
    kills_in_cdc_snapshot: u32,
    kills_in_view_backfill: u32,
    kills_streaming: u32,
    upstream_restarts: u32,
    upstream_crashes: u32,
    terminations: u32,
    backends_terminated: u64,
    bursts_while_down: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_and_views_are_exact_under_chaos() -> anyhow::Result<()> {
    let config = Config::from_env()?;
    eprintln!(
        "chaos: seed {} ({} rounds, {} acct rows); replay with SLUICE_CHAOS_SEED={}",
        config.seed, config.rounds, config.rows, config.seed
    );
    let mut upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = chaos(&config, &mut upstream, &mut server).await;
    outcome.with_context(|| {
        format!("chaos seed {}\n{}\n{}", config.seed, server.log_tail(), upstream.log_tail())
    })
}

async fn chaos(
    config: &Config,
    upstream: &mut Upstream,
    server: &mut Sluice,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut rng = Rng::new(config.seed);
    let mut tally = Tally::default();
    let n = config.pair_keys();

    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(&format!(
        "SET TimeZone = 'UTC';
         CREATE TABLE acct (id bigint PRIMARY KEY, a int, b text, c numeric, d timestamptz);
         INSERT INTO acct SELECT 10 * i,
             CASE WHEN i % 97 = 0 THEN NULL ELSE (i::bigint * 7919) % {a_range} END,
             CASE WHEN i % 89 = 0 THEN NULL ELSE 'b' || i END,
             CASE WHEN i % 83 = 0 THEN NULL ELSE round(i / 100.0, 2) - 50 END,
             CASE WHEN i % 79 = 0 THEN NULL
                  ELSE timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second 1 microsecond' END
           FROM generate_series(1, {rows}) AS i;
         CREATE TABLE pairs (name text, n int, v int, PRIMARY KEY (name, n));
         INSERT INTO pairs SELECT nm, i, (i * 31) % 1000
           FROM unnest(ARRAY['{n0}', '{n1}']) AS nm, generate_series(0, {last}) AS i;",
        a_range = 4 * n,
        rows = config.rows,
        n0 = PAIR_NAMES[0],
        n1 = PAIR_NAMES[1],
        last = n - 1,
    ))
    .await?;
    drop(up);

    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    let cdc_rate = config.cdc_rate();
    client
        .batch_execute(&format!(
            "SET background_ddl = true;
             SET backfill_rate_limit = {cdc_rate};
             CREATE TABLE acct (*) WITH (snapshot.batch_size = '500') FROM pg TABLE 'public.acct';
             SET backfill_rate_limit = {};
             CREATE TABLE pairs (*) WITH (snapshot.batch_size = '100') FROM pg TABLE 'public.pairs';
             CREATE MATERIALIZED VIEW acct_by_k AS {ACCT_BY_K};",
            (cdc_rate / 10).max(100)
        ))
        .await?;
    eprintln!(
        "chaos: snapshot limited to {cdc_rate} rows/s (acct), {} (pairs); later views {} rows/s per actor",
        (cdc_rate / 10).max(100),
        config.view_rate()
    );
    drop(client);

    let mut writer = Writer::spawn(upstream.conn_string("shop"), config, rng.next());
    let join_round = (config.rounds / 4).max(1).min(config.rounds - 1);
    let late_agg_round = (config.rounds / 2).max(1).min(config.rounds - 1);
    let mut marks = BTreeMap::new();

    for round in 0..config.rounds {
        writer.check().await?;
        let client = server.connect().await?;
        let mut notes = Vec::new();
        for (at, name, sql) in [
            (join_round, "acct_pairs", ACCT_PAIRS),
            (late_agg_round, "pairs_by_name", PAIRS_BY_NAME),
        ] {
            if round == at {
                client
                    .batch_execute(&format!(
                        "SET background_ddl = true; SET backfill_rate_limit = {};
                         CREATE MATERIALIZED VIEW {name} AS {sql}",
                        config.view_rate()
                    ))
                    .await
                    .with_context(|| format!("create view {name} in round {round}"))?;
                notes.push(format!("created {name}"));
            }
        }
        // Pacing, not waiting for a condition: the fault lands after a random time.
        let pause = rng.between(config.pause_ms.0, config.pause_ms.1);
        tokio::time::sleep(Duration::from_millis(pause)).await;

        server.ensure_running().with_context(|| format!("round {round}: before the fault"))?;
        let before = observe_progress(&client).await?;
        check_monotone(&mut marks, &before, round, "before the fault")?;
        drop(client);

        let terminate_instead = round > 0 && rng.chance(20);
        let upstream_fault = rng.chance(30).then(|| rng.chance(50));
        let fault_while_down = rng.chance(50);
        let burst = rng.chance(50);
        let down_ms = rng.below(1_000);

        if terminate_instead {
            let killed = terminate_sluice_backends(upstream).await?;
            tally.terminations += 1;
            tally.backends_terminated += killed;
            notes.push(format!("terminated {killed} upstream sessions"));
            if let Some(crash) = upstream_fault {
                fault_upstream(upstream, crash, &mut tally, &mut notes).await?;
            }
        } else {
            if let Some(crash) = upstream_fault.filter(|_| !fault_while_down) {
                fault_upstream(upstream, crash, &mut tally, &mut notes).await?;
            }
            server.kill9().await?;
            tally.kills += 1;
            let creating: Vec<&str> = before
                .iter()
                .filter_map(|(name, _)| name.strip_prefix("rw_ddl_progress: "))
                .collect();
            if creating.iter().any(|s| s.starts_with("CREATE TABLE")) {
                tally.kills_in_cdc_snapshot += 1;
            }
            if creating.iter().any(|s| s.starts_with("CREATE MATERIALIZED VIEW")) {
                tally.kills_in_view_backfill += 1;
            }
            if creating.is_empty() {
                tally.kills_streaming += 1;
            }
            notes.push(format!("kill -9 after {pause} ms"));
            if burst {
                let truncated = burst_while_down(upstream, round, config, &mut rng).await?;
                tally.bursts_while_down += 1;
                notes.push(match truncated {
                    true => "burst while down, with a TRUNCATE of pairs".to_owned(),
                    false => "burst while down".to_owned(),
                });
            }
            if let Some(crash) = upstream_fault.filter(|_| fault_while_down) {
                fault_upstream(upstream, crash, &mut tally, &mut notes).await?;
                notes.push("(while sluice was down)".to_owned());
            }
            // Pacing: Sluice stays down a little while the writer goes on.
            tokio::time::sleep(Duration::from_millis(down_ms)).await;
            server.restart().await.with_context(|| format!("restart in round {round}"))?;
            let client = server.connect().await?;
            // Right after the start, before any checkpoint: what a user sees then.
            let early = observe_progress(&client).await?;
            check_monotone(&mut marks, &early, round, "right after the restart")?;
        }

        let client = server.connect().await?;
        tokio::time::timeout(FLUSH_TIMEOUT, client.batch_execute("FLUSH"))
            .await
            .with_context(|| format!("round {round}: FLUSH took over {FLUSH_TIMEOUT:?}"))?
            .with_context(|| format!("round {round}: FLUSH"))?;
        server.ensure_running().with_context(|| format!("round {round}: after FLUSH"))?;
        let after = observe_progress(&client).await?;
        check_monotone(&mut marks, &after, round, "after FLUSH")?;
        eprintln!(
            "chaos round {}/{} at {:.0?}: {}; progress {}",
            round + 1,
            config.rounds,
            started.elapsed(),
            notes.join(", "),
            describe_progress(&after)
        );
    }

    let stats = writer.stop().await?;
    eprintln!("chaos: writer done: {stats:?}");
    // Exactness of tables nobody changed would prove little.
    ensure!(stats.units >= 100, "the writer made only {} units of changes", stats.units);
    server.ensure_running()?;
    let client = server.connect().await?;
    // Full speed for whatever still backfills, so the wait is bounded.
    client
        .batch_execute(
            "ALTER TABLE acct SET BACKFILL_RATE_LIMIT = DEFAULT;
             ALTER TABLE pairs SET BACKFILL_RATE_LIMIT = DEFAULT;
             ALTER MATERIALIZED VIEW acct_pairs SET BACKFILL_RATE_LIMIT = DEFAULT;
             ALTER MATERIALIZED VIEW pairs_by_name SET BACKFILL_RATE_LIMIT = DEFAULT;",
        )
        .await?;
    let deadline = Duration::from_secs(180 + (config.rows / 5_000) as u64);
    wait_jobs(&client, deadline).await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute("SET TimeZone = 'UTC'").await?;

    let mut diffs = check_exact(&client, &up, deadline, "after the writer stopped").await;
    if diffs.is_ok() {
        // Once more after a last kill: recovery must not apply anything twice.
        server.kill9().await?;
        tally.kills += 1;
        server.restart().await?;
        let client = server.connect().await?;
        tokio::time::timeout(FLUSH_TIMEOUT, client.batch_execute("FLUSH"))
            .await
            .context("final FLUSH timed out")??;
        server.ensure_running()?;
        let after = observe_progress(&client).await?;
        check_monotone(&mut marks, &after, config.rounds, "after the last restart")?;
        diffs = check_exact(&client, &up, deadline, "after the last restart").await;
    }
    let (lost, extra, differing) = match &diffs {
        Ok(d) | Err((d, _)) => d.iter().fold((0, 0, 0), |(l, e, x), d| {
            (l + d.missing.len(), e + d.extra.len(), x + d.differing.len())
        }),
    };
    eprintln!(
        "chaos summary: seed {}, {} rounds, {} kills ({} in CDC snapshot, {} in view backfill, {} \
         streaming), {} upstream restarts, {} upstream crashes, {} backend terminations ({} \
         sessions), {} bursts while down, writer {} changes in {} units over {} sessions; rows \
         lost {lost}, extra {extra}, differing {differing}; {:.0?}",
        config.seed,
        config.rounds,
        tally.kills,
        tally.kills_in_cdc_snapshot,
        tally.kills_in_view_backfill,
        tally.kills_streaming,
        tally.upstream_restarts,
        tally.upstream_crashes,
        tally.terminations,
        tally.backends_terminated,
        tally.bursts_while_down,
        stats.changes,
        stats.units,
        stats.connections,
        started.elapsed(),
    );
    if let Err((_, error)) = diffs {
        return Err(error);
    }
    // The plan must have reached the snapshot: round 0 always kills, long before it can end.
    ensure!(
        tally.kills_in_cdc_snapshot >= 1,
        "no kill landed in the CDC snapshot: the rate limit is too high for this machine"
    );
    Ok(())
}

/// The views, and the queries they must equal.
const ACCT_BY_K: &str = "SELECT a % 10 AS k, count(*) AS n, sum(c) AS s FROM acct GROUP BY a % 10";
const ACCT_PAIRS: &str = "SELECT x.id, x.a, x.c, p.name, p.v FROM acct x JOIN pairs p ON x.a = p.n";
const PAIRS_BY_NAME: &str = "SELECT name, count(*) AS cnt, sum(v) AS s, min(n) AS lo, max(n) AS hi \
                             FROM pairs GROUP BY name";

/// A CDC table and how to read it on both sides, key columns first.
struct TableSpec {
    name: &'static str,
    key_columns: usize,
    ours: &'static str,
    theirs: String,
}

fn table_specs() -> [TableSpec; 2] {
    [
        TableSpec {
            name: "acct",
            key_columns: 1,
            ours: "SELECT id, a, b, c, d FROM acct",
            // `c`, an unconstrained numeric, with each value's display scale (`2.50`).
            theirs: "SELECT id, a, b, c, d FROM acct".to_owned(),
        },
        TableSpec {
            name: "pairs",
            key_columns: 2,
            ours: "SELECT name, n, v FROM pairs",
            theirs: "SELECT name, n, v FROM pairs".to_owned(),
        },
    ]
}

type Row = Vec<Option<String>>;

/// How a CDC table differs from its upstream table.
#[derive(Debug, Default, Clone)]
struct TableDiff {
    table: &'static str,
    ours: usize,
    theirs: usize,
    /// Upstream rows whose key Sluice lacks.
    missing: Vec<Row>,
    /// Sluice rows whose key the upstream lacks (or repeated keys).
    extra: Vec<Row>,
    /// Same key, other values: (Sluice's row, the upstream's).
    differing: Vec<(Row, Row)>,
}

impl TableDiff {
    fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.differing.is_empty()
    }

    fn describe(&self) -> String {
        const EXAMPLES: usize = 5;
        format!(
            "{}: {} rows in Sluice, {} upstream; {} missing (e.g. {:?}); {} extra (e.g. {:?}); \
             {} differing (Sluice, upstream; e.g. {:?})",
            self.table,
            self.ours,
            self.theirs,
            self.missing.len(),
            &self.missing[..self.missing.len().min(EXAMPLES)],
            self.extra.len(),
            &self.extra[..self.extra.len().min(EXAMPLES)],
            self.differing.len(),
            &self.differing[..self.differing.len().min(EXAMPLES)],
        )
    }
}

/// Compares one CDC table with its upstream table, key by key.
async fn diff_table(client: &Client, up: &Client, spec: &TableSpec) -> anyhow::Result<TableDiff> {
    let ours = text_rows(client, spec.ours).await?;
    let theirs = text_rows(up, &spec.theirs).await?;
    let mut diff = TableDiff {
        table: spec.name,
        ours: ours.len(),
        theirs: theirs.len(),
        ..Default::default()
    };
    let mut by_key: BTreeMap<Row, Row> = BTreeMap::new();
    for row in ours {
        let key = row[..spec.key_columns].to_vec();
        if let Some(old) = by_key.insert(key, row) {
            diff.extra.push(old);
        }
    }
    for row in theirs {
        match by_key.remove(&row[..spec.key_columns]) {
            None => diff.missing.push(row),
            Some(mine) if mine != row => diff.differing.push((mine, row)),
            Some(_) => {}
        }
    }
    diff.extra.extend(by_key.into_values());
    Ok(diff)
}

/// Waits (up to `deadline`) until both CDC tables equal their upstream tables and every view
/// its query. Returns the last table differences, with the error if they never vanished.
async fn check_exact(
    client: &Client,
    up: &Client,
    deadline: Duration,
    when: &str,
) -> Result<Vec<TableDiff>, (Vec<TableDiff>, anyhow::Error)> {
    let last = RefCell::new(Vec::new());
    let tables = retry_until(deadline, || async {
        let mut diffs = Vec::new();
        for spec in &table_specs() {
            diffs.push(diff_table(client, up, spec).await?);
        }
        let report: Vec<String> =
            diffs.iter().filter(|d| !d.is_empty()).map(TableDiff::describe).collect();
        *last.borrow_mut() = diffs;
        ensure!(report.is_empty(), "{}", report.join("\n"));
        Ok(())
    })
    .await;
    let views = match tables {
        Ok(()) => {
            retry_until(deadline, || async {
                assert_view_matches(client, "acct_by_k", ACCT_BY_K).await?;
                assert_view_matches(client, "acct_pairs", ACCT_PAIRS).await?;
                assert_view_matches(client, "pairs_by_name", PAIRS_BY_NAME).await
            })
            .await
        }
        Err(e) => Err(e),
    };
    let diffs = last.into_inner();
    match views {
        Ok(()) => {
            eprintln!("chaos: tables and views exact {when}");
            Ok(diffs)
        }
        Err(e) => Err((diffs, e.context(format!("not exactly once {when}")))),
    }
}

/// Progress a user can see: `rows_done` of each creating job (keyed `rw_ddl_progress: <ddl>`)
/// and the persisted `row_count` of each CDC backfill state table (keyed by its name).
async fn observe_progress(client: &Client) -> anyhow::Result<Vec<(String, i64)>> {
    let mut seen = Vec::new();
    let jobs = text_rows(client, "SELECT ddl_statement, rows_done FROM rw_catalog.rw_ddl_progress")
        .await?;
    for row in jobs {
        let statement = row[0].clone().unwrap_or_default();
        seen.push((format!("rw_ddl_progress: {statement}"), parse_count(&row[1])?));
    }
    let tables =
        text_rows(client, "SELECT name, job_name FROM rw_catalog.rw_internal_tables").await?;
    for row in tables {
        let (Some(name), job) = (row[0].clone(), row[1].clone()) else { continue };
        if !name.contains("streamcdcscan") {
            continue;
        }
        let sum =
            text_rows(client, &format!("SELECT coalesce(sum(row_count), 0) FROM {name}")).await?;
        let count = sum.first().context("no sum")?;
        let job = job.unwrap_or_default();
        seen.push((format!("{name} (of {job}): row_count"), parse_count(&count[0])?));
    }
    Ok(seen)
}

fn parse_count(value: &Option<String>) -> anyhow::Result<i64> {
    let text = value.as_deref().unwrap_or("0");
    text.parse().with_context(|| format!("a count of {text:?}"))
}

/// Fails if any progress value is below the highest seen before; raises the marks.
fn check_monotone(
    marks: &mut BTreeMap<String, i64>,
    seen: &[(String, i64)],
    round: u32,
    when: &str,
) -> anyhow::Result<()> {
    for (name, value) in seen {
        let mark = marks.entry(name.clone()).or_insert(*value);
        ensure!(
            *value >= *mark,
            "progress went back in round {round} ({when}): {name} was {mark}, now {value}"
        );
        *mark = *value;
    }
    Ok(())
}

fn describe_progress(seen: &[(String, i64)]) -> String {
    let parts: Vec<String> = seen
        .iter()
        .map(|(name, value)| {
            let short = match name.strip_prefix("rw_ddl_progress: ") {
                // `CREATE TABLE acct (..` or `CREATE MATERIALIZED VIEW v AS ..`: the name.
                Some(ddl) => {
                    let words: Vec<&str> = ddl.split_whitespace().collect();
                    let at = words.iter().position(|w| *w == "TABLE" || *w == "VIEW");
                    format!("creating {}", at.and_then(|i| words.get(i + 1)).unwrap_or(&"?"))
                }
                None => name.split(" (of ").nth(1).map_or_else(
                    || name.clone(),
                    |job| format!("{} state", job.trim_end_matches("): row_count")),
                ),
            };
            format!("{short}={value}")
        })
        .collect();
    if parts.is_empty() { "none".to_owned() } else { parts.join(", ") }
}

/// Terminates every upstream session Sluice holds; returns how many there were.
async fn terminate_sluice_backends(upstream: &Upstream) -> anyhow::Result<u64> {
    let admin = upstream.connect("postgres").await?;
    let rows = text_rows(
        &admin,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sluice'",
    )
    .await?;
    Ok(rows.iter().filter(|r| r[0].as_deref() == Some("t")).count() as u64)
}

/// Restarts the upstream with a fast shutdown, or crashes it (immediate shutdown) and starts it.
async fn fault_upstream(
    upstream: &mut Upstream,
    crash: bool,
    tally: &mut Tally,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    if crash {
        upstream.crash().await?;
        upstream.resume().await?;
        tally.upstream_crashes += 1;
        notes.push("upstream crash".to_owned());
    } else {
        upstream.restart().await?;
        tally.upstream_restarts += 1;
        notes.push("upstream restart".to_owned());
    }
    Ok(())
}

/// One transaction of a few thousand changes to both tables while Sluice is down; one in three
/// also truncates `pairs` and fills it again (returns whether it did).
async fn burst_while_down(
    upstream: &Upstream,
    round: u32,
    config: &Config,
    rng: &mut Rng,
) -> anyhow::Result<bool> {
    let span = config.rows * 10;
    let (x, y) = (rng.below_i64(span), rng.below_i64(span));
    let truncate = rng.below_i64(3) == 0;
    let base = -(i64::from(round) + 1) * 1_000_000;
    let refill = match truncate {
        true => format!(
            "TRUNCATE pairs;
             INSERT INTO pairs SELECT nm, i, (i * 37 + {round}) % 1000
               FROM unnest(ARRAY['{n0}', '{n1}']) AS nm, generate_series(0, {last}) AS i;",
            n0 = PAIR_NAMES[0],
            n1 = PAIR_NAMES[1],
            last = config.pair_keys() - 1,
        ),
        false => String::new(),
    };
    let sql = format!(
        "BEGIN;
         UPDATE acct SET c = coalesce(c, 0) - 1, b = 'down{round}' WHERE id >= {x} AND id < {x} + 20000;
         DELETE FROM acct WHERE id >= {y} AND id < {y} + 2000;
         INSERT INTO acct SELECT {base} - g, g % {a_range}, 'offline', g, now() FROM generate_series(1, 500) AS g;
         UPDATE pairs SET v = -v WHERE n % 13 = {m};
         {refill}
         COMMIT;",
        a_range = 4 * config.pair_keys(),
        m = round % 13,
    );
    // The writer may deadlock with it (the upstream aborts one side): try again.
    retry_until(Duration::from_secs(60), || async {
        let up = upstream.connect("shop").await?;
        up.batch_execute(&sql).await.context("burst while down")
    })
    .await?;
    Ok(truncate)
}

/// What the writer did.
#[derive(Debug, Default)]
struct WriterStats {
    units: u64,
    changes: u64,
    /// Sessions opened: the first and one after each upstream outage.
    connections: u64,
    transient_errors: u64,
}

/// The writer task and its stop flag; dropping it stops the task.
struct Writer {
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<anyhow::Result<WriterStats>>>,
}

impl Writer {
    fn spawn(conn: String, config: &Config, seed: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let changes = ChangeGen::new(config, seed);
        let task = tokio::spawn(write(conn, stop.clone(), changes));
        Writer { stop, task: Some(task) }
    }

    /// Fails if the writer has stopped on its own, with its error (it gives up only on an
    /// error it does not expect, such as a statement the upstream refuses).
    async fn check(&mut self) -> anyhow::Result<()> {
        if !self.task.as_ref().is_some_and(JoinHandle::is_finished) {
            return Ok(());
        }
        let task = self.task.take().context("writer already stopped")?;
        let stats = task.await.context("writer task")?.context("the writer failed")?;
        bail!("the writer stopped on its own after {stats:?}")
    }

    async fn stop(mut self) -> anyhow::Result<WriterStats> {
        self.stop.store(true, Ordering::Relaxed);
        let task = self.task.take().context("writer already stopped")?;
        // It checks the flag after each unit, and a unit takes at most a few seconds.
        tokio::time::timeout(WRITER_STOP_TIMEOUT, task)
            .await
            .context("the writer did not stop")?
            .context("writer task")?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The writer's loop: one unit of changes after another at about [`WRITER_RATE`] changes per
/// second, reconnecting whenever the upstream goes away, until `stop` is set.
async fn write(
    conn: String,
    stop: Arc<AtomicBool>,
    mut changes: ChangeGen,
) -> anyhow::Result<WriterStats> {
    let mut stats = WriterStats::default();
    let mut client: Option<Client> = None;
    let mut clock = Instant::now();
    let mut owed = 0.0f64; // changes made since `clock`
    while !stop.load(Ordering::Relaxed) {
        let Some(up) = client.as_ref() else {
            match connect(&conn).await {
                Ok(c) => {
                    client = Some(c);
                    stats.connections += 1;
                }
                // The upstream is restarting: back off and try again.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            continue;
        };
        let (sql, made) = changes.unit();
        match up.batch_execute(&sql).await {
            Ok(()) => {
                stats.units += 1;
                stats.changes += made;
            }
            Err(e) if transient(&e) => {
                stats.transient_errors += 1;
                client = None; // A failed transaction block or a dead session: start afresh.
            }
            Err(e) => bail!("writer: {e} ({:?}) in {sql}", e.code()),
        }
        // Pacing: hold the writer to its rate; after an outage, catch up at most a second.
        owed += made as f64;
        let due = clock + Duration::from_secs_f64(owed / WRITER_RATE);
        let now = Instant::now();
        if due > now {
            tokio::time::sleep(due - now).await;
        } else if now - due > Duration::from_secs(1) {
            clock = now;
            owed = 0.0;
        }
    }
    Ok(stats)
}

/// Errors the writer expects while the upstream restarts, crashes, or aborts a deadlock.
fn transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        None => true, // The connection is gone.
        Some(code) => ["08", "57", "40", "53"].iter().any(|class| code.code().starts_with(class)),
    }
}

/// Generates the writer's SQL. Keys never collide: inserts into gaps use `ON CONFLICT DO
/// NOTHING`, key changes into gaps check the target is free, and fresh keys come from counters
/// that only this writer uses.
struct ChangeGen {
    rng: Rng,
    /// Initial `acct` rows: ids 10, 20, .., 10 * rows (gaps between for inserts).
    rows: i64,
    /// Join keys of the initial `pairs` grid.
    pair_keys: i64,
    /// The next fresh high `acct` id (above every initial one).
    next_high: i64,
    /// The next fresh negative `acct` id (below everything, so behind any snapshot cursor).
    next_low: i64,
    /// The next fresh `pairs.n`.
    next_n: i64,
    tick: u64,
}

impl ChangeGen {
    fn new(config: &Config, seed: u64) -> Self {
        ChangeGen {
            rng: Rng::new(seed),
            rows: config.rows,
            pair_keys: config.pair_keys(),
            next_high: 10 * config.rows + 10,
            next_low: -1_000_000_000_000,
            next_n: config.pair_keys(),
            tick: 0,
        }
    }

    /// One unit of work: its SQL and roughly how many row changes it makes.
    fn unit(&mut self) -> (String, u64) {
        self.tick += 1;
        match self.rng.below(1000) {
            0..=2 => self.large(),
            3..=39 => self.multi_row(),
            40..=89 => {
                let count = 2 + self.rng.below(5);
                let (body, _) = self.ops(count);
                (format!("BEGIN; {body} ROLLBACK;"), 0)
            }
            90..=299 => {
                let count = 2 + self.rng.below(19);
                let (body, changes) = self.ops(count);
                (format!("BEGIN; {body} COMMIT;"), changes)
            }
            _ => self.ops(1),
        }
    }

    fn ops(&mut self, count: u64) -> (String, u64) {
        let body: Vec<String> = (0..count).map(|_| self.op()).collect();
        (body.join(" "), count)
    }

    /// One single-row statement.
    fn op(&mut self) -> String {
        let t = self.tick;
        match self.rng.below(100) {
            0..=14 => {
                let id = self.gap_id();
                let values = self.values();
                format!("INSERT INTO acct VALUES ({id}, {values}) ON CONFLICT (id) DO NOTHING;")
            }
            15..=19 => {
                let id = self.fresh_id();
                format!("INSERT INTO acct VALUES ({id}, {});", self.values())
            }
            20..=44 => {
                let id = self.target_id();
                let mut sets = Vec::new();
                while sets.is_empty() {
                    if self.rng.chance(40) {
                        sets.push(format!("a = {}", self.a()));
                    }
                    if self.rng.chance(30) {
                        sets.push(format!("b = {}", self.b()));
                    }
                    if self.rng.chance(40) {
                        sets.push("c = coalesce(c, 0) + 1.25".to_owned());
                    }
                    if self.rng.chance(25) {
                        sets.push(format!("d = {}", self.d()));
                    }
                }
                format!("UPDATE acct SET {} WHERE id = {id};", sets.join(", "))
            }
            45..=49 => {
                let (old, new) = (self.target_id(), self.gap_id());
                format!(
                    "UPDATE acct SET id = {new}, a = {} WHERE id = {old} \
                     AND NOT EXISTS (SELECT 1 FROM acct WHERE id = {new});",
                    self.a()
                )
            }
            50..=54 => {
                let (old, new) = (self.target_id(), self.fresh_id());
                format!("UPDATE acct SET id = {new} WHERE id = {old};")
            }
            55..=64 => format!("DELETE FROM acct WHERE id = {};", self.target_id()),
            65..=74 => {
                let id = self.target_id();
                format!(
                    "INSERT INTO acct VALUES ({id}, {}) ON CONFLICT (id) DO UPDATE \
                     SET a = excluded.a, c = coalesce(acct.c, 0) + coalesce(excluded.c, 0), d = excluded.d;",
                    self.values()
                )
            }
            75..=78 => {
                let name = FRESH_PAIR_NAMES[self.rng.below(4) as usize];
                let n = self.next_n;
                self.next_n += 1;
                format!("INSERT INTO pairs VALUES ('{name}', {n}, {t});")
            }
            79..=86 => {
                let (name, n) = self.pair_key();
                format!("UPDATE pairs SET v = v + 1 WHERE name = '{name}' AND n = {n};")
            }
            87..=90 => {
                let (name, n) = self.pair_key();
                let fresh = self.next_n;
                self.next_n += 1;
                format!("UPDATE pairs SET n = {fresh} WHERE name = '{name}' AND n = {n};")
            }
            91..=94 => {
                let (name, n) = self.pair_key();
                format!("DELETE FROM pairs WHERE name = '{name}' AND n = {n};")
            }
            _ => {
                let (name, n) = self.pair_key();
                format!(
                    "INSERT INTO pairs VALUES ('{name}', {n}, {t}) \
                     ON CONFLICT (name, n) DO UPDATE SET v = pairs.v + excluded.v;"
                )
            }
        }
    }

    /// A statement of tens to hundreds of rows.
    fn multi_row(&mut self) -> (String, u64) {
        let x = self.rng.below_i64(10 * self.rows);
        match self.rng.below(4) {
            0 => (
                format!(
                    "UPDATE acct SET c = coalesce(c, 0) + 1 WHERE id >= {x} AND id < {x} + 1000;"
                ),
                100,
            ),
            1 => {
                let base = self.next_high;
                self.next_high += 50;
                (
                    format!(
                        "INSERT INTO acct SELECT {base} + g, g % {}, 'm' || g, g * 0.25, \
                         timestamptz '2024-06-01 00:00:00+00' + g * interval '1.5 seconds' \
                         FROM generate_series(0, 49) AS g;",
                        4 * self.pair_keys
                    ),
                    50,
                )
            }
            2 => (format!("DELETE FROM acct WHERE id >= {x} AND id < {x} + 300;"), 30),
            _ => {
                let n = self.rng.below_i64(self.pair_keys);
                (format!("UPDATE pairs SET v = v - 1 WHERE n >= {n} AND n < {n} + 20;"), 40)
            }
        }
    }

    /// A transaction of thousands of rows.
    fn large(&mut self) -> (String, u64) {
        let t = self.tick;
        let x = self.rng.below_i64(10 * self.rows);
        match self.rng.below(3) {
            0 => (
                format!(
                    "UPDATE acct SET c = coalesce(c, 0) + 1, b = 'bulk{t}' WHERE id >= {x} AND id < {x} + 50000;"
                ),
                5_000,
            ),
            1 => {
                let base = self.next_high;
                self.next_high += 2_000;
                (
                    format!(
                        "INSERT INTO acct SELECT {base} + g, g % {}, 'big{t}', g, NULL \
                         FROM generate_series(0, 1999) AS g;",
                        4 * self.pair_keys
                    ),
                    2_000,
                )
            }
            _ => (
                format!(
                    "BEGIN; UPDATE pairs SET v = v + 2 WHERE n % 3 = {}; \
                     DELETE FROM acct WHERE id >= {x} AND id < {x} + 3000; COMMIT;",
                    t % 3
                ),
                (2 * self.pair_keys / 3 + 300) as u64,
            ),
        }
    }

    /// An id that probably exists: mostly initial ones, some gap and fresh ones.
    fn target_id(&mut self) -> i64 {
        match self.rng.below(10) {
            0 => self.gap_id(),
            1 => self.next_high - 1 - self.rng.below_i64(2_000),
            _ => 10 * (1 + self.rng.below_i64(self.rows)),
        }
    }

    /// An id in a gap between initial ids (taken or not).
    fn gap_id(&mut self) -> i64 {
        10 * (1 + self.rng.below_i64(self.rows)) + 1 + self.rng.below_i64(9)
    }

    /// An id nobody has used: above or below all others.
    fn fresh_id(&mut self) -> i64 {
        if self.rng.chance(50) {
            self.next_high += 1;
            self.next_high - 1
        } else {
            self.next_low -= 1;
            self.next_low + 1
        }
    }

    fn pair_key(&mut self) -> (&'static str, i64) {
        (PAIR_NAMES[self.rng.below(2) as usize], self.rng.below_i64(self.pair_keys))
    }

    /// Values for `a, b, c, d`.
    fn values(&mut self) -> String {
        format!("{}, {}, {}, {}", self.a(), self.b(), self.c(), self.d())
    }

    fn a(&mut self) -> String {
        if self.rng.chance(3) {
            return "NULL".to_owned();
        }
        self.rng.below_i64(4 * self.pair_keys).to_string()
    }

    fn b(&mut self) -> String {
        let t = self.tick;
        match self.rng.below(200) {
            0..=5 => "NULL".to_owned(),
            // Incompressible and over 2 kB: stored out of line (TOASTed) upstream.
            6 => format!(
                "(SELECT string_agg(md5(g::text || '{t}'), '') FROM generate_series(1, 100) AS g)"
            ),
            7..=20 => format!("'ünïcode {t}'"),
            _ => format!("'w{t}'"),
        }
    }

    fn c(&mut self) -> String {
        if self.rng.chance(3) {
            return "NULL".to_owned();
        }
        let sign = if self.rng.chance(30) { "-" } else { "" };
        format!("{sign}{}.{:02}", self.rng.below(100_000), self.rng.below(100))
    }

    fn d(&mut self) -> String {
        if self.rng.chance(3) {
            return "NULL".to_owned();
        }
        format!(
            "timestamptz '2024-01-01 00:00:00+00' + {} * interval '1 microsecond'",
            self.rng.below(100_000_000_000_000)
        )
    }
}
