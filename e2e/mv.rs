//! Materialized views end to end: backfill under concurrent writes, crash in the middle of a
//! backfill, crash in steady state. The oracle is always the view's own query run as a batch
//! query over the tables once they are quiet.

use std::time::Duration;

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, assert_view_matches, retry_until, text_rows, wait_jobs};

/// Rows in the upstream table of these tests.
const ROWS: i64 = 200_000;

/// Creates `big(id, g, v, s)` with [`ROWS`] rows.
async fn load_big(client: &Client) -> anyhow::Result<()> {
    client
        .batch_execute("CREATE TABLE big (id bigint PRIMARY KEY, g int, v int, s varchar)")
        .await?;
    let sql = format!(
        "INSERT INTO big SELECT i, i % 100, i % 7, 'row' || i FROM generate_series(1, {ROWS}) AS i"
    );
    client.batch_execute(&sql).await?;
    Ok(())
}

/// Rows read so far by the only stream scan of the server, from its progress table.
async fn backfilled_rows(client: &Client) -> anyhow::Result<(i64, i64, i64)> {
    let tables = text_rows(client, "SHOW INTERNAL TABLES").await?;
    let table = tables
        .iter()
        .filter_map(|r| r[0].clone())
        .find(|name| name.contains("streamscan"))
        .context("no stream scan progress table")?;
    let row = text_rows(
        client,
        &format!(
            "SELECT coalesce(sum(row_count), 0), count(*), \
             sum(CASE WHEN backfill_finished THEN 1 ELSE 0 END) FROM {table}"
        ),
    )
    .await?;
    let num = |i: usize| row[0][i].as_deref().unwrap_or("0").parse::<i64>().unwrap_or(0);
    Ok((num(0), num(1), num(2)))
}

/// A writer of random changes to `big`, on both sides of any backfill position, until stopped.
async fn write_randomly(
    client: Client,
    mut seed: u64,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<u64> {
    let mut next = move |bound: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % bound
    };
    let mut writes = 0;
    while !*stop.borrow() {
        let id = 1 + next(ROWS as u64 + 5_000) as i64;
        let sql = match next(3) {
            0 => format!("DELETE FROM big WHERE id = {id}"),
            1 => format!("UPDATE big SET v = {}, g = {} WHERE id = {id}", next(10), next(100)),
            _ => format!(
                "INSERT INTO big VALUES ({}, {}, {}, 'new')",
                ROWS + 10_000 + writes as i64,
                next(100),
                next(10)
            ),
        };
        client.batch_execute(&sql).await?;
        writes += 1;
    }
    Ok(writes)
}

const AGG_QUERY: &str =
    "SELECT g, count(*) AS n, sum(v) AS sv, min(v) AS lo, max(id) AS hi FROM big GROUP BY g";
const FILTER_QUERY: &str = "SELECT id, v, s FROM big WHERE v > 3";

