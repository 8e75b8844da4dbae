//! Job control end to end: background DDL, the progress views, rate limits changed while a
//! backfill runs, `CANCEL JOBS` of background and foreground jobs, read-only internal tables,
//! and a background job that survives a SIGKILL and finishes from its persisted progress.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use parking_lot::Mutex;
use tokio_postgres::Client;

use crate::harness::{Sluice, assert_view_matches, retry_until, text_rows, wait_jobs};

const AGG_QUERY: &str = "SELECT g, count(*) AS n, sum(v) AS total FROM big GROUP BY g";

/// Creates `big(id, g, v)` with `rows` rows.
async fn load_big(client: &Client, rows: i64) -> anyhow::Result<()> {
    client.batch_execute("CREATE TABLE big (id bigint PRIMARY KEY, g int, v int)").await?;
    client
        .batch_execute(&format!(
            "INSERT INTO big SELECT i, i % 50, i % 7 FROM generate_series(1, {rows}) AS i"
        ))
        .await?;
    Ok(())
}

/// One `rw_ddl_progress` row.
#[derive(Debug, Clone)]
struct Progress {
    id: String,
    create_type: String,
    progress: String,
    rows_done: i64,
    rows_total: Option<i64>,
    rows_per_second: f64,
    eta: Option<String>,
    status: String,
}

/// The `rw_ddl_progress` row of the job whose statement mentions `name`.
async fn progress_of(client: &Client, name: &str) -> anyhow::Result<Option<Progress>> {
    let rows = text_rows(
        client,
        &format!(
            "SELECT ddl_id, create_type, progress, rows_done, rows_total, rows_per_second, eta, \
             status FROM rw_catalog.rw_ddl_progress WHERE ddl_statement LIKE '% {name} %'"
        ),
    )
    .await?;
    let Some(row) = rows.into_iter().next() else { return Ok(None) };
    let text = |i: usize| row[i].clone().unwrap_or_default();
    Ok(Some(Progress {
        id: text(0),
        create_type: text(1),
        progress: text(2),
        rows_done: text(3).parse()?,
        rows_total: row[4].as_deref().map(str::parse).transpose()?,
        rows_per_second: text(5).parse()?,
        eta: row[6].clone(),
        status: text(7),
    }))
}

/// Checks a progress text `12.34% (done/total)` against the numbers beside it.
fn check_progress_text(p: &Progress) -> anyhow::Result<()> {
    let total = p.rows_total.context("no total yet")?;
    let (percent, counts) =
        p.progress.split_once("% (").with_context(|| format!("malformed {:?}", p.progress))?;
    let percent: f64 = percent.parse()?;
    ensure!(counts == format!("{}/{total})", p.rows_done), "{p:?}");
    let expected = (p.rows_done as f64 * 100.0 / total as f64).min(99.99);
    ensure!((percent - expected).abs() < 0.01, "{percent} vs {expected} in {p:?}");
    ensure!(percent < 100.0, "a creating job shows {percent}%");
    Ok(())
}

/// The SQLSTATE of a failed statement.
fn sqlstate(result: Result<(), tokio_postgres::Error>) -> anyhow::Result<String> {
    match result {
        Ok(()) => bail!("the statement succeeded"),
        Err(e) => Ok(e.code().map(|c| c.code().to_owned()).unwrap_or_default()),
    }
}

