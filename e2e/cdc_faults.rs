//! CDC through faults, one regression test per root cause found by running Sluice hard:
//!
//! - an upstream crash sends its slot back behind Sluice's committed offset (by more than one
//!   poll of changes): the change stream must go on;
//! - a restart while a CDC snapshot is in progress and a view reads the table: every actor's
//!   first message must be a barrier, or the view's scan fails and the server exits;
//! - a partitioned upstream table: its partitions' changes arrive as the table's;
//! - a key-changing update of a row with TOASTed values keeps them;
//! - an upstream `TRUNCATE`, mid-snapshot, after it and across a kill, empties the table and
//!   its views;
//! - a change stream that stops reading without an error is said to have stalled and is
//!   started again, on Postgres and on MariaDB (whose quiet stream is not taken for stalled);
//! - a change stream of large rows read by a busy reader, in clear and over TLS, delivers every
//!   row (over TLS it once stopped reading with bytes left in the socket).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, assert_view_matches, retry_until, sorted, text_rows, wait_jobs};
use crate::mysql_upstream::MySqlUpstream;
use crate::upstream::Upstream;

/// Waits until `ours` (in Sluice) and `theirs` (upstream) return the same rows.
async fn converges(client: &Client, up: &Client, ours: &str, theirs: &str) -> anyhow::Result<()> {
    retry_until(Duration::from_secs(60), || async {
        let (a, b) = (sorted(client, ours).await?, sorted(up, theirs).await?);
        if a != b {
            let missing = b.iter().filter(|r| !a.contains(r)).count();
            let extra = a.iter().filter(|r| !b.contains(r)).count();
            anyhow::bail!(
                "{missing} rows missing in Sluice, {extra} extra ({} vs {})",
                a.len(),
                b.len()
            );
        }
        Ok(())
    })
    .await
}

async fn lsn(client: &Client, sql: &str) -> anyhow::Result<u64> {
    let text = text_rows(client, sql).await?[0][0].clone().context("no LSN")?;
    let (hi, lo) = text.split_once('/').context("an LSN has a slash")?;
    Ok((u64::from_str_radix(hi, 16)? << 32) | u64::from_str_radix(lo, 16)?)
}