#[tokio::test]
async fn backfill_under_concurrent_writes_equals_batch_query() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = concurrent_backfill(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn concurrent_backfill(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(write_randomly(server.connect().await?, 42, stop_rx));
    // A rate limit makes the backfill last long enough for the writer to overlap with it.
    client.batch_execute("SET streaming_parallelism = 2").await?;
    client
        .batch_execute(&format!(
            "CREATE MATERIALIZED VIEW big_agg WITH (backfill_rate_limit = 40000) AS {AGG_QUERY}"
        ))
        .await?;
    client
        .batch_execute(&format!(
            "CREATE MATERIALIZED VIEW big_filter WITH (backfill_rate_limit = 40000) AS {FILTER_QUERY}"
        ))
        .await?;
    stop_tx.send_replace(true);
    let writes = writer.await??;
    ensure!(writes > 10, "the writer made only {writes} changes during the backfills");
    assert_view_matches(&client, "big_agg", AGG_QUERY).await?;
    assert_view_matches(&client, "big_filter", FILTER_QUERY).await?;
    Ok(())
}

/// Rows of the table a view with a group per row aggregates.
const GROUP_PER_ROW: i64 = 600_000;

/// A view with as many groups as rows holds a bounded number of them while it backfills: the
/// aggregate counts its touched groups as the epoch's memory and flushes them past a bound.
/// Without that, the whole table's groups stayed in memory until the barrier, Rust values of
/// about 2 KB each with their flush (+1.9 GB for a million rows).
#[tokio::test]
async fn a_view_with_a_group_per_row_backfills_in_bounded_memory() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = group_per_row(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn group_per_row(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client.batch_execute("CREATE TABLE wide (id bigint PRIMARY KEY, a int)").await?;
    let load =
        format!("INSERT INTO wide SELECT i, i % 7 FROM generate_series(1, {GROUP_PER_ROW}) AS i");
    client.batch_execute(&load).await?;
    let pid = server.pid().context("the server runs")?;
    let status = |field: &str| -> anyhow::Result<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let line = text.lines().find(|l| l.starts_with(field)).context("no such field")?;
        let kb = line.split_whitespace().nth(1).context("no value")?;
        Ok(kb.parse::<u64>()? / 1024)
    };
    let before = status("VmRSS:")?;
    // Resets the peak (`VmHWM`) to the current size, so it measures the view's backfill only.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_id AS SELECT id, count(*) AS n, sum(a) AS s \
             FROM wide GROUP BY id",
        )
        .await?;
    let peak = status("VmHWM:")?;
    ensure!(
        peak < before + 800,
        "the backfill grew the server from {before} MB to a peak of {peak} MB"
    );
    let got = text_rows(&client, "SELECT count(*), sum(n), sum(s) FROM per_id").await?;
    let want = text_rows(&client, "SELECT count(*), count(*), sum(a) FROM wide").await?;
    ensure!(got == want, "per_id holds {got:?}, its query {want:?}");
    Ok(())
}

#[tokio::test]
async fn backfill_resumes_after_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = kill_mid_backfill(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn kill_mid_backfill(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client).await?;
    let creator = server.connect().await?;
    let create = tokio::spawn(async move {
        // Two actors at 20 k rows/s each: about five seconds for the whole table.
        let sql = format!(
            "SET streaming_parallelism = 2; \
             CREATE MATERIALIZED VIEW big_agg WITH (backfill_rate_limit = 20000) AS {AGG_QUERY}"
        );
        creator.batch_execute(&sql).await
    });
    let before = retry_until(Duration::from_secs(60), || async {
        let (rows, _, _) = backfilled_rows(&client).await?;
        ensure!(rows >= ROWS / 5, "only {rows} rows backfilled so far");
        Ok(rows)
    })
    .await?;
    ensure!(before < ROWS, "the backfill finished before the kill; lower the rate limit");
    server.kill9().await?;
    ensure!(create.await?.is_err(), "CREATE returned although the server was killed mid-backfill");
    server.restart().await?;

    let client = server.connect().await?;
    let (after, _, _) = backfilled_rows(&client).await?;
    ensure!(after >= before, "progress went back from {before} to {after} rows after the restart");
    client.batch_execute("INSERT INTO big VALUES (-1, 5, 5, 'after restart')").await?;
    client.batch_execute("DELETE FROM big WHERE id = 7").await?;
    retry_until(Duration::from_secs(120), || async {
        let (_, vnodes, finished) = backfilled_rows(&client).await?;
        ensure!(vnodes == 256 && finished == 256, "{finished} of 256 vnodes finished");
        Ok(())
    })
    .await?;
    assert_view_matches(&client, "big_agg", AGG_QUERY).await
}