#[tokio::test]
async fn background_jobs_report_progress_and_cancel() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = progress_and_cancel(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn progress_and_cancel(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client, 50_000).await?;
    // Two actors at 2000 rows/s each: about 12 s for the table.
    client
        .batch_execute(&format!(
            "SET background_ddl = true; SET streaming_parallelism = 2;
             CREATE MATERIALIZED VIEW agg WITH (backfill_rate_limit = 2000) AS {AGG_QUERY}"
        ))
        .await?;

    // Sampled while the table is quiet, progress never goes back, and its text adds up.
    let samples: Arc<Mutex<Vec<Progress>>> = Arc::default();
    retry_until(Duration::from_secs(60), || async {
        let p = progress_of(&client, "agg").await?.context("agg is not listed")?;
        samples.lock().push(p.clone());
        ensure!(p.rows_done >= 8000 && p.eta.is_some(), "not far enough yet: {p:?}");
        Ok(())
    })
    .await?;
    let samples = samples.lock().clone();
    for pair in samples.windows(2) {
        ensure!(pair[1].rows_done >= pair[0].rows_done, "progress went back: {pair:?}");
    }
    let last = samples.last().expect("sampled");
    check_progress_text(last)?;
    ensure!(last.rows_total == Some(50_000), "{last:?}");
    ensure!(last.create_type == "BACKGROUND" && last.status == "throttled", "{last:?}");
    ensure!(last.rows_per_second > 0.0, "{last:?}");
    ensure!(last.rows_done < 50_000, "finished too early for the test: {last:?}");

    // The per-fragment view shows the scan's vnodes.
    let fragments = text_rows(
        &client,
        "SELECT upstream, actor_count, units_total, rows_total FROM \
         rw_catalog.rw_fragment_backfill_progress WHERE job_name = 'agg'",
    )
    .await?;
    let expected = ["big", "2", "256", "50000"].map(|s| Some(s.to_owned())).to_vec();
    ensure!(fragments == vec![expected], "{fragments:?}");

    // Internal tables: readable, never writable, never a view's input.
    let scan = text_rows(
        &client,
        "SELECT name FROM rw_catalog.rw_internal_tables WHERE job_name = 'agg' AND purpose = 'streamscan'",
    )
    .await?;
    let scan = scan.first().and_then(|r| r[0].clone()).context("no streamscan table")?;
    let started = text_rows(&client, &format!("SELECT count(*) FROM {scan}")).await?;
    let started: i64 = started[0][0].as_deref().unwrap_or("0").parse()?;
    ensure!((1..=256).contains(&started), "{started} vnodes started");
    for sql in [
        format!("INSERT INTO {scan} VALUES (1, 1, false, 0)"),
        format!("DELETE FROM {scan}"),
        format!("UPDATE {scan} SET row_count = 0"),
        format!("CREATE MATERIALIZED VIEW snoop AS SELECT * FROM {scan}"),
    ] {
        let code = sqlstate(client.batch_execute(&sql).await)?;
        ensure!(code == "42809", "{sql}: SQLSTATE {code}");
    }

    // A foreground CREATE blocks; CANCEL JOBS from another session ends it with 57014.
    let creator = server.connect().await?;
    let create = tokio::spawn(async move {
        creator
            .batch_execute(
                "SET backfill_rate_limit = 0; \
                 CREATE MATERIALIZED VIEW paused AS SELECT id, v FROM big WHERE v = 3",
            )
            .await
    });
    let paused = retry_until(Duration::from_secs(30), || async {
        let p = progress_of(&client, "paused").await?.context("paused is not listed")?;
        ensure!(p.status == "paused" && p.create_type == "FOREGROUND", "{p:?}");
        Ok(p)
    })
    .await?;
    ensure!(paused.rows_done == 0, "a paused job read rows: {paused:?}");
    let cancelled = text_rows(&client, &format!("CANCEL JOBS {}", paused.id)).await?;
    ensure!(cancelled == vec![vec![Some(paused.id.clone())]], "{cancelled:?}");
    let code = sqlstate(create.await?)?;
    ensure!(code == "57014", "the foreground CREATE ended with SQLSTATE {code}");

    // Cancel the background job too: nothing of either is left.
    let cancelled = text_rows(&client, &format!("CANCEL JOBS {}", last.id)).await?;
    ensure!(cancelled.len() == 1, "{cancelled:?}");
    let left = text_rows(
        &client,
        "SELECT name FROM rw_catalog.rw_materialized_views \
         UNION ALL SELECT name FROM rw_catalog.rw_internal_tables \
         UNION ALL SELECT ddl_statement FROM rw_catalog.rw_ddl_progress",
    )
    .await?;
    ensure!(left.is_empty(), "left behind: {left:?}");
    let code = sqlstate(client.batch_execute("SELECT * FROM agg").await)?;
    ensure!(code == "42P01", "SQLSTATE {code}");
    let code = sqlstate(client.batch_execute("CANCEL JOBS 99999").await)?;
    ensure!(code == "42601", "SQLSTATE {code}");

    // The name is free again; this time it runs to the end.
    client
        .batch_execute(&format!(
            "SET background_ddl = false; CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}"
        ))
        .await?;
    ensure!(progress_of(&client, "agg").await?.is_none(), "a created job is still listed");
    assert_view_matches(&client, "agg", AGG_QUERY).await
}

#[tokio::test]
async fn background_job_resumes_after_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = resume_after_kill(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn resume_after_kill(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    load_big(&client, 100_000).await?;
    client
        .batch_execute(&format!(
            "SET background_ddl = true; SET streaming_parallelism = 2; \
             SET backfill_rate_limit = 5000; CREATE MATERIALIZED VIEW agg AS {AGG_QUERY}"
        ))
        .await?;
    // Halve the rate while it runs: the limit is stored and outlives the restart.
    client.batch_execute("ALTER MATERIALIZED VIEW agg SET BACKFILL_RATE_LIMIT = 2500").await?;
    let before = retry_until(Duration::from_secs(60), || async {
        let p = progress_of(&client, "agg").await?.context("agg is not listed")?;
        ensure!(p.rows_done >= 10_000, "only {} rows", p.rows_done);
        Ok(p)
    })
    .await?;
    ensure!(before.rows_done < 100_000, "finished before the kill: {before:?}");
    server.kill9().await?;
    server.restart().await?;

    let client = server.connect().await?;
    let after = progress_of(&client, "agg").await?.context("the job is gone after the restart")?;
    ensure!(after.rows_done >= before.rows_done, "went back: {before:?} -> {after:?}");
    ensure!(after.create_type == "BACKGROUND", "{after:?}");
    let limit = text_rows(&client, "SELECT rate_limit FROM rw_catalog.rw_rate_limit").await?;
    ensure!(limit == vec![vec![Some("2500".to_owned())]], "{limit:?}");
    let code = sqlstate(client.batch_execute("SELECT * FROM agg").await)?;
    ensure!(code == "55000", "querying a creating view: SQLSTATE {code}");

    // Changes while it finishes, then full speed and WAIT.
    client
        .batch_execute(
            "INSERT INTO big VALUES (-1, 3, 3); DELETE FROM big WHERE id % 1000 = 7; \
             UPDATE big SET v = v + 1 WHERE id % 997 = 0",
        )
        .await?;
    client.batch_execute("ALTER MATERIALIZED VIEW agg SET BACKFILL_RATE_LIMIT = DEFAULT").await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    ensure!(progress_of(&client, "agg").await?.is_none(), "still listed after WAIT");
    assert_view_matches(&client, "agg", AGG_QUERY).await
}