#[tokio::test]
async fn cdc_goes_on_after_an_upstream_crash_sends_its_slot_back() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = slot_sent_back(&mut upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn slot_sent_back(upstream: &mut Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute("CREATE TABLE t (id int PRIMARY KEY, v int)").await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client.batch_execute("CREATE TABLE t (*) FROM pg TABLE 'public.t'").await?;
    // The slot's position on disk is the one of the last checkpoint, unless decoding moved its
    // restart point meanwhile (which saves it). A transaction of more changes than a poll
    // reads, applied by Sluice, which moves the slot past it; Sluice is killed, so it cannot
    // move the slot again before it is looked at, and the upstream crashes. Tried until the
    // crash does send the slot back. Each round's changes must arrive either way.
    let slot =
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'sluice_pg'";
    let mut up = up;
    let mut client = client;
    let mut sent_back = false;
    for attempt in 0..5 {
        up.batch_execute("CHECKPOINT").await?;
        up.batch_execute(&format!(
            "INSERT INTO t SELECT i, {attempt} FROM generate_series(1, 20000) AS i \
             ON CONFLICT (id) DO UPDATE SET v = excluded.v"
        ))
        .await?;
        let end = lsn(&up, "SELECT pg_current_wal_lsn()::text").await?;
        converges(&client, &up, "SELECT id, v FROM t", "SELECT id, v FROM t")
            .await
            .with_context(|| format!("round {attempt}"))?;
        retry_until(Duration::from_secs(30), || async {
            let at = lsn(&up, slot).await?;
            ensure!(at >= end, "the slot is at {at:X}, not yet past {end:X}");
            Ok(())
        })
        .await?;
        server.kill9().await?;
        drop(up);
        upstream.crash().await?;
        upstream.resume().await?;
        up = upstream.connect("shop").await?;
        sent_back = lsn(&up, slot).await? < end;
        server.restart().await?;
        client = server.connect().await?;
        up.batch_execute(&format!("INSERT INTO t VALUES (-1 - {attempt}, -1)")).await?;
        converges(&client, &up, "SELECT id, v FROM t", "SELECT id, v FROM t")
            .await
            .with_context(|| format!("after the crash of round {attempt}"))?;
        if sent_back {
            break;
        }
    }
    ensure!(sent_back, "five upstream crashes never sent the slot back");
    up.batch_execute("UPDATE t SET v = 0 WHERE id <= 10").await?;
    converges(&client, &up, "SELECT id, v FROM t", "SELECT id, v FROM t").await
}

#[tokio::test]
async fn restarts_mid_cdc_snapshot_with_a_view_on_the_table() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = restarts_mid_snapshot(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn restarts_mid_snapshot(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE big (id bigint PRIMARY KEY, v int);
         INSERT INTO big SELECT i, i % 1000 FROM generate_series(1, 300000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true;
             CREATE TABLE big (*) WITH (snapshot.batch_size = '200') FROM pg TABLE 'public.big';
             CREATE MATERIALIZED VIEW big_sum AS SELECT v % 10 AS k, count(*) AS n, sum(v) AS s FROM big GROUP BY v % 10;",
        )
        .await?;
    // A writer keeps changes coming, so the source has data to send at every start.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let up = upstream.connect("shop").await?;
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let id = (i * 7919) % 300_000 + 1;
                up.execute("UPDATE big SET v = v + 1 WHERE id = $1", &[&id]).await?;
                up.execute(
                    "INSERT INTO big VALUES ($1, 1) ON CONFLICT (id) DO NOTHING",
                    &[&(300_000 + i)],
                )
                .await?;
            }
            anyhow::Ok(())
        })
    };
    for round in 0..5 {
        let client = server.connect().await?;
        retry_until(Duration::from_secs(30), || async {
            let rows =
                text_rows(&client, "SELECT rows_done FROM rw_catalog.rw_ddl_progress").await?;
            ensure!(!rows.is_empty(), "nothing creating");
            Ok(())
        })
        .await
        .with_context(|| format!("round {round}"))?;
        server.restart().await?;
        // A checkpoint needs every actor: one that failed at start would fail it.
        let client = server.connect().await?;
        client
            .batch_execute("FLUSH")
            .await
            .with_context(|| format!("FLUSH after restart {round}"))?;
        server.ensure_running()?;
    }
    stop.store(true, Ordering::Relaxed);
    writer.await??;
    let client = server.connect().await?;
    wait_jobs(&client, Duration::from_secs(180)).await?;
    converges(&client, &up, "SELECT id, v FROM big", "SELECT id, v FROM big").await?;
    assert_view_matches(
        &client,
        "big_sum",
        "SELECT v % 10 AS k, count(*) AS n, sum(v) AS s FROM big GROUP BY v % 10",
    )
    .await
}

#[tokio::test]
async fn cdc_follows_a_partitioned_upstream_table() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = partitioned(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn partitioned(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
         CREATE TABLE m1 PARTITION OF m FOR VALUES IN (1);
         CREATE TABLE m2 PARTITION OF m FOR VALUES IN (2);
         INSERT INTO m SELECT i, 1 + i % 2, 'v' || i FROM generate_series(1, 100) AS i;
         CREATE PUBLICATION theirs;
         CREATE TABLE plain (id int PRIMARY KEY);
         CREATE PUBLICATION partial WITH (publish = 'insert, update, delete');",
    )
    .await?;
    let client = server.connect().await?;
    // A publication that leaves out a kind of change (here truncate) would lose it: a clear
    // error naming it and the ALTER to run.
    client.batch_execute(&upstream.source_sql("part", ", publication.name = 'partial'")).await?;
    let refused = client.batch_execute("CREATE TABLE p (*) FROM part TABLE 'public.plain'").await;
    let error = refused.err().and_then(|e| e.as_db_error().cloned()).context("accepted")?;
    ensure!(
        error.code().code() == "55000" && error.message().contains("does not publish truncate"),
        "a publication without truncate: {error:?}"
    );
    client.batch_execute("DROP SOURCE part").await?;
    // A publication Sluice did not create must publish via the root already: a clear error.
    client.batch_execute(&upstream.source_sql("other", ", publication.name = 'theirs'")).await?;
    let refused =
        client.batch_execute("CREATE TABLE m_other (*) FROM other TABLE 'public.m'").await;
    let code = refused.err().and_then(|e| e.code().map(|c| c.code().to_owned()));
    ensure!(code.as_deref() == Some("55000"), "a publication not via the root: {code:?}");
    client.batch_execute("DROP SOURCE other").await?;

    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client.batch_execute("CREATE TABLE m (*) FROM pg TABLE 'public.m'").await?;
    up.batch_execute(
        "INSERT INTO m VALUES (1000, 1, 'new'), (1001, 2, 'new');
         UPDATE m SET v = 'changed' WHERE id % 10 = 0;
         UPDATE m SET region = 3 - region WHERE id = 7;
         DELETE FROM m WHERE id % 9 = 0;",
    )
    .await?;
    let query = "SELECT id, region, v FROM m";
    converges(&client, &up, query, query).await
}