#[tokio::test]
async fn views_are_maintained_across_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = steady_state_kill(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn steady_state_kill(server: &mut Sluice) -> anyhow::Result<()> {
    let mut client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE t1 (id int PRIMARY KEY, k int, x int);
             CREATE TABLE t2 (k int PRIMARY KEY, name varchar);
             INSERT INTO t1 SELECT i, i % 10, i FROM generate_series(1, 1000) AS i;
             INSERT INTO t2 SELECT i, 'n' || i FROM generate_series(0, 9) AS i;",
        )
        .await?;
    let joined = "SELECT t2.name, count(*) AS n, sum(t1.x) AS total FROM t1 JOIN t2 ON t1.k = t2.k GROUP BY t2.name";
    client.batch_execute(&format!("CREATE MATERIALIZED VIEW joined AS {joined}")).await?;
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW joined_big AS SELECT name, total FROM joined WHERE n > 99",
        )
        .await?;
    for round in 0..3 {
        let writer = server.connect().await?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let writes = tokio::spawn(async move {
            let mut i = 0;
            while !*stop_rx.borrow() {
                let id = 2000 + round * 1000 + i;
                let sql = format!(
                    "INSERT INTO t1 VALUES ({id}, {}, 1); DELETE FROM t1 WHERE id = {}",
                    i % 10,
                    1 + i * 3
                );
                if writer.batch_execute(&sql).await.is_err() {
                    break;
                }
                i += 1;
            }
        });
        retry_until(Duration::from_secs(30), || async {
            let rows = text_rows(&client, "SELECT count(*) FROM t1 WHERE id >= 2000").await?;
            let n: i64 = rows[0][0].as_deref().unwrap_or("0").parse()?;
            ensure!(n > 5 + 20 * round as i64, "only {n} writes so far");
            Ok(())
        })
        .await?;
        server.kill9().await?;
        stop_tx.send_replace(true);
        let _ = writes.await;
        server.restart().await?;
        let reconnected = server.connect().await?;
        assert_view_matches(&reconnected, "joined", joined).await?;
        assert_view_matches(
            &reconnected,
            "joined_big",
            &format!("SELECT name, total FROM ({joined}) WHERE n > 99"),
        )
        .await?;
        reconnected.batch_execute("UPDATE t2 SET name = name || 'x' WHERE k = 3").await?;
        assert_view_matches(&reconnected, "joined", joined).await?;
        client = reconnected;
    }
    Ok(())
}

/// A view over a join planned with eager aggregation: its partial aggregate holds its groups
/// while the view backfills.
const EAGER_QUERY: &str = "SELECT gdim.name, count(*) AS n, sum(big.v) AS sv, max(big.id) AS hi \
                           FROM big JOIN gdim ON big.g = gdim.id GROUP BY gdim.name";

/// A kill while the partial aggregate holds its groups, then a crash right after their release
/// is committed but before the view is marked created: either way each group reaches the view
/// exactly once.
#[tokio::test]
async fn an_eager_view_killed_while_holding_and_after_its_release_equals_its_query()
-> anyhow::Result<()> {
    let env = [("SLUICE_FAILPOINTS", "released:big_eager")];
    let mut server = Sluice::start_with_env(&env).await?;
    let outcome = eager_kills(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn eager_kills(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client).await?;
    client
        .batch_execute(
            "CREATE TABLE gdim (id int PRIMARY KEY, name varchar);
             INSERT INTO gdim SELECT i, 'n' || (i % 10) FROM generate_series(0, 99) AS i;",
        )
        .await?;
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(write_randomly(server.connect().await?, 7, stop_rx));
    let creator = server.connect().await?;
    let create = tokio::spawn(async move {
        let sql = format!(
            "SET streaming_parallelism = 2; SET eager_aggregation = on; \
             CREATE MATERIALIZED VIEW big_eager WITH (backfill_rate_limit = 20000) AS {EAGER_QUERY}"
        );
        creator.batch_execute(&sql).await
    });
    let progress = "SELECT rows_done FROM rw_catalog.rw_ddl_progress \
                    WHERE ddl_statement LIKE 'CREATE MATERIALIZED VIEW big_eager%'";
    retry_until(Duration::from_secs(60), || async {
        let rows = text_rows(&client, progress).await?;
        let done: i64 = rows.first().and_then(|r| r[0].as_deref()).unwrap_or("0").parse()?;
        ensure!(done >= ROWS / 5, "only {done} rows backfilled so far");
        ensure!(done < ROWS, "the backfill finished before the kill; lower the rate limit");
        Ok(())
    })
    .await?;
    server.kill9().await?;
    ensure!(create.await?.is_err(), "CREATE returned although the server was killed mid-backfill");
    let _ = writer.await?;

    // The restarted job backfills the rest, releases its groups, and crashes there.
    server.restart().await?;
    retry_until(Duration::from_secs(120), || {
        let exited = server.ensure_running().is_err();
        async move {
            ensure!(exited, "the server has not crashed after the release yet");
            Ok(())
        }
    })
    .await?;
    ensure!(
        server.current_run_log().contains("failpoint fired"),
        "the server exited, but not at the release\n{}",
        server.log_tail()
    );

    server.clear_env();
    server.restart().await?;
    let client = server.connect().await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    assert_view_matches(&client, "big_eager", EAGER_QUERY).await?;
    client
        .batch_execute(
            "INSERT INTO big VALUES (-1, 5, 5, 'after'); DELETE FROM big WHERE id = 8;
             UPDATE gdim SET name = 'moved' WHERE id = 3",
        )
        .await?;
    assert_view_matches(&client, "big_eager", EAGER_QUERY).await
}

/// A three-way view (a join, an anti join and an aggregate) whose scans read in order.
const ORDERED_QUERY: &str = "SELECT gdim.name, count(*) AS n, sum(big.v) AS sv FROM big \
                             JOIN gdim ON big.g = gdim.id \
                             WHERE NOT EXISTS (SELECT 1 FROM flag WHERE flag.id = big.id) \
                             GROUP BY gdim.name";

/// Views whose scans wait for each other (the automatic order: the dimension and the anti
/// join's side first, and its reverse, stated), killed at random points of their builds
/// while `big` changes: each equals its query once built.
#[tokio::test]
async fn ordered_backfills_killed_at_random_points_equal_their_queries() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    eprintln!("ordered backfills: seed {seed}");
    let outcome = ordered_kills(&mut server, seed as u64).await;
    outcome.with_context(|| format!("seed {seed}\n{}", server.log_tail()))
}

