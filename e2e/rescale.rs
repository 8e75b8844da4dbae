//! Rescaling running jobs end to end: `ALTER .. SET PARALLELISM` during a backfill under
//! concurrent writes, on finished views and tables, across SIGKILL, and restoring a view built
//! at one parallelism at another. The oracle is always the view's query run as a batch query.

use std::time::Duration;

use anyhow::{Context, ensure};
use tokio::sync::watch;
use tokio_postgres::Client;

use crate::harness::{Sluice, assert_view_matches, retry_until, text_rows, wait_jobs};

const AGG_QUERY: &str = "SELECT g, count(*) AS n, sum(v) AS sv, min(v) AS lo, max(id) AS hi \
                         FROM big GROUP BY g";
const FILTER_QUERY: &str = "SELECT id, v FROM big WHERE v > 3";

/// Creates `big(id, g, v)` with `rows` rows.
async fn load_big(client: &Client, rows: i64) -> anyhow::Result<()> {
    client.batch_execute("CREATE TABLE big (id bigint PRIMARY KEY, g int, v int)").await?;
    client
        .batch_execute(&format!(
            "INSERT INTO big SELECT i, i % 100, i % 10 FROM generate_series(1, {rows}) AS i"
        ))
        .await?;
    Ok(())
}

/// Deletes, updates and inserts keys all over `1..=rows` (on both sides of any backfill
/// position, and moving keys) until told to stop.
async fn write_randomly(
    client: Client,
    rows: i64,
    mut seed: u64,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<u64> {
    let mut next = move |bound: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % bound
    };
    let mut writes = 0;
    while !*stop.borrow() {
        let id = 1 + next(rows as u64) as i64;
        let sql = match next(4) {
            0 => format!("DELETE FROM big WHERE id = {id}"),
            1 => format!("UPDATE big SET v = {}, g = {} WHERE id = {id}", next(10), next(100)),
            // The key moves to the other end of the table.
            2 => format!("UPDATE big SET id = {} WHERE id = {id}", rows * 2 + writes as i64),
            _ => format!(
                "INSERT INTO big VALUES ({}, {}, {})",
                -(writes as i64),
                next(100),
                next(10)
            ),
        };
        client.batch_execute(&sql).await?;
        writes += 1;
    }
    Ok(writes)
}

/// The committed backfill progress of `view`'s scan: rows read, and finished vnodes.
async fn scan_progress(client: &Client, view: &str) -> anyhow::Result<(i64, i64)> {
    let table = text_rows(
        client,
        &format!(
            "SELECT name FROM rw_catalog.rw_internal_tables \
             WHERE job_name = '{view}' AND purpose = 'streamscan'"
        ),
    )
    .await?;
    let table = table.first().and_then(|r| r[0].clone()).context("no streamscan table")?;
    let row = text_rows(
        client,
        &format!(
            "SELECT coalesce(sum(row_count), 0), \
             coalesce(sum(CASE WHEN backfill_finished THEN 1 ELSE 0 END), 0) FROM {table}"
        ),
    )
    .await?;
    let number =
        |i: usize| -> anyhow::Result<i64> { Ok(row[0][i].as_deref().unwrap_or("0").parse()?) };
    Ok((number(0)?, number(1)?))
}

/// `rows_done` of `view`'s creating job in `rw_ddl_progress`.
async fn rows_done(client: &Client, view: &str) -> anyhow::Result<i64> {
    let rows = text_rows(
        client,
        &format!(
            "SELECT rows_done FROM rw_catalog.rw_ddl_progress WHERE ddl_statement LIKE '% {view} %'"
        ),
    )
    .await?;
    let row = rows.first().with_context(|| format!("{view} is not creating"))?;
    Ok(row[0].as_deref().unwrap_or("0").parse()?)
}

/// The parallelism of every fragment of `job`, from `rw_fragments`.
async fn fragment_parallelism(client: &Client, job: &str) -> anyhow::Result<Vec<i64>> {
    let rows = text_rows(
        client,
        &format!(
            "SELECT parallelism FROM rw_catalog.rw_fragments WHERE job_name = '{job}' \
             ORDER BY fragment_id"
        ),
    )
    .await?;
    rows.iter().map(|r| Ok(r[0].as_deref().unwrap_or("0").parse()?)).collect()
}