#[tokio::test]
async fn a_key_changing_update_keeps_toasted_values() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = toasted_key_change(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn toasted_key_change(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    // `big` is stored out of line, so updates that leave it alone do not send it; `full` sends
    // the whole old row with every update (REPLICA IDENTITY FULL).
    up.batch_execute(
        "CREATE TABLE toasted (id int PRIMARY KEY, v int, big text);
         ALTER TABLE toasted ALTER big SET STORAGE EXTERNAL;
         CREATE TABLE full_id (id int PRIMARY KEY, v int, big text);
         ALTER TABLE full_id ALTER big SET STORAGE EXTERNAL;
         ALTER TABLE full_id REPLICA IDENTITY FULL;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client.batch_execute("CREATE TABLE toasted (*) FROM pg TABLE 'public.toasted'").await?;
    client.batch_execute("CREATE TABLE full_id (*) FROM pg TABLE 'public.full_id'").await?;
    for table in ["toasted", "full_id"] {
        up.batch_execute(&format!(
            "INSERT INTO {table} SELECT i, i, repeat(i::text, 3000) FROM generate_series(1, 4) i;
             UPDATE {table} SET id = 10 WHERE id = 1;
             UPDATE {table} SET v = -2 WHERE id = 2;
             UPDATE {table} SET id = 30, v = 0 WHERE id = 3;
             UPDATE {table} SET id = 40 WHERE id = 4;
             DELETE FROM {table} WHERE id = 40;"
        ))
        .await?;
        let query = format!("SELECT id, v, length(big), substr(big, 1, 8) FROM {table}");
        converges(&client, &up, &query, &query).await.with_context(|| table.to_owned())?;
    }
    Ok(())
}

#[tokio::test]
async fn an_upstream_truncate_empties_the_table_mid_snapshot_after_it_and_across_a_kill()
-> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = truncates(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// The snapshot rows the CDC backfill of the table created last has read, by its state table
/// (internal tables are named after their relation's id).
async fn last_rows_read(client: &Client) -> anyhow::Result<i64> {
    let tables = text_rows(client, "SHOW INTERNAL TABLES").await?;
    let state = tables
        .iter()
        .filter_map(|r| r[0].clone())
        .filter(|n| n.contains("streamcdcscan"))
        .max_by_key(|n| n.split('_').nth(3).and_then(|id| id.parse::<u32>().ok()))
        .with_context(|| format!("no CDC state table in {tables:?}"))?;
    let sql = format!("SELECT coalesce(sum(row_count), 0)::bigint FROM {state}");
    Ok(text_rows(client, &sql).await?[0][0].as_deref().unwrap_or("0").parse()?)
}

async fn truncates(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE big (id bigint PRIMARY KEY, v int);
         INSERT INTO big SELECT i, i % 1000 FROM generate_series(1, 200000) AS i;
         CREATE TABLE small (id int PRIMARY KEY, v text);
         INSERT INTO small SELECT i, 's' || i FROM generate_series(1, 1000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    let view = "SELECT v % 10 AS k, count(*) AS n, sum(v) AS s FROM big GROUP BY v % 10";
    client
        .batch_execute(&format!(
            "CREATE TABLE small (*) FROM pg TABLE 'public.small';
             SET background_ddl = true;
             SET backfill_rate_limit = 5000;
             CREATE TABLE big (*) WITH (snapshot.batch_size = '200', backfill.parallelism = '2')
               FROM pg TABLE 'public.big';
             CREATE MATERIALIZED VIEW big_sum AS {view};"
        ))
        .await?;
    retry_until(Duration::from_secs(60), || async {
        let done = last_rows_read(&client).await?;
        ensure!(done >= 2000, "{done} rows read");
        Ok(())
    })
    .await?;
    // Mid-snapshot, in one transaction with changes before and after it: the snapshot ends,
    // and the table holds what was written after the truncate.
    up.batch_execute(
        "BEGIN;
         UPDATE big SET v = -1 WHERE id <= 10;
         TRUNCATE big, small;
         INSERT INTO big SELECT i, i % 7 FROM generate_series(1, 500) AS i;
         INSERT INTO small VALUES (1, 'after');
         COMMIT;
         INSERT INTO big VALUES (1000000, 5);",
    )
    .await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    let read = last_rows_read(&client).await?;
    ensure!(read < 100_000, "the snapshot went on after the truncate: {read} rows read");
    converges(&client, &up, "SELECT id, v FROM big", "SELECT id, v FROM big")
        .await
        .context("after a truncate mid-snapshot")?;
    converges(&client, &up, "SELECT id, v FROM small", "SELECT id, v FROM small").await?;
    assert_view_matches(&client, "big_sum", view).await?;

    // After the snapshot, then killed before the next checkpoint can have recorded it: the
    // source delivers the truncate again.
    up.batch_execute(
        "INSERT INTO small SELECT i, 'again' FROM generate_series(2, 50) AS i;
         TRUNCATE big;
         INSERT INTO big VALUES (7, 7), (8, 8);",
    )
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    up.batch_execute("TRUNCATE small; INSERT INTO small VALUES (99, 'last');").await?;
    converges(&client, &up, "SELECT id, v FROM big", "SELECT id, v FROM big").await?;
    converges(&client, &up, "SELECT id, v FROM small", "SELECT id, v FROM small").await?;
    assert_view_matches(&client, "big_sum", view).await?;
    server.ensure_running()
}

/// A change stream that stops reading its connection without an error (armed by a failpoint)
/// is taken for stuck once the upstream's WAL has been ahead of it for a minute: the stall is
/// logged as the source's error and the stream started again, and the changes made meanwhile
/// arrive.
#[tokio::test]
async fn a_stalled_change_stream_is_said_and_started_again() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server =
        Sluice::start_with_env(&[("SLUICE_FAILPOINTS", "replication:stall:sluice_pg")]).await?;
    let outcome = stalled_stream(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// The same on MariaDB: the binlog stream stalls once; the stall is said, the changes made
/// meanwhile arrive, and the stream, quiet afterwards, is not taken for stalled again (the
/// upstream's heartbeats keep it alive).
#[tokio::test]
async fn a_stalled_binlog_stream_is_said_and_started_again() -> anyhow::Result<()> {
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    let upstream = MySqlUpstream::start().await?;
    let server = Sluice::start_with_env(&[("SLUICE_FAILPOINTS", "binlog:stall:shop")]).await?;
    let outcome = stalled_binlog(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn stalled_binlog(upstream: &MySqlUpstream, server: &Sluice) -> anyhow::Result<()> {
    upstream
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.s (id int PRIMARY KEY, v varchar(10));
             INSERT INTO shop.s SELECT seq, 'before' FROM shop.seq_1_to_100;",
        )
        .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("my", ", server.id = '5421'")).await?;
    client.batch_execute("CREATE TABLE s (*) FROM my TABLE 's'").await?;
    upstream
        .execute(
            "INSERT INTO shop.s SELECT seq, 'during' FROM shop.seq_101_to_200;
             UPDATE shop.s SET v = 'changed' WHERE id <= 10;
             DELETE FROM shop.s WHERE id > 190;",
        )
        .await?;
    const STALL: &str = "the binlog stream read nothing";
    retry_until(Duration::from_secs(120), || async {
        let (ours, theirs) = (
            sorted(&client, "SELECT id, v FROM s").await?,
            upstream.rows("SELECT id, v FROM shop.s").await?,
        );
        ensure!(ours == theirs, "Sluice has {} rows, the upstream {}", ours.len(), theirs.len());
        ensure!(server.current_run_log().contains(STALL), "the stall was not said");
        Ok(())
    })
    .await?;
    // Quiet for longer than a stall takes to be said: heartbeats keep the stream alive.
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(45);
    while tokio::time::Instant::now() < quiet_until {
        let stalls = server.current_run_log().matches(STALL).count();
        ensure!(stalls == 1, "a quiet binlog stream was taken for stalled: {stalls} stalls");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

async fn stalled_stream(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE s (id int PRIMARY KEY, v text);
         INSERT INTO s SELECT i, 'before' FROM generate_series(1, 100) i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client.batch_execute("CREATE TABLE s (*) FROM pg TABLE 'public.s'").await?;
    up.batch_execute(
        "INSERT INTO s SELECT i, 'during' FROM generate_series(101, 200) i;
         UPDATE s SET v = 'changed' WHERE id <= 10;
         DELETE FROM s WHERE id > 190;",
    )
    .await?;
    let query = "SELECT id, v FROM s";
    retry_until(Duration::from_secs(120), || async {
        converges(&client, &up, query, query).await?;
        ensure!(
            server.current_run_log().contains("the replication stream read nothing"),
            "the stall was not said"
        );
        Ok(())
    })
    .await
}

/// A change stream whose reader falls behind a run of large rows, in clear and over TLS: the
/// upstream fills the socket while the reader is busy, and every row must still arrive.
#[tokio::test(flavor = "current_thread")]
async fn a_busy_reader_of_large_rows_reads_them_all() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    upstream.create_database("shop").await?;
    busy_reader(&upstream, None).await.context("in clear")?;
    let ca = upstream.enable_tls().await?;
    busy_reader(&upstream, Some(ca)).await.context("over TLS")
}

async fn busy_reader(upstream: &Upstream, ca: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    use sluice::connector::postgres::PgSourceConfig;
    use sluice::connector::postgres::replication::ChangeStream;
    let up = upstream.connect("shop").await?;
    let name = if ca.is_some() { "tls" } else { "clear" };
    let mut options: std::collections::BTreeMap<String, String> = [
        ("connector", "postgres-cdc".to_owned()),
        ("hostname", "127.0.0.1".to_owned()),
        ("port", upstream.port().to_string()),
        ("username", "postgres".to_owned()),
        ("database.name", "shop".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if let Some(ca) = &ca {
        options.insert("ssl.mode".into(), "verify-full".into());
        options.insert("ssl.root.cert".into(), ca.display().to_string());
    }
    let config = PgSourceConfig::from_options(name, &options)?;
    config.prepare(&config.connect().await?).await?;
    up.batch_execute(&format!(
        "CREATE TABLE big_{name} (id int PRIMARY KEY, v text);
         ALTER TABLE big_{name} ALTER COLUMN v SET STORAGE EXTERNAL;
         ALTER PUBLICATION sluice_{name} ADD TABLE big_{name};"
    ))
    .await?;
    // 60 rows of 960 kB (incompressible text: md5 digests), 3 to a transaction.
    const ROWS: usize = 60;
    for first in (0..ROWS).step_by(3) {
        up.batch_execute(&format!(
            "INSERT INTO big_{name} SELECT i, (SELECT string_agg(md5(i::text || '.' || j::text), '') \
             FROM generate_series(1, 30000) AS j) FROM generate_series({first}, {}) AS i",
            first + 2
        ))
        .await?;
    }
    let mut stream = ChangeStream::spawn(config, 0, 0);
    let mut seen = 0;
    while seen < ROWS {
        let batch = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .with_context(|| format!("the stream stalled after {seen} of {ROWS} rows"))?
            .context("the stream ended")??;
        seen += batch.changes.iter().filter(|c| !c.relation).count();
        // Busy elsewhere, as an executor is under load: the stream's task does not run, and
        // the upstream fills the socket meanwhile.
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(seen == ROWS, "{seen} changes for {ROWS} rows");
    Ok(())
}