async fn ordered_kills(server: &mut Sluice, seed: u64) -> anyhow::Result<()> {
    let mut rng = crate::harness::Rng::new(seed);
    let client = server.connect().await?;
    load_big(&client).await?;
    client
        .batch_execute(
            "CREATE TABLE gdim (id int PRIMARY KEY, name varchar);
             INSERT INTO gdim SELECT i, 'n' || (i % 10) FROM generate_series(0, 99) AS i;
             CREATE TABLE flag (id bigint PRIMARY KEY);
             INSERT INTO flag SELECT i * 3 FROM generate_series(1, 30000) AS i;",
        )
        .await?;
    let explain = text_rows(
        &client,
        &format!("EXPLAIN CREATE MATERIALIZED VIEW ord_auto AS {ORDERED_QUERY}"),
    )
    .await?;
    let order: Vec<String> = explain.iter().filter_map(|r| r[0].clone()).collect();
    ensure!(
        order.iter().any(|l| l.trim() == "big after gdim, flag"),
        "the facts should read last: {order:?}"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut writers =
        vec![tokio::spawn(write_randomly(server.connect().await?, seed, stop_rx.clone()))];
    client
        .batch_execute(&format!(
            "SET streaming_parallelism = 2; SET background_ddl = true;
             CREATE MATERIALIZED VIEW ord_auto WITH (backfill_rate_limit = 15000) AS {ORDERED_QUERY};
             CREATE MATERIALIZED VIEW ord_fixed
                 WITH (backfill_rate_limit = 15000, backfill_order = FIXED(big -> flag -> gdim))
                 AS {ORDERED_QUERY};"
        ))
        .await?;
    // Kills at random amounts of rows read, each before the builds have finished.
    let total = ROWS + 30_000 + 100;
    let progress = "SELECT coalesce(min(rows_done), 0), count(*) FROM rw_catalog.rw_ddl_progress";
    let mut client = client;
    for kill in 0..rng.between(1, 3) {
        let at = rng.between(1, 7) as i64 * total / 10;
        let reached = retry_until(Duration::from_secs(120), || async {
            let rows = text_rows(&client, progress).await?;
            let num = |i: usize| rows[0][i].as_deref().unwrap_or("0").parse::<i64>();
            let (done, creating) = (num(0)?, num(1)?);
            ensure!(creating == 0 || done >= at, "kill {kill}: {done} of {at} rows read");
            Ok(creating > 0)
        })
        .await?;
        if !reached {
            break;
        }
        eprintln!("ordered backfills: kill {kill} once {at} rows are read");
        server.kill9().await?;
        server.restart().await?;
        client = server.connect().await?;
        // The writer before the kill failed with it; the next one goes on.
        let next = write_randomly(server.connect().await?, seed + kill + 1, stop_rx.clone());
        writers.push(tokio::spawn(next));
    }
    stop_tx.send(true)?;
    for writer in writers {
        let _ = writer.await?;
    }
    wait_jobs(&client, Duration::from_secs(180)).await?;
    assert_view_matches(&client, "ord_auto", ORDERED_QUERY).await?;
    assert_view_matches(&client, "ord_fixed", ORDERED_QUERY).await
}
