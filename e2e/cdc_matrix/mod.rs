//! A differential test matrix for CDC tables: generated upstream tables over the cross product
//! of column types ([`space::ColType`]: extreme values, NULLs, values large enough to TOAST),
//! key shapes ([`space::KeyShape`]: integers, text in byte order and under a non-C
//! collation, composite, uuid, numeric) and replica identities (DEFAULT, FULL), changed by
//! every kind of event ([`case::Case::event`]: inserts, updates of some columns, updates that
//! leave a TOASTed value alone, key-changing updates, deletes, upserts, multi-row updates,
//! truncates, transactions, rolled-back ones) before the snapshot, during it (small pages and a
//! rate limit, so changes land on both sides of the cursor), after it, and while Sluice is
//! down, with SIGKILLs at random points (right after CREATE too) and upstream restarts.
//!
//! At the end, three tables in ten get an upstream schema change (a column added after the
//! others, dropped with a change after it or none, renamed, retyped, dropped and added again;
//! the table dropped, or created again). After the last comparison each table that stopped at
//! its change is built again by `ALTER TABLE .. REFRESH SCHEMA` and must hold as many rows as
//! its upstream table (refused where that table is gone), or stop at a value it cannot hold.
//!
//! Both upstreams: Postgres, and MariaDB (its own column types and key collations, binary and
//! case-blind, and SIGKILLs right after `CREATE` more often).
//!
//! Oracle: once the upstream is quiet, every CDC table equals its upstream table row for row,
//! every value as the upstream prints it (an unconstrained numeric with each value's display
//! scale, `1.50`; NaN, the infinities and numerics of up to 76 digits exactly), or
//! has followed a column added or dropped (the dropped one gone from `SELECT *`), or
//! has stopped with the expected clear error (a schema change it cannot follow, an
//! unconstrained numeric beyond Sluice's 56 integer and 20 fraction digits); and again after a
//! last SIGKILL. Each
//! difference is a finding, reported with its case (key, columns, identity, batch size) and
//! seeds.
//!
//! Size: `cargo test` runs [`SHORT_CASES`] cases in one run per upstream.
//! `SLUICE_MATRIX_CASES=1000` is the long run, in runs of `SLUICE_MATRIX_PER_RUN` cases (default [`PER_RUN`]) sharing one upstream
//! and one Sluice. `SLUICE_MATRIX_SEED=s` replays a run (its plan and every case's statements;
//! the interleaving with Sluice's checkpoints still depends on timing) and
//! `SLUICE_MATRIX_ONLY=i` keeps only case `i` of it.

mod case;
mod space;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use tokio_postgres::Client;

use crate::harness::{Rng, Sluice, retry_until, sorted, text_rows};
use crate::mysql_upstream::{MySqlUpstream, sorted_text};
use crate::upstream::Upstream;
use case::{Case, Expect, key_of, short};
use mysql_async::prelude::Queryable;
use space::ColType;

/// Cases of the default run.
const SHORT_CASES: usize = 14;
/// Cases sharing one upstream and one Sluice in a long run.
const PER_RUN: usize = 25;
/// Rounds of changes while the snapshot runs, at most (one change per table each).
const DURING_ROUNDS: usize = 40;
/// How long a table may take to equal its upstream once the upstream is quiet.
const CONVERGE: Duration = Duration::from_secs(90);

#[tokio::test]
async fn cdc_tables_equal_their_upstream_across_the_matrix() -> anyhow::Result<()> {
    matrix(false).await
}

#[tokio::test]
async fn mysql_cdc_tables_equal_their_upstream_across_the_matrix() -> anyhow::Result<()> {
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    matrix(true).await
}