#[tokio::test]
async fn rescale_during_backfill_under_load() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = rescale_under_load(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn rescale_under_load(server: &Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 300_000;
    let client = server.connect().await?;
    load_big(&client, ROWS).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let writer = tokio::spawn(write_randomly(server.connect().await?, ROWS, 7, stop_rx));
    // Two actors at 10 k rows/s each: about 15 s for the table, long enough for four rescales.
    client
        .batch_execute(&format!(
            "SET background_ddl = true; SET streaming_parallelism = 2; \
             SET backfill_rate_limit = 10000; \
             CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}; \
             CREATE MATERIALIZED VIEW filtered AS {FILTER_QUERY}"
        ))
        .await?;
    let mut last = (0, 0);
    for parallelism in [4, 1, 3] {
        retry_until(Duration::from_secs(60), || async {
            let (rows, _) = scan_progress(&client, "agg").await?;
            ensure!(rows > last.0 + 10_000, "only {rows} rows read so far");
            Ok(())
        })
        .await?;
        let before = scan_progress(&client, "agg").await?;
        ensure!(before.0 >= last.0, "progress went back from {last:?} to {before:?}");
        let shown_before = rows_done(&client, "agg").await?;
        client
            .batch_execute(&format!("ALTER MATERIALIZED VIEW agg SET PARALLELISM = {parallelism}"))
            .await?;
        let shown_after = rows_done(&client, "agg").await?;
        ensure!(
            shown_after >= shown_before,
            "rw_ddl_progress went back from {shown_before} to {shown_after} rows"
        );
        let after = scan_progress(&client, "agg").await?;
        ensure!(
            after.0 >= before.0 && after.1 >= before.1,
            "rescaling to {parallelism} went back from {before:?} to {after:?}"
        );
        ensure!(
            fragment_parallelism(&client, "agg").await?.iter().all(|&n| n == parallelism),
            "agg does not run {parallelism} actors per fragment"
        );
        last = after;
    }
    ensure!(last.0 < ROWS, "the backfill finished before the last rescale; lower the rate");
    // The table itself, while the other view still backfills.
    client.batch_execute("ALTER TABLE big SET PARALLELISM = 2").await?;
    client
        .batch_execute(
            "ALTER MATERIALIZED VIEW agg SET BACKFILL_RATE_LIMIT = DEFAULT; \
             ALTER MATERIALIZED VIEW filtered SET BACKFILL_RATE_LIMIT = DEFAULT",
        )
        .await?;
    wait_jobs(&client, Duration::from_secs(180)).await?;
    stop_tx.send(true)?;
    let writes = writer.await??;
    ensure!(writes > 0, "the writer wrote nothing");
    let (_, finished) = scan_progress(&client, "agg").await?;
    ensure!(finished == 256, "{finished} of 256 vnodes finished");
    assert_view_matches(&client, "agg", AGG_QUERY).await?;
    assert_view_matches(&client, "filtered", FILTER_QUERY).await
}

#[tokio::test]
async fn rescale_finished_views_and_tables_under_writes() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = rescale_steady(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn rescale_steady(server: &Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 20_000;
    let client = server.connect().await?;
    load_big(&client, ROWS).await?;
    client
        .batch_execute(&format!(
            "CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}; \
             CREATE MATERIALIZED VIEW top AS SELECT g, n FROM agg WHERE n > 150"
        ))
        .await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let writer = tokio::spawn(write_randomly(server.connect().await?, ROWS, 11, stop_rx));
    for (what, n) in [
        ("MATERIALIZED VIEW agg", 3),
        ("TABLE big", 4),
        ("MATERIALIZED VIEW top", 1),
        ("TABLE big", 1),
        ("MATERIALIZED VIEW agg", 2),
    ] {
        client.batch_execute(&format!("ALTER {what} SET PARALLELISM TO {n}")).await?;
    }
    ensure!(fragment_parallelism(&client, "agg").await? == [2, 2, 2], "agg's fragments");
    // Internal tables have no job of their own.
    let internal = text_rows(&client, "SELECT name FROM rw_catalog.rw_internal_tables").await?;
    let internal = internal[0][0].clone().context("no internal table")?;
    let refused =
        client.batch_execute(&format!("ALTER TABLE {internal} SET PARALLELISM = 2")).await;
    let code = refused.err().and_then(|e| e.code().map(|c| c.code().to_owned()));
    ensure!(code.as_deref() == Some("42809"), "ALTER of an internal table: {code:?}");
    ensure!(fragment_parallelism(&client, "big").await? == [1, 1], "big's fragments");
    stop_tx.send(true)?;
    writer.await??;
    client.batch_execute("FLUSH").await?;
    assert_view_matches(&client, "agg", AGG_QUERY).await?;
    assert_view_matches(
        &client,
        "top",
        &format!("SELECT g, n FROM ({AGG_QUERY}) AS a WHERE n > 150"),
    )
    .await
}

#[tokio::test]
async fn rescale_survives_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = rescale_and_kill(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn rescale_and_kill(server: &mut Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 100_000;
    let client = server.connect().await?;
    load_big(&client, ROWS).await?;
    client
        .batch_execute(&format!(
            "SET background_ddl = true; SET streaming_parallelism = 2; \
             SET backfill_rate_limit = 5000; CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}"
        ))
        .await?;
    retry_until(Duration::from_secs(60), || async {
        let (rows, _) = scan_progress(&client, "agg").await?;
        ensure!(rows >= 10_000, "only {rows} rows read");
        Ok(())
    })
    .await?;

    // Killed right after the ALTER returns: the new layout, and nothing lost.
    client.batch_execute("ALTER MATERIALIZED VIEW agg SET PARALLELISM = 3").await?;
    let before = scan_progress(&client, "agg").await?;
    server.kill9().await?;
    server.restart().await?;
    let client = server.connect().await?;
    ensure!(fragment_parallelism(&client, "agg").await?.iter().all(|&n| n == 3), "layout");
    let after = scan_progress(&client, "agg").await?;
    ensure!(after.0 >= before.0, "progress went back from {before:?} to {after:?}");

    // Killed while an ALTER is in flight: the old layout or the new one, consistently.
    let alterer = server.connect().await?;
    let alter = tokio::spawn(async move {
        alterer.batch_execute("ALTER MATERIALIZED VIEW agg SET PARALLELISM = 1").await
    });
    // One round trip later the ALTER is on its way or done; either way the kill is fair.
    let before = scan_progress(&client, "agg").await?;
    server.kill9().await?;
    let _ = alter.await?;
    server.restart().await?;
    let client = server.connect().await?;
    let layout = fragment_parallelism(&client, "agg").await?;
    ensure!(
        layout.iter().all(|&n| n == 3) || layout.iter().all(|&n| n == 1),
        "a mixed layout after the restart: {layout:?}"
    );
    let after = scan_progress(&client, "agg").await?;
    ensure!(after.0 >= before.0, "progress went back from {before:?} to {after:?}");

    client
        .batch_execute(
            "DELETE FROM big WHERE id % 100 = 3; \
             ALTER MATERIALIZED VIEW agg SET BACKFILL_RATE_LIMIT = DEFAULT",
        )
        .await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    assert_view_matches(&client, "agg", AGG_QUERY).await
}

#[tokio::test]
async fn a_view_restores_at_another_parallelism() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = restore_elsewhere(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn restore_elsewhere(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client, 30_000).await?;
    client
        .batch_execute(&format!(
            "SET streaming_parallelism = 1; CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}; \
             UPDATE big SET v = v + 1 WHERE id % 7 = 0; FLUSH"
        ))
        .await?;
    let mut built = text_rows(&client, "SELECT * FROM agg").await?;
    built.sort();
    server.kill9().await?;
    server.restart().await?;
    let client = server.connect().await?;
    client.batch_execute("ALTER MATERIALIZED VIEW agg SET PARALLELISM = 4").await?;
    let mut restored = text_rows(&client, "SELECT * FROM agg").await?;
    restored.sort();
    ensure!(built == restored, "the view changed across the restart and the rescale");
    // Changes after the rescale land in the vnodes' new owners.
    client.batch_execute("DELETE FROM big WHERE g = 5; INSERT INTO big VALUES (-7, 5, 1)").await?;
    ensure!(fragment_parallelism(&client, "agg").await?.iter().all(|&n| n == 4), "layout");
    assert_view_matches(&client, "agg", AGG_QUERY).await
}
