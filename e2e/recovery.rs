//! An actor failure recovers the streaming jobs in the running server: the process stays up,
//! nothing committed is lost, the failed job goes on from its last checkpoint, a foreground
//! `CREATE MATERIALIZED VIEW` whose backfill failed still completes, and the failure is listed
//! in `rw_catalog.rw_recovery_events`; a panic while running a statement fails only that
//! statement (XX000). Failures are injected with `SLUICE_FAILPOINTS`.

use std::time::Duration;

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, assert_view_matches, retry_until, text_rows};

/// Runs `sql`, again while it fails with 40001 (its changes were discarded by a recovery).
async fn run_retrying(client: &Client, sql: &str) -> anyhow::Result<()> {
    retry_until(Duration::from_secs(30), || async {
        match client.batch_execute(sql).await {
            Err(e) if e.code().map(|c| c.code()) == Some("40001") => Err(e.into()),
            other => Ok(other),
        }
    })
    .await?
    .with_context(|| sql.to_owned())
}

#[tokio::test]
async fn an_actor_failure_recovers_the_jobs_without_a_restart() -> anyhow::Result<()> {
    let env = [("SLUICE_FAILPOINTS", "actor:rec_v,actor:rec_t")];
    let mut server = Sluice::start_with_env(&env).await?;
    let outcome = recovers(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

async fn recovers(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client.batch_execute("CREATE TABLE rec_other (id int PRIMARY KEY)").await?;
    client.batch_execute("CREATE TABLE rec_t (id int PRIMARY KEY, x int)").await?;
    // The table's first chunk fails its actor: the statement's changes are discarded (40001),
    // and run again they commit.
    let first = client
        .batch_execute("INSERT INTO rec_t SELECT i, i % 7 FROM generate_series(1, 1000) AS i")
        .await;
    if let Err(e) = &first {
        ensure!(e.code().map(|c| c.code()) == Some("40001"), "the failed INSERT: {e:?}");
        run_retrying(
            &client,
            "INSERT INTO rec_t SELECT i, i % 7 FROM generate_series(1, 1000) AS i",
        )
        .await?;
    }
    run_retrying(&client, "INSERT INTO rec_other VALUES (1), (2)").await?;
    // The view's first backfill chunk fails its actor; the foreground CREATE still completes.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW rec_v AS SELECT x, count(*) AS n FROM rec_t GROUP BY x",
        )
        .await
        .context("CREATE MATERIALIZED VIEW across a recovery")?;
    server.ensure_running()?;
    run_retrying(&client, "UPDATE rec_t SET x = x + 1 WHERE id <= 100").await?;
    run_retrying(&client, "DELETE FROM rec_t WHERE id > 900").await?;
    let counts = text_rows(
        &client,
        "SELECT (SELECT count(*) FROM rec_t) AS a, (SELECT count(*) FROM rec_other) AS b",
    )
    .await?;
    ensure!(counts == [[Some("900".to_owned()), Some("2".to_owned())]], "{counts:?}");
    assert_view_matches(&client, "rec_v", "SELECT x, count(*) AS n FROM rec_t GROUP BY x").await?;
    let events = retry_until(Duration::from_secs(30), || async {
        let events =
            text_rows(&client, "SELECT error, recovered FROM rw_catalog.rw_recovery_events")
                .await?;
        ensure!(
            events.len() == 2 && events.iter().all(|e| e[1].as_deref() == Some("t")),
            "{events:?}"
        );
        Ok(events)
    })
    .await?;
    for (event, job) in events.iter().zip(["rec_t", "rec_v"]) {
        let error = event[0].as_deref().unwrap_or_default();
        ensure!(error.contains(&format!("actor:{job}")), "event {error:?} does not name {job}");
    }
    // Everything committed survives a restart too.
    server.restart().await?;
    let client = server.connect().await?;
    let counts = text_rows(&client, "SELECT count(*) FROM rec_t").await?;
    ensure!(counts == [[Some("900".to_owned())]], "{counts:?}");
    assert_view_matches(&client, "rec_v", "SELECT x, count(*) AS n FROM rec_t GROUP BY x").await
}

#[tokio::test]
async fn a_panic_in_a_statement_fails_only_that_statement() -> anyhow::Result<()> {
    let mut server = Sluice::start_with_env(&[("SLUICE_FAILPOINTS", "flush:panic")]).await?;
    let client = server.connect().await?;
    let outcome = async {
        client.batch_execute("CREATE TABLE pan_t (id int PRIMARY KEY)").await?;
        client.batch_execute("INSERT INTO pan_t VALUES (1), (2)").await?;
        let error = client.batch_execute("FLUSH").await.expect_err("the armed FLUSH panics");
        ensure!(error.code().map(|c| c.code()) == Some("XX000"), "{error:?}");
        ensure!(format!("{error:?}").contains("internal error"), "{error:?}");
        // The same connection and the server go on, with everything committed.
        client.batch_execute("FLUSH").await?;
        let rows = text_rows(&client, "SELECT count(*) FROM pan_t").await?;
        ensure!(rows == vec![vec![Some("2".to_owned())]], "{rows:?}");
        server.ensure_running()?;
        Ok(())
    }
    .await;
    outcome.with_context(|| server.log_tail())
}