/// The matrix over a Postgres upstream, or a MariaDB one when `mysql`.
async fn matrix(mysql: bool) -> anyhow::Result<()> {
    let config = Config::from_env()?;
    eprintln!(
        "cdc matrix: seed {} ({} cases, {} a run); replay with SLUICE_MATRIX_SEED={}",
        config.seed, config.cases, config.per_run, config.seed
    );
    let mut findings = Vec::new();
    let runs = config.cases.div_ceil(config.per_run);
    for run in 0..runs {
        let seed = config.seed.wrapping_add(run as u64);
        let cases = config.per_run.min(config.cases - run * config.per_run);
        let found = run_once(mysql, seed, cases, config.only)
            .await
            .with_context(|| format!("run {run} (SLUICE_MATRIX_SEED={seed})"))?;
        findings.extend(found);
    }
    ensure!(
        findings.is_empty(),
        "{} of {} cases differ from their upstream:\n{}",
        findings.len(),
        config.cases,
        findings.join("\n")
    );
    Ok(())
}

/// The run's size and seed, from the environment.
struct Config {
    seed: u64,
    cases: usize,
    per_run: usize,
    only: Option<usize>,
}

impl Config {
    fn from_env() -> anyhow::Result<Self> {
        let number = |name: &str| -> anyhow::Result<Option<u64>> {
            match std::env::var(name) {
                Ok(v) => Ok(Some(v.parse().with_context(|| format!("{name}={v}"))?)),
                Err(_) => Ok(None),
            }
        };
        let clock = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
        let cases = number("SLUICE_MATRIX_CASES")?.unwrap_or(SHORT_CASES as u64) as usize;
        let per_run = number("SLUICE_MATRIX_PER_RUN")?.map_or(PER_RUN, |n| n as usize);
        ensure!(cases >= 1 && per_run >= 1, "SLUICE_MATRIX_CASES and _PER_RUN must be at least 1");
        Ok(Self {
            seed: number("SLUICE_MATRIX_SEED")?.unwrap_or(clock % 1_000_000_007),
            cases,
            per_run: per_run.min(cases),
            only: number("SLUICE_MATRIX_ONLY")?.map(|n| n as usize),
        })
    }
}

/// A case's seed within run `seed`.
fn case_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(index as u64)
}

/// The upstream server of a run.
enum Site {
    Pg(Upstream),
    My(MySqlUpstream),
}

impl Site {
    async fn start(mysql: bool) -> anyhow::Result<Self> {
        Ok(match mysql {
            true => Site::My(MySqlUpstream::start().await?),
            false => Site::Pg(Upstream::start().await?),
        })
    }

    /// Creates database `shop` and opens the session the cases' statements run on.
    async fn session(&self) -> anyhow::Result<Up> {
        match self {
            Site::Pg(pg) => {
                pg.create_database("shop").await?;
                let client = pg.connect("shop").await?;
                client.batch_execute("SET TimeZone = 'UTC'").await?;
                Ok(Up::Pg(client))
            }
            Site::My(my) => {
                my.execute("CREATE DATABASE shop CHARACTER SET utf8mb4").await?;
                let mut conn = my.connect().await?;
                // Standard string literals, as the cases write them; timestamps in UTC.
                conn.query_drop(
                    "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'), \
                     time_zone = '+00:00'",
                )
                .await?;
                Ok(Up::My(conn))
            }
        }
    }

    fn source_sql(&self) -> String {
        match self {
            Site::Pg(pg) => pg.source_sql("src", ""),
            Site::My(my) => my.source_sql("src", ", server.id = '5499'"),
        }
    }

    /// The upstream name of `case`'s table in `CREATE TABLE .. FROM src TABLE '..'`.
    fn external(&self, case: &Case) -> String {
        match self {
            Site::Pg(_) => format!("public.{}", case.table()),
            Site::My(_) => case.table(),
        }
    }

    fn log_tail(&self) -> String {
        match self {
            Site::Pg(pg) => pg.log_tail(),
            Site::My(my) => my.log_tail(),
        }
    }
}

/// A session on the upstream.
enum Up {
    Pg(Client),
    My(mysql_async::Conn),
}

impl Up {
    /// Runs `sql`; a statement that waits a minute (on a lock Sluice holds upstream, say)
    /// fails rather than hang the run.
    async fn exec(&mut self, sql: &str) -> anyhow::Result<()> {
        let run = async {
            match self {
                Up::Pg(client) => Ok(client.batch_execute(sql).await?),
                Up::My(conn) => Ok(conn.query_drop(sql).await?),
            }
        };
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .with_context(|| format!("the upstream did not finish {sql} within a minute"))?
    }

    /// The rows of `sql` as text, sorted.
    async fn rows(&mut self, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
        match self {
            Up::Pg(client) => sorted(client, sql).await,
            Up::My(conn) => Ok(sorted_text(conn.query(sql).await?)),
        }
    }

    /// The select list and table of `case` as they read upstream.
    fn query(&self, case: &Case) -> String {
        match self {
            Up::Pg(_) => format!("SELECT {} FROM {}", case.select_list(true), case.upstream()),
            Up::My(_) => format!("SELECT {} FROM {}", case.mysql_select_list(), case.upstream()),
        }
    }
}

/// One run: `n` cases on one upstream and one Sluice. Returns the findings.
async fn run_once(
    mysql: bool,
    seed: u64,
    n: usize,
    only: Option<usize>,
) -> anyhow::Result<Vec<String>> {
    let site = Site::start(mysql).await?;
    let mut server = Sluice::start().await?;
    let outcome = drive(&site, &mut server, seed, n, only).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), site.log_tail()))
}

async fn drive(
    site: &Site,
    server: &mut Sluice,
    seed: u64,
    n: usize,
    only: Option<usize>,
) -> anyhow::Result<Vec<String>> {
    let mut rng = Rng::new(seed);
    let mut up = site.session().await?;
    let mysql = matches!(site, Site::My(_));
    let types: &[ColType] = if mysql { &ColType::MYSQL } else { &ColType::ALL };
    let mut cases: Vec<Case> = (0..n)
        .filter(|i| only.is_none_or(|o| o == *i))
        .map(|i| Case::new(i, case_seed(seed, i), types, mysql))
        .collect();
    for case in &mut cases {
        up.exec(&case.ddl()).await.with_context(|| case.describe())?;
        if case.initial_rows > 0 {
            let insert = case.insert(case.initial_rows);
            up.exec(&insert).await.with_context(|| insert.clone())?;
        }
    }
    let client = server.connect().await?;
    client.batch_execute(&site.source_sql()).await?;
    client
        .batch_execute(&format!(
            "SET background_ddl = true; SET backfill_rate_limit = {}",
            rng.between(20, 120)
        ))
        .await?;
    for case in &cases {
        client
            .batch_execute(&format!(
                "CREATE TABLE {t} (*) WITH (snapshot.batch_size = '{b}') FROM src TABLE '{e}'",
                t = case.table(),
                b = case.batch_size,
                e = site.external(case)
            ))
            .await
            .with_context(|| case.describe())?;
    }
    // The plan of faults: right after CREATE (before any change is recorded) more often on
    // MySQL, where the source's first position once was lost that way.
    let mut client = client;
    if rng.chance(if mysql { 35 } else { 15 }) {
        server.kill9().await?;
        server.restart().await?;
        client = server.connect().await?;
    }
    let kill_at = rng.chance(50).then(|| rng.below(DURING_ROUNDS as u64 / 2) as usize);
    for round in 0..DURING_ROUNDS {
        changes(&mut up, &mut cases).await?;
        if kill_at == Some(round) {
            server.kill9().await?;
            for _ in 0..rng.between(1, 3) {
                changes(&mut up, &mut cases).await?;
            }
            server.restart().await?;
            client = server.connect().await?;
        }
        if creating(&client).await? == 0 {
            break;
        }
    }
    for case in &cases {
        client
            .batch_execute(&format!(
                "ALTER TABLE {} SET BACKFILL_RATE_LIMIT = DEFAULT",
                case.table()
            ))
            .await?;
    }
    settled(&client).await?;
    let kill_after = rng.chance(30).then(|| rng.below(5) as usize);
    // Now and then a table reads its upstream again in place (`RESNAPSHOT`) while changes go
    // on, a kill maybe among them: it must still equal its upstream.
    let resnapshot_at = rng.chance(40).then(|| rng.below(5) as usize);
    for round in 0..5 {
        changes(&mut up, &mut cases).await?;
        if resnapshot_at == Some(round) && !cases.is_empty() {
            let at = rng.below(cases.len() as u64) as usize;
            let case = &mut cases[at];
            let sql = format!("ALTER TABLE {} RESNAPSHOT", case.table());
            client.batch_execute(&sql).await.with_context(|| case.describe())?;
            case.note(sql);
        }
        if kill_after == Some(round) {
            server.kill9().await?;
            changes(&mut up, &mut cases).await?;
            server.restart().await?;
            client = server.connect().await?;
        }
    }
    // Upstream schema changes, now and then: each table follows or stops with its reason.
    let mut expect = vec![Expect::Follow; cases.len()];
    for (i, case) in cases.iter_mut().enumerate() {
        if case.schema_changes {
            let (sql, outcome) = case.schema_change();
            up.exec(&sql).await.with_context(|| format!("{}: {sql}", case.describe()))?;
            expect[i] = outcome;
            case.note(format!("then {sql}"));
        }
    }
    let mut findings = compare(&client, &mut up, &cases, &expect, seed).await?;
    if findings.is_empty() {
        server.kill9().await?;
        server.restart().await?;
        let client = server.connect().await?;
        findings = compare(&client, &mut up, &cases, &expect, seed).await?;
        findings.iter_mut().for_each(|f| f.push_str(" (after the last SIGKILL)"));
    }
    if findings.is_empty() {
        let client = server.connect().await?;
        findings = refreshed(&client, &mut up, &cases, &expect).await?;
    }
    server.ensure_running()?;
    if !findings.is_empty() {
        findings.push(format!("  the run's log:\n{}", server.log_tail()));
    }
    Ok(findings)
}

/// `ALTER TABLE .. REFRESH SCHEMA` of every table that stopped at its schema change: each is
/// built again from its upstream table as it is now and holds its rows (their count); one
/// whose upstream table is gone is refused. A finding per table that does not.
async fn refreshed(
    client: &Client,
    up: &mut Up,
    cases: &[Case],
    expect: &[Expect],
) -> anyhow::Result<Vec<String>> {
    let mut findings = Vec::new();
    let mut rebuilt = Vec::new();
    client.batch_execute("SET background_ddl = true").await?;
    for (case, _) in cases.iter().zip(expect).filter(|(_, e)| **e == Expect::Stop) {
        let count = format!("SELECT count(*) FROM {}", case.upstream());
        let upstream_rows = up.rows(&count).await.ok();
        let refresh = format!("ALTER TABLE {} REFRESH SCHEMA", case.table());
        match (client.batch_execute(&refresh).await, upstream_rows) {
            (Ok(()), Some(rows)) => rebuilt.push((case, rows)),
            (Err(_), None) => {}
            (Ok(()), None) => findings.push(format!(
                "  {}: REFRESH SCHEMA passed with the upstream table gone",
                case.describe()
            )),
            (Err(e), Some(_)) => {
                findings.push(format!("  {}: REFRESH SCHEMA failed: {e:?}", case.describe()));
            }
        }
    }
    client.batch_execute("SET background_ddl = false").await?;
    for (case, theirs) in rebuilt {
        let sql = format!("SELECT count(*) FROM {}", case.table());
        let progress = format!(
            "SELECT backfill_finished, rows_done, upstream_offset, table_error FROM \
             rw_catalog.rw_cdc_progress WHERE table_name = '{}'",
            case.table()
        );
        let done = retry_until(CONVERGE, || async {
            let progress = text_rows(client, &progress).await?;
            if let Some(e) = progress.first().and_then(|r| r[3].as_deref())
                && case.cannot_hold(e)
            {
                // A value Sluice cannot hold stops the rebuilt table as it stopped the first.
                return Ok(());
            }
            let ours = text_rows(client, &sql).await?;
            ensure!(
                ours == theirs,
                "{ours:?} rows, the upstream {theirs:?}; progress {progress:?}"
            );
            ensure!(progress.len() == 1 && progress[0][3].is_none(), "stopped again: {progress:?}");
            Ok(())
        })
        .await;
        if let Err(e) = done {
            findings.push(format!("  {}: after REFRESH SCHEMA: {e:#}", case.describe()));
        }
    }
    Ok(findings)
}

/// One change to every table.
async fn changes(up: &mut Up, cases: &mut [Case]) -> anyhow::Result<()> {
    for case in cases {
        let sql = case.event();
        if let Err(e) = up.exec(&sql).await {
            // A failed statement is the generator's bug: say which.
            up.exec("ROLLBACK").await.ok();
            bail!("{}: upstream refused {sql}: {e}", case.describe());
        }
    }
    Ok(())
}

/// Waits until every job has finished or stopped (a table that cannot hold a value).
async fn settled(client: &Client) -> anyhow::Result<()> {
    retry_until(Duration::from_secs(120), || async {
        let statuses = text_rows(client, "SELECT status FROM rw_catalog.rw_ddl_progress").await?;
        let running: Vec<_> = statuses
            .iter()
            .filter(|r| !r[0].as_deref().unwrap_or("").starts_with("stopped"))
            .collect();
        ensure!(running.is_empty(), "jobs still creating: {running:?}");
        Ok(())
    })
    .await
}

/// How many jobs are still creating.
async fn creating(client: &Client) -> anyhow::Result<usize> {
    Ok(text_rows(client, "SELECT ddl_id FROM rw_catalog.rw_ddl_progress").await?.len())
}

/// Waits for every table to equal its upstream (on the columns it was created with), or to
/// stop with its reason where it must, all within one [`CONVERGE`]; a finding per table that
/// never does.
async fn compare(
    client: &Client,
    up: &mut Up,
    cases: &[Case],
    expect: &[Expect],
    seed: u64,
) -> anyhow::Result<Vec<String>> {
    let pending: Vec<(usize, String)> =
        (0..cases.len()).map(|i| (i, "not compared yet".to_owned())).collect();
    let state = tokio::sync::Mutex::new((up, pending));
    // Every table is checked again in each round, until all are where they must be.
    let _ = retry_until(CONVERGE, || async {
        let mut state = state.lock().await;
        let (up, pending) = &mut *state;
        let mut still = Vec::new();
        for (i, _) in std::mem::take(pending) {
            if let Err(e) = check(client, up, &cases[i], expect[i]).await {
                still.push((i, format!("{e:#}")));
            }
        }
        *pending = still;
        ensure!(pending.is_empty(), "{} tables differ", pending.len());
        Ok(())
    })
    .await;
    let (up, pending) = state.into_inner();
    let mut findings = Vec::new();
    if !pending.is_empty() {
        // Where the source and each table stood, once, for a stall.
        let sql = "SELECT table_name, backfill_finished, upstream_offset, slot_lag_bytes, \
                   source_error, table_error FROM rw_catalog.rw_cdc_progress ORDER BY table_name";
        let rows = text_rows(client, sql).await.map(|r| format!("{r:?}"));
        findings.push(format!("  cdc progress: {}", rows.unwrap_or_else(|e| e.to_string())));
        // Which job each actor runs, for a checkpoint the log says waits for some.
        let actors = text_rows(client, "SELECT * FROM rw_catalog.rw_actors").await;
        let actors = actors.map(|r| format!("{r:?}")).unwrap_or_else(|e| e.to_string());
        findings.push(format!("  actors: {actors}"));
        // Sluice's sessions upstream: one waiting on a lock, or idle in a transaction.
        let sessions = match up {
            Up::Pg(_) => {
                "SELECT pid, application_name, state, wait_event_type, wait_event, \
                 left(query, 100), (SELECT string_agg(mode || ' on ' || relation::regclass::text \
                 || CASE WHEN granted THEN '' ELSE ' (waiting)' END, ', ') FROM pg_locks l \
                 WHERE l.pid = a.pid AND relation IS NOT NULL) FROM pg_stat_activity a \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()"
            }
            Up::My(_) => "SHOW FULL PROCESSLIST",
        };
        let sessions = up.rows(sessions).await.map(|r| format!("{r:?}"));
        findings
            .push(format!("  upstream sessions: {}", sessions.unwrap_or_else(|e| e.to_string())));
    }
    for (i, why) in pending {
        let case = &cases[i];
        let errors = text_rows(client, "SELECT source_error FROM rw_catalog.rw_cdc_progress")
            .await
            .map(|rows| format!("{rows:?}"))
            .unwrap_or_else(|e| e.to_string());
        findings.push(format!(
            "  {}: still failing after {CONVERGE:?}: {why}; source errors {errors}\n    replay: SLUICE_MATRIX_SEED={seed} SLUICE_MATRIX_ONLY={}",
            case.describe(),
            case.index
        ));
    }
    Ok(findings)
}

/// Whether `case`'s table is where it must be now: equal to its upstream, or stopped with the
/// expected reason.
async fn check(client: &Client, up: &mut Up, case: &Case, expect: Expect) -> anyhow::Result<()> {
    let stopped = format!(
        "SELECT table_error FROM rw_catalog.rw_cdc_progress WHERE table_name = '{}'",
        case.table()
    );
    let error = text_rows(client, &stopped).await?;
    let error = error.first().and_then(|r| r[0].clone());
    if let Some(e) = &error
        && case.cannot_hold(e)
    {
        // The expected clear error for a value Sluice cannot hold (an unconstrained numeric
        // beyond 76 digits or 20 fraction digits): never NULL, never rounded.
        return Ok(());
    }
    if expect == Expect::Stop {
        return match error {
            Some(e) if e.contains("stopped following") => Ok(()),
            other => bail!(
                "the table should stop after the upstream's schema change; table_error is {other:?}"
            ),
        };
    }
    let mut ours =
        sorted(client, &format!("SELECT {} FROM {}", case.select_list(false), case.table()))
            .await?;
    let mut theirs = up.rows(&up.query(case)).await?;
    if let Up::My(_) = up {
        (ours, theirs) = (case.as_values(ours), case.as_values(theirs));
    }
    if ours != theirs {
        bail!(differences(&ours, &theirs, case.key.columns().len()));
    }
    if let Expect::Dropped(c) = expect {
        // No view reads the dropped column: it goes from the table.
        let columns = client.prepare(&format!("SELECT * FROM {}", case.table())).await?;
        let dropped = format!("c{c}");
        ensure!(
            columns.columns().iter().all(|col| col.name() != dropped),
            "the dropped column {dropped} is still in SELECT *"
        );
    }
    if expect == Expect::Added {
        // Tables are declared `(*)`: they take the column, old rows its default.
        let sql = |t: &str| format!("SELECT count(*), count(extra), sum(extra) FROM {t}");
        let ours = text_rows(client, &sql(&case.table())).await?;
        let theirs = up.rows(&sql(&case.upstream())).await?;
        ensure!(ours == theirs, "the added column: {ours:?} vs {theirs:?}");
    }
    Ok(())
}

/// What differs between Sluice's rows and the upstream's, by key: counts and a few examples.
fn differences(
    ours: &[Vec<Option<String>>],
    theirs: &[Vec<Option<String>>],
    keys: usize,
) -> String {
    use std::collections::BTreeMap;
    let by_key =
        |rows: &[Vec<Option<String>>]| -> BTreeMap<Vec<Option<String>>, Vec<Option<String>>> {
            rows.iter().map(|r| (key_of(r, keys), r.clone())).collect()
        };
    let (a, b) = (by_key(ours), by_key(theirs));
    let missing: Vec<_> = b.keys().filter(|k| !a.contains_key(*k)).collect();
    let extra: Vec<_> = a.keys().filter(|k| !b.contains_key(*k)).collect();
    let mut differing = Vec::new();
    for (k, row) in &a {
        if let Some(other) = b.get(k)
            && other != row
        {
            let columns: Vec<String> = row
                .iter()
                .zip(other)
                .enumerate()
                .filter(|(_, (x, y))| x != y)
                .map(|(c, (x, y))| format!("column {c}: sluice {} upstream {}", short(x), short(y)))
                .collect();
            differing.push(format!("key {:?}: {}", k, columns.join(", ")));
        }
    }
    format!(
        "{} rows missing in Sluice (e.g. {:?}), {} extra (e.g. {:?}), {} differ{}",
        missing.len(),
        missing.iter().take(3).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(3).collect::<Vec<_>>(),
        differing.len(),
        differing.iter().take(4).map(|d| format!("\n      {d}")).collect::<String>()
    )
}
