//! Upstream habits that once made a CDC table differ from its upstream without a word; each
//! must now be followed, or stop the table (or the source) with a clear error:
//!
//! - a MySQL source killed before its first change is recorded: the changes made meanwhile
//!   (a `TRUNCATE` among them) arrive after the restart;
//! - upstream schema changes on Postgres and MariaDB: a column added after the others, or
//!   dropped, is followed (a dropped column that a view reads is kept); a column renamed,
//!   retyped, or dropped and added again, and a table dropped or created again, stop the
//!   table with the reason in `rw_cdc_progress.table_error`, the jobs view (the dashboard's
//!   source) and the log, and the server stays up;
//! - tables by pattern (`CREATE TABLE FROM src TABLES 'public.orders_*'`): one CDC table per
//!   matching upstream table, those created later picked up, also across a kill -9, a
//!   dropped one not created again;
//! - a MariaDB change logged as a statement stops the source at it, with the reason in
//!   `rw_cdc_progress.source_error`, never skipped;
//! - values: infinite and BC dates and timestamps and inet values read as Postgres prints
//!   them; a value the table cannot hold exactly (a numeric NaN, more fraction digits than
//!   its column keeps) stops the table, naming the value and the key, instead of NULL;
//! - a second source on a replication slot another source reads is refused.

use std::time::Duration;

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, retry_until, sorted, text_rows, wait_jobs};
use crate::mysql_upstream::MySqlUpstream;
use crate::upstream::Upstream;

/// Waits until Sluice's rows of `ours` equal MariaDB's rows of `theirs`.
async fn converges_mysql(
    client: &Client,
    upstream: &MySqlUpstream,
    ours: &str,
    theirs: &str,
) -> anyhow::Result<()> {
    retry_until(Duration::from_secs(60), || async {
        let (a, b) = (sorted(client, ours).await?, upstream.rows(theirs).await?);
        ensure!(
            a == b,
            "Sluice has {} rows, the upstream {}: {:?} vs {:?}",
            a.len(),
            b.len(),
            a.first(),
            b.first()
        );
        Ok(())
    })
    .await
}

/// The `table_error` of CDC table `table` once it has one.
async fn stopped(client: &Client, table: &str) -> anyhow::Result<String> {
    let sql =
        format!("SELECT table_error FROM rw_catalog.rw_cdc_progress WHERE table_name = '{table}'");
    retry_until(Duration::from_secs(30), || async {
        let rows = text_rows(client, &sql).await?;
        rows.first()
            .and_then(|r| r[0].clone())
            .with_context(|| format!("{table} has not stopped: {rows:?}"))
    })
    .await
}

/// Fails if CDC table `table` has stopped.
async fn not_stopped(client: &Client, table: &str) -> anyhow::Result<()> {
    let sql =
        format!("SELECT table_error FROM rw_catalog.rw_cdc_progress WHERE table_name = '{table}'");
    let rows = text_rows(client, &sql).await?;
    ensure!(rows.len() == 1 && rows[0][0].is_none(), "{table}: {rows:?}");
    Ok(())
}

#[tokio::test]
async fn a_mysql_source_killed_before_its_first_change_loses_nothing() -> anyhow::Result<()> {
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    let upstream = MySqlUpstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = killed_before_first_change(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn killed_before_first_change(
    upstream: &MySqlUpstream,
    server: &mut Sluice,
) -> anyhow::Result<()> {
    upstream
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.t (id int PRIMARY KEY, v varchar(10));
             INSERT INTO shop.t SELECT seq, 'old' FROM shop.seq_1_to_2000;
             CREATE TABLE shop.u (id int PRIMARY KEY, v int);",
        )
        .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("my", ", server.id = '5411'")).await?;
    client.batch_execute("CREATE TABLE t (*) FROM my TABLE 't'").await?;
    // Killed before any change streamed: the position to resume from is the source's start.
    server.kill9().await?;
    upstream
        .execute(
            "TRUNCATE shop.t;
             INSERT INTO shop.t VALUES (1, 'a'), (2, 'b'), (3, 'c');
             UPDATE shop.t SET v = 'bb' WHERE id = 2;",
        )
        .await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_mysql(&client, upstream, "SELECT id, v FROM t", "SELECT id, v FROM shop.t").await?;

    // The same right after a table's creation, before its first change, with a new table.
    client.batch_execute("CREATE TABLE u (*) FROM my TABLE 'u'").await?;
    server.kill9().await?;
    upstream.execute("INSERT INTO shop.u VALUES (1, 1), (2, 2)").await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_mysql(&client, upstream, "SELECT id, v FROM u", "SELECT id, v FROM shop.u").await?;
    server.ensure_running()
}

#[tokio::test]
async fn upstream_schema_changes_are_followed_or_stop_the_table() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = pg_schema_changes(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn pg_schema_changes(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    let tables = [
        "added", "nulls", "volatile", "declared", "slow", "dropped", "pruned", "strict", "widened",
        "retyped", "recast", "readded", "gone", "again", "renamed",
    ];
    for t in tables {
        let rows = if t == "slow" { 3000 } else { 50 };
        up.batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, a text, b int);
             INSERT INTO {t} SELECT i, 'a' || i, i FROM generate_series(1, {rows}) i;"
        ))
        .await?;
    }
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    for t in tables {
        let columns = if t == "declared" { "(id int PRIMARY KEY, a text)" } else { "(*)" };
        let with = if t == "strict" { "WITH (schema.change = 'stop')" } else { "" };
        if t == "slow" {
            continue;
        }
        client
            .batch_execute(&format!("CREATE TABLE {t} {columns} {with} FROM pg TABLE 'public.{t}'"))
            .await?;
    }
    wait_jobs(&client, Duration::from_secs(60)).await?;
    // Views created before the columns are added keep the columns they were created with.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW added_v AS SELECT * FROM added;
             CREATE MATERIALIZED VIEW added_n AS SELECT count(*) AS n, sum(b) AS s FROM added;
             CREATE MATERIALIZED VIEW dropped_a AS SELECT id, a FROM dropped;
             CREATE MATERIALIZED VIEW pruned_b AS SELECT id, b FROM pruned;",
        )
        .await?;
    // `slow` is still reading its snapshot when its column is added.
    client
        .batch_execute(
            "SET background_ddl = true; SET backfill_rate_limit = 1000;
             CREATE TABLE slow (*) WITH (snapshot.batch_size = '100') FROM pg TABLE 'public.slow';
             SET background_ddl = false; SET backfill_rate_limit = -1;",
        )
        .await?;
    up.batch_execute(
        "ALTER TABLE added ADD COLUMN c int DEFAULT 5; INSERT INTO added VALUES (51, 'x', 51, 9);
         UPDATE added SET b = -1 WHERE id <= 3;
         ALTER TABLE nulls ADD COLUMN d text; INSERT INTO nulls VALUES (51, 'x', 51, 'dd');
         UPDATE nulls SET d = 'u' WHERE id = 2;
         ALTER TABLE volatile ADD COLUMN e float8 DEFAULT random();
         INSERT INTO volatile VALUES (51, 'x', 51, 0.5);
         ALTER TABLE declared ADD COLUMN c int DEFAULT 1; INSERT INTO declared VALUES (51, 'x', 51, 2);
         ALTER TABLE slow ADD COLUMN c numeric DEFAULT 1.50; UPDATE slow SET c = 2.250 WHERE id % 100 = 0;
         ALTER TABLE slow DROP COLUMN b; UPDATE slow SET a = 'z' WHERE id % 7 = 0;
         ALTER TABLE dropped DROP COLUMN a; INSERT INTO dropped VALUES (51, 51);
         UPDATE dropped SET b = -b WHERE id <= 5;
         ALTER TABLE pruned DROP COLUMN a; INSERT INTO pruned VALUES (51, 51);
         ALTER TABLE strict DROP COLUMN a; INSERT INTO strict VALUES (51, 51);
         ALTER TABLE widened ALTER COLUMN a TYPE varchar(300) USING upper(a);
         INSERT INTO widened VALUES (51, 'w', 51);
         UPDATE widened SET a = 'z' WHERE id < 3;
         ALTER TABLE retyped ALTER COLUMN b TYPE text; INSERT INTO retyped VALUES (51, 'x', 'y');
         ALTER TABLE recast ALTER COLUMN b TYPE text; INSERT INTO recast VALUES (51, 'x', '7');
         UPDATE recast SET b = '1234' WHERE id = 1;
         ALTER TABLE readded DROP COLUMN b; ALTER TABLE readded ADD COLUMN b int;
         INSERT INTO readded VALUES (51, 'x', 1);
         DROP TABLE gone;
         DROP TABLE again; CREATE TABLE again (id int PRIMARY KEY, a text, b int);
         ALTER TABLE renamed RENAME COLUMN a TO a2; INSERT INTO renamed VALUES (51, 'x', 51);",
    )
    .await?;
    // Tables declared `(*)` take the added columns, rows from before them holding what the
    // upstream holds (the default, NULL, or a value per row); a view keeps its columns.
    let followed = [
        ("SELECT * FROM added", "SELECT * FROM added"),
        ("SELECT * FROM nulls", "SELECT * FROM nulls"),
        ("SELECT * FROM volatile", "SELECT * FROM volatile"),
        ("SELECT * FROM slow", "SELECT * FROM slow"),
        ("SELECT * FROM declared", "SELECT id, a FROM declared"),
        ("SELECT * FROM added_v", "SELECT id, a, b FROM added"),
        ("SELECT n, s FROM added_n", "SELECT count(*), sum(b) FROM added"),
        // A dropped column that no view reads goes; one that a view reads stays.
        ("SELECT * FROM pruned", "SELECT * FROM pruned"),
        ("SELECT * FROM pruned_b", "SELECT * FROM pruned"),
        ("SELECT id, b FROM dropped", "SELECT * FROM dropped"),
        // Text to wider text is followed in place; values the upstream rewrote are read again.
        ("SELECT * FROM widened", "SELECT * FROM widened"),
    ];
    converges_all(&client, &up, &followed).await?;
    // The kept column holds the values it had, NULL in rows changed since; the view reads it
    // as the table holds it, and rw_cdc_progress says so.
    let kept = "SELECT count(*), count(a), min(a) FROM dropped";
    let theirs = [Some("51".to_owned()), Some("45".to_owned()), Some("a10".to_owned())];
    ensure!(
        text_rows(&client, kept).await?[0] == theirs,
        "dropped: {:?}",
        text_rows(&client, kept).await?
    );
    converges_all(&client, &client, &[("SELECT * FROM dropped_a", "SELECT id, a FROM dropped")])
        .await?;
    let note = text_rows(
        &client,
        "SELECT table_name, schema_note FROM rw_catalog.rw_cdc_progress WHERE schema_note IS NOT NULL",
    )
    .await?;
    ensure!(note.len() == 1 && note[0][0].as_deref() == Some("dropped"), "{note:?}");
    ensure!(
        note[0][1].as_deref().is_some_and(|n| n.contains("column(s) a dropped upstream")),
        "{note:?}"
    );
    let described = text_rows(&client, "SELECT * FROM added_v WHERE id = 1").await?;
    ensure!(described[0].len() == 3, "the view took the added column: {described:?}");
    for t in ["added", "nulls", "volatile", "slow", "declared", "dropped", "pruned", "widened"] {
        not_stopped(&client, t).await?;
    }
    // A widened table reads its upstream again as it is (its columns are the same ones).
    client.batch_execute("ALTER TABLE widened RESNAPSHOT").await?;
    converges_all(&client, &up, &[("SELECT * FROM widened", "SELECT * FROM widened")]).await?;
    for (t, why) in [
        ("strict", "dropped column(s) a, and the table was created with schema.change = 'stop'"),
        ("retyped", "column b changed type upstream from integer to text"),
        ("recast", "column b changed type upstream from integer"),
        ("readded", "column b was dropped and added again"),
        ("gone", "the upstream table was dropped"),
        ("again", "dropped and created again"),
        ("renamed", "column a was renamed"),
    ] {
        let error = stopped(&client, t).await?;
        // The description's own types decide, before any value after it is cast.
        ensure!(error.contains(why), "{t}: {error}");
        let way_on = format!("ALTER TABLE {t} REFRESH SCHEMA builds it again");
        ensure!(error.contains(&way_on), "{t}: {error}");
    }
    // Stopped tables keep what they had and take nothing more; the others go on.
    up.batch_execute("UPDATE recast SET b = '0'; UPDATE added SET a = 'after'").await?;
    retry_until(Duration::from_secs(30), || async {
        let rows = text_rows(&client, "SELECT count(*) FROM added WHERE a = 'after'").await?;
        ensure!(rows[0][0].as_deref() == Some("51"), "{rows:?}");
        Ok(())
    })
    .await?;
    // Values that an integer column could hold are not applied after the retype either.
    let kept = text_rows(&client, "SELECT count(*), sum(b) FROM recast").await?;
    ensure!(kept[0] == [Some("50".into()), Some("1275".into())], "recast: {kept:?}");
    // The jobs view (the dashboard's) says why.
    let (status, body) = server.http("GET", "/api/jobs").await?;
    ensure!(status == 200, "{status}: {body}");
    ensure!(body.contains("stopped: the table stopped following public.gone"), "{body}");
    // And a restart finds every stopped table stopped again.
    server.restart().await?;
    let client = server.connect().await?;
    up.batch_execute("INSERT INTO strict VALUES (52, 52); INSERT INTO readded VALUES (52, 'y', 2)")
        .await?;
    for t in ["strict", "retyped", "recast", "readded", "gone", "again"] {
        stopped(&client, t).await.with_context(|| format!("{t} after a restart"))?;
    }
    not_stopped(&client, "added").await?;
    // The way on: REFRESH SCHEMA builds a stopped table again from its upstream table as it
    // is now (a column renamed, retyped, dropped and added again; another table under the
    // name), and it takes changes again. A table that views read is refused.
    for t in ["renamed", "retyped", "readded", "again"] {
        client.batch_execute(&format!("ALTER TABLE {t} REFRESH SCHEMA")).await?;
    }
    up.batch_execute(
        "INSERT INTO renamed VALUES (53, 'z', 53); UPDATE retyped SET b = 'text now' WHERE id = 1;
         INSERT INTO again VALUES (1, 'new', 1);",
    )
    .await?;
    let refreshed =
        ["renamed", "retyped", "readded", "again"].map(|t| format!("SELECT * FROM {t}"));
    let pairs: Vec<(&str, &str)> = refreshed.iter().map(|q| (q.as_str(), q.as_str())).collect();
    converges_all(&client, &up, &pairs).await?;
    let columns = text_rows(&client, "SELECT id, a2, b FROM renamed WHERE id = 53").await?;
    ensure!(columns[0] == [Some("53".into()), Some("z".into()), Some("53".into())], "{columns:?}");
    for t in ["renamed", "retyped", "readded", "again"] {
        not_stopped(&client, t).await?;
    }
    let err = client.batch_execute("ALTER TABLE dropped REFRESH SCHEMA").await.unwrap_err();
    let db = err.as_db_error().context("a server error")?;
    ensure!(db.code().code() == "2BP01" && db.message().contains("dropped_a"), "{err:?}");
    // Columns added and dropped while Sluice is down are followed once it runs again, also a
    // drop that no change describes (found by the table's periodic check upstream).
    server.kill9().await?;
    up.batch_execute(
        "ALTER TABLE added ADD COLUMN f text DEFAULT 'f'; INSERT INTO added VALUES (52, 'y', 52, 1, 'g');
         UPDATE added SET c = 0 WHERE id = 4;
         ALTER TABLE nulls DROP COLUMN a; UPDATE nulls SET b = 0 WHERE id <= 3;
         ALTER TABLE volatile DROP COLUMN a;",
    )
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_all(&client, &up, &followed).await?;
    not_stopped(&client, "added").await?;
    server.ensure_running()
}

#[tokio::test]
async fn numbers_widened_upstream_are_followed_in_place_or_kept_for_views() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = pg_widenings(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn pg_widenings(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    for t in ["wide", "kept", "keyed"] {
        up.batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, n int, r real, d numeric(10,2), s smallint);
             INSERT INTO {t} SELECT i, i * 1000, i * 0.5, i * 1.25, i
               FROM generate_series(1, 300) i;
             UPDATE {t} SET n = NULL, r = NULL WHERE id % 10 = 0;"
        ))
        .await?;
    }
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    for t in ["wide", "kept", "keyed"] {
        client.batch_execute(&format!("CREATE TABLE {t} (*) FROM pg TABLE 'public.{t}'")).await?;
    }
    wait_jobs(&client, Duration::from_secs(60)).await?;
    // A view that reads none of the widened columns, and one that reads `kept.n`.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW wide_s AS SELECT count(*) AS c, sum(id) AS s FROM wide;
             CREATE MATERIALIZED VIEW kept_n AS SELECT id, n FROM kept;",
        )
        .await?;
    up.batch_execute(
        "ALTER TABLE wide ALTER COLUMN n TYPE bigint, ALTER COLUMN r TYPE double precision,
           ALTER COLUMN d TYPE numeric(40,4);
         INSERT INTO wide VALUES (301, 5000000000, 0.1, 123456789012345678901234.5678, 1);
         UPDATE wide SET n = n * 10000000 WHERE id % 7 = 0;
         ALTER TABLE wide ALTER COLUMN d TYPE numeric(45,4);
         UPDATE wide SET d = -d WHERE id % 11 = 0;
         ALTER TABLE kept ALTER COLUMN n TYPE bigint;
         INSERT INTO kept VALUES (301, 7, 1, 1, 1); UPDATE kept SET n = -n WHERE id < 5;
         ALTER TABLE keyed ALTER COLUMN id TYPE bigint; INSERT INTO keyed VALUES (301, 1, 1, 1, 1);",
    )
    .await?;
    // Widened in place: the table takes the new types, old rows read in them; views go on.
    let followed = [
        ("SELECT * FROM wide", "SELECT * FROM wide"),
        ("SELECT c, s FROM wide_s", "SELECT count(*), sum(id) FROM wide"),
        ("SELECT * FROM kept", "SELECT * FROM kept"),
        ("SELECT * FROM kept_n", "SELECT id, n FROM kept"),
    ];
    converges_all(&client, &up, &followed).await?;
    let types = "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = 'wide' AND a.attnum > 0 \
                 ORDER BY a.attnum";
    let described: Vec<String> = text_rows(&client, types)
        .await?
        .iter()
        .map(|r| format!("{} {}", r[0].as_deref().unwrap_or(""), r[1].as_deref().unwrap_or("")))
        .collect();
    let want = ["id integer", "n bigint", "r double precision", "d numeric(45,4)", "s smallint"];
    ensure!(described == want, "{described:?}");
    // A view created now reads the new type.
    client.batch_execute("CREATE MATERIALIZED VIEW wide_n AS SELECT sum(n) AS n FROM wide").await?;
    converges_all(&client, &up, &[("SELECT n FROM wide_n", "SELECT sum(n) FROM wide")]).await?;
    // The column a view reads keeps its type, and rw_cdc_progress says so.
    let note = text_rows(
        &client,
        "SELECT schema_note FROM rw_catalog.rw_cdc_progress WHERE table_name = 'kept'",
    )
    .await?;
    ensure!(
        note[0][0].as_deref().is_some_and(|n| n.contains("n (bigint upstream, kept as integer)")),
        "{note:?}"
    );
    // A key column widened stops the table.
    let error = stopped(&client, "keyed").await?;
    ensure!(error.contains("column id changed type upstream from integer to bigint"), "{error}");
    for t in ["wide", "kept"] {
        not_stopped(&client, t).await?;
    }
    // Widened again while Sluice is down (killed), and written meanwhile.
    server.kill9().await?;
    up.batch_execute(
        "ALTER TABLE wide ALTER COLUMN s TYPE bigint; UPDATE wide SET s = s * 100000000000 WHERE id % 3 = 0;
         INSERT INTO wide VALUES (302, NULL, NULL, NULL, 9000000000000);",
    )
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_all(&client, &up, &followed[..2]).await?;
    converges_all(&client, &up, &[("SELECT n FROM wide_n", "SELECT sum(n) FROM wide")]).await?;
    // A value the kept type cannot hold stops the table, saying how to widen it; dropping
    // the view and reading the snapshot again does.
    up.batch_execute("INSERT INTO kept VALUES (302, 5000000000, 1, 1, 1)").await?;
    let error = stopped(&client, "kept").await?;
    ensure!(
        error.contains(
            "cannot be held exactly by integer; the column was widened upstream (to bigint)"
        ) && error.contains("drop those views, then ALTER TABLE kept RESNAPSHOT widens it"),
        "{error}"
    );
    client.batch_execute("DROP MATERIALIZED VIEW kept_n; ALTER TABLE kept RESNAPSHOT").await?;
    converges_all(&client, &up, &[("SELECT * FROM kept", "SELECT * FROM kept")]).await?;
    not_stopped(&client, "kept").await?;
    server.ensure_running()
}

/// Waits until each query of Sluice's (first) returns the rows its upstream query does.
async fn converges_all(client: &Client, up: &Client, pairs: &[(&str, &str)]) -> anyhow::Result<()> {
    for (ours, theirs) in pairs {
        retry_until(Duration::from_secs(60), || async {
            let (a, b) = (sorted(client, ours).await?, sorted(up, theirs).await?);
            ensure!(
                a == b,
                "{ours}: {} rows vs {}: {:?} vs {:?}",
                a.len(),
                b.len(),
                a.first(),
                b.first()
            );
            Ok(())
        })
        .await?;
    }
    Ok(())
}

#[tokio::test]
async fn mysql_schema_changes_are_followed_or_stop_and_statement_logging_stops()
-> anyhow::Result<()> {
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    let upstream = MySqlUpstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = mysql_events(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn mysql_events(upstream: &MySqlUpstream, server: &mut Sluice) -> anyhow::Result<()> {
    let mut setup = String::from("CREATE DATABASE shop;");
    for t in ["added", "dropped", "widened", "grown", "moved", "gone", "again"] {
        setup.push_str(&format!(
            "CREATE TABLE shop.{t} (id int PRIMARY KEY, a varchar(20), b int);
             INSERT INTO shop.{t} SELECT seq, CONCAT('a', seq), seq FROM shop.seq_1_to_50;"
        ));
    }
    upstream.execute(&setup).await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("my", ", server.id = '5412'")).await?;
    for t in ["added", "dropped", "widened", "grown", "moved", "gone", "again"] {
        client.batch_execute(&format!("CREATE TABLE {t} (*) FROM my TABLE '{t}'")).await?;
    }
    wait_jobs(&client, Duration::from_secs(60)).await?;
    upstream
        .execute(
            "ALTER TABLE shop.added ADD COLUMN c int DEFAULT 5;
             INSERT INTO shop.added VALUES (51, 'x', 51, 9);
             ALTER TABLE shop.dropped DROP COLUMN a; INSERT INTO shop.dropped VALUES (51, 51);
             ALTER TABLE shop.widened MODIFY COLUMN a varchar(200);
             INSERT INTO shop.widened VALUES (51, REPEAT('w', 150), 51);
             ALTER TABLE shop.grown MODIFY COLUMN b bigint;
             INSERT INTO shop.grown VALUES (51, 'x', 5000000000); UPDATE shop.grown SET b = -b WHERE id < 9;
             ALTER TABLE shop.moved MODIFY COLUMN b int FIRST;
             INSERT INTO shop.moved VALUES (51, 51, 'x');
             DROP TABLE shop.gone;
             DROP TABLE shop.again; CREATE TABLE shop.again (id int PRIMARY KEY, a varchar(20), b int);
             INSERT INTO shop.again VALUES (1, 'new', 1);",
        )
        .await?;
    // The added column is followed: rows from before it hold the default; the dropped one
    // goes (no view reads it).
    converges_mysql(&client, upstream, "SELECT * FROM added", "SELECT * FROM shop.added").await?;
    not_stopped(&client, "added").await?;
    converges_mysql(&client, upstream, "SELECT * FROM dropped", "SELECT * FROM shop.dropped")
        .await?;
    not_stopped(&client, "dropped").await?;
    converges_mysql(&client, upstream, "SELECT * FROM widened", "SELECT * FROM shop.widened")
        .await?;
    not_stopped(&client, "widened").await?;
    // An integer widened to bigint is followed in place.
    converges_mysql(&client, upstream, "SELECT * FROM grown", "SELECT * FROM shop.grown").await?;
    not_stopped(&client, "grown").await?;
    // The binlog's DDL says why, or (when the jobs were rebuilt meanwhile, as following the
    // column added to `added` does) the fresh description of the table that a restarted
    // backfill checks first.
    for (t, why, or) in [
        (
            "moved",
            "the upstream ran ALTER TABLE shop.moved MODIFY COLUMN b int FIRST",
            "moved upstream",
        ),
        ("gone", "the upstream ran DROP TABLE", "the upstream table was dropped"),
        ("again", "the upstream ran DROP TABLE", "the upstream table was dropped"),
    ] {
        let error = stopped(&client, t).await?;
        ensure!(error.contains(why) || error.contains(or), "{t}: {error}");
    }
    // A restart finds them stopped, though nothing upstream says so again (the table created
    // again has the old one's name and columns).
    server.restart().await?;
    let client = server.connect().await?;
    upstream
        .execute(
            "INSERT INTO shop.again VALUES (2, 'newer', 2); UPDATE shop.dropped SET b = 0 WHERE id < 4",
        )
        .await?;
    converges_mysql(&client, upstream, "SELECT * FROM dropped", "SELECT * FROM shop.dropped")
        .await?;
    for t in ["moved", "gone", "again"] {
        stopped(&client, t).await.with_context(|| format!("{t} after a restart"))?;
    }
    let again = text_rows(&client, "SELECT count(*) FROM again WHERE a LIKE 'new%'").await?;
    ensure!(again == [[Some("0".to_owned())]], "again took the new table's rows: {again:?}");
    // REFRESH SCHEMA builds a stopped table again from its upstream table as it is now (a
    // column moved first; another table under the name), and it takes changes again.
    for t in ["moved", "again"] {
        client.batch_execute(&format!("ALTER TABLE {t} REFRESH SCHEMA")).await?;
    }
    upstream.execute("INSERT INTO shop.moved VALUES (52, 52, 'y'); INSERT INTO shop.again VALUES (3, 'newest', 3)").await?;
    converges_mysql(&client, upstream, "SELECT * FROM moved", "SELECT * FROM shop.moved").await?;
    converges_mysql(&client, upstream, "SELECT * FROM again", "SELECT * FROM shop.again").await?;

    // A change logged as a statement: the source stops at it and says why.
    upstream
        .execute(
            "SET SESSION binlog_format = 'STATEMENT';
             UPDATE shop.added SET b = 0 WHERE id = 1;",
        )
        .await?;
    let error = retry_until(Duration::from_secs(30), || async {
        let rows = text_rows(
            &client,
            "SELECT source_error FROM rw_catalog.rw_cdc_progress WHERE table_name = 'added'",
        )
        .await?;
        rows.first().and_then(|r| r[0].clone()).context("no source error yet")
    })
    .await?;
    ensure!(error.contains("as a statement, not as rows"), "{error}");
    let row = text_rows(&client, "SELECT b FROM added WHERE id = 1").await?;
    ensure!(row == [[Some("1".to_owned())]], "the statement's change was applied: {row:?}");
    server.ensure_running()
}

#[tokio::test]
async fn values_are_kept_exactly_or_stop_the_table_naming_the_key() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = exact_values(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn exact_values(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "SET TimeZone = 'UTC';
         CREATE TABLE held (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, a inet);
         INSERT INTO held VALUES (1, 'infinity', '-infinity', 'infinity', '::1'),
           (2, '0044-03-15 BC', '0001-12-31 23:59:59.5 BC', '2000-01-01 00:00:00+00', '10.0.0.1/8'),
           (3, NULL, NULL, NULL, NULL);
         CREATE TABLE nan (id int PRIMARY KEY, n numeric, w numeric(60, 10));
         INSERT INTO nan VALUES (1, 1.5, 1), (2, 'NaN', 'NaN'), (3, 'Infinity', -0.5),
           (4, '-Infinity', 12345678901234567890123456789012345678901234567890.0123456789);
         CREATE TABLE tiny (id int PRIMARY KEY, n numeric);
         INSERT INTO tiny VALUES (1, 1.5), (2, 0.000000000000000000001);
         CREATE TABLE fine (id int PRIMARY KEY, n numeric);
         INSERT INTO fine VALUES (1, 1.5), (2, 0.00000000000000000001);
         CREATE TABLE seg (id int PRIMARY KEY, c char(10));
         INSERT INTO seg VALUES (1, 'BUILDING'), (2, 'AUTO'), (3, '');",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true;
             CREATE TABLE held (*) FROM pg TABLE 'public.held';
             CREATE TABLE nan (*) FROM pg TABLE 'public.nan';
             CREATE TABLE tiny (*) FROM pg TABLE 'public.tiny';
             CREATE TABLE fine (*) FROM pg TABLE 'public.fine';
             CREATE TABLE seg (*) FROM pg TABLE 'public.seg';
             CREATE MATERIALIZED VIEW building AS SELECT count(*) AS n FROM seg
               WHERE c = 'BUILDING';",
        )
        .await?;
    // Infinite and BC dates and timestamps, inet: from the snapshot and from the stream alike.
    up.batch_execute("INSERT INTO held SELECT id + 10, d, ts, tz, a FROM held").await?;
    let query = "SELECT id, d, ts, tz, a FROM held";
    retry_until(Duration::from_secs(60), || async {
        let (a, b) = (sorted(&client, query).await?, sorted(&up, query).await?);
        ensure!(a == b, "held: {a:?} vs {b:?}");
        Ok(())
    })
    .await?;
    // char(n) without its blank padding, as Postgres compares it: a view's filter matches,
    // from the snapshot and from the stream alike.
    up.batch_execute("INSERT INTO seg VALUES (4, 'BUILDING'), (5, 'BUILDING x')").await?;
    retry_until(Duration::from_secs(60), || async {
        let n = text_rows(&client, "SELECT n FROM building").await?;
        ensure!(n == [[Some("2".to_owned())]], "building: {n:?}");
        let query = "SELECT id, c::text FROM seg WHERE c = 'BUILDING' OR c = ''";
        let (a, b) = (sorted(&client, query).await?, sorted(&up, query).await?);
        ensure!(a == b, "seg: {a:?} vs {b:?}");
        Ok(())
    })
    .await?;
    // Numeric NaN, the infinities and 60-digit numerics: from the snapshot and the stream.
    up.batch_execute("INSERT INTO nan SELECT id + 10, n, w FROM nan").await?;
    let query = "SELECT id, n::text, w::text FROM nan";
    retry_until(Duration::from_secs(60), || async {
        let (a, b) = (sorted(&client, query).await?, sorted(&up, query).await?);
        ensure!(a == b, "nan: {a:?} vs {b:?}");
        Ok(())
    })
    .await?;
    // A value the table cannot hold exactly stops it, naming it: from a snapshot page, and
    // from a change (with its key).
    let error = stopped(&client, "tiny").await?;
    ensure!(
        error.contains(
            "the upstream value 0.000000000000000000001 of column n (key 2) cannot be held \
             exactly by numeric"
        ),
        "{error}"
    );
    // WAIT does not wait for a job that cannot finish: it says which.
    let waited = client.batch_execute("WAIT").await.err().context("WAIT waited for tiny")?;
    let db = waited.as_db_error().context("not a server error")?;
    ensure!(
        db.code().code() == "55000" && db.message().contains("tiny: the table stopped"),
        "{db:?}"
    );
    // A foreground CREATE of such a table fails with the reason and leaves nothing.
    client.batch_execute("SET background_ddl = false").await?;
    let created = client.batch_execute("CREATE TABLE tiny2 (*) FROM pg TABLE 'public.tiny'").await;
    let error = created.err().context("a table that cannot hold its rows was created")?;
    let db = error.as_db_error().context("not a server error")?;
    ensure!(db.code().code() == "22003", "{db:?}");
    ensure!(
        db.message().contains("value 0.000000000000000000001 of column n (key 2) cannot be held"),
        "{}",
        db.message()
    );
    let left = text_rows(
        &client,
        "SELECT count(*) FROM rw_catalog.rw_cdc_progress WHERE table_name = 'tiny2'",
    )
    .await?;
    ensure!(left == [[Some("0".to_owned())]], "{left:?}");
    up.batch_execute("INSERT INTO fine VALUES (7, 1e57)").await?;
    let error = stopped(&client, "fine").await?;
    ensure!(
        error.contains(&format!(
            "the upstream value 1{} of column n (key 7) cannot be held exactly",
            "0".repeat(57)
        )),
        "{error}"
    );
    let kept = text_rows(&client, "SELECT n FROM fine ORDER BY id").await?;
    let tiny = "0.00000000000000000001".to_owned();
    ensure!(kept == [[Some("1.5".to_owned())], [Some(tiny)]], "{kept:?}");
    Ok(())
}

#[tokio::test]
async fn toasted_values_survive_key_moves_and_the_source_keeps_reading() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = toast_moves(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// The shape users reported: 192 kB values stored out of line, rows whose key moves while the
/// large value stays, then updates of the large and the small value and a delete, in six
/// tables (replica identity DEFAULT and FULL) at once, several rounds.
async fn toast_moves(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    let tables = ["d0", "d1", "d2", "f0", "f1", "f2"];
    for t in tables {
        up.batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, k int, big text, small text);
             ALTER TABLE {t} ALTER COLUMN big SET STORAGE EXTERNAL;
             INSERT INTO {t} SELECT i, i, repeat(md5(i::text), 6000), 's' || i
               FROM generate_series(1, 20) i;"
        ))
        .await?;
        if t.starts_with('f') {
            up.batch_execute(&format!("ALTER TABLE {t} REPLICA IDENTITY FULL")).await?;
        }
    }
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    for t in tables {
        client.batch_execute(&format!("CREATE TABLE {t} (*) FROM pg TABLE 'public.{t}'")).await?;
    }
    for round in 0..4 {
        let third = round % 3;
        for t in tables {
            up.batch_execute(&format!(
                "UPDATE {t} SET id = id + 1000 WHERE id % 7 = {round};
                 UPDATE {t} SET big = big || 'z' WHERE id % 5 = {round};
                 UPDATE {t} SET small = 'r{round}', k = k + 1 WHERE id % 3 = {third};
                 BEGIN; UPDATE {t} SET id = id + 5000 WHERE id % 4 = {round};
                 UPDATE {t} SET small = small || 'x' WHERE id > 5000; COMMIT;
                 DELETE FROM {t} WHERE id % 11 = {round};"
            ))
            .await?;
        }
    }
    for t in tables {
        let query = format!("SELECT id, k, big, small FROM {t}");
        retry_until(Duration::from_secs(60), || async {
            let (mine, theirs) = (sorted(&client, &query).await?, sorted(&up, &query).await?);
            ensure!(
                mine == theirs,
                "{t}: {} rows vs {}; differing ids: {:?}",
                mine.len(),
                theirs.len(),
                mine.iter()
                    .zip(&theirs)
                    .filter(|(a, b)| a != b)
                    .map(|(a, _)| a[0].clone())
                    .take(5)
                    .collect::<Vec<_>>()
            );
            Ok(())
        })
        .await?;
    }
    // The source keeps reading: the upstream sees everything it sent written.
    retry_until(Duration::from_secs(30), || async {
        let lag = text_rows(
            &up,
            "SELECT (sent_lsn = write_lsn)::text FROM pg_stat_replication WHERE application_name = 'sluice'",
        )
        .await?;
        ensure!(lag == [[Some("true".to_owned())]], "replication: {lag:?}");
        Ok(())
    })
    .await?;
    server.ensure_running()
}

#[tokio::test]
async fn a_replication_slot_has_one_source() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    upstream.create_database("shop").await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("one", ", slot.name = 'shared'")).await?;
    let second = client.batch_execute(&upstream.source_sql("two", ", slot.name = 'shared'")).await;
    let error = second.err().context("a second source on the same slot was accepted")?;
    let db = error.as_db_error().context("not a server error")?;
    ensure!(db.code().code() == "42710", "{db:?}");
    ensure!(db.message().contains("another slot.name"), "{}", db.message());
    let sources = text_rows(&client, "SHOW SOURCES").await?;
    ensure!(sources.len() == 1, "{sources:?}");
    Ok(())
}

#[tokio::test]
async fn resnapshot_reads_the_upstream_again_and_views_see_only_the_differences()
-> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = resnapshot(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Rows of `r` that Sluice deleted (an update deletes one) so far, by `/metrics`.
async fn deletes_of(server: &Sluice, relation: &str) -> anyhow::Result<f64> {
    let scrape = crate::observability::scrape(server).await?;
    let labels = [("relation", relation), ("op", "delete")];
    Ok(crate::observability::sample(&scrape, "sluice_relation_changes_total", &labels)
        .unwrap_or(0.0))
}

async fn resnapshot(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE r (id int PRIMARY KEY, a text, b int);
         INSERT INTO r SELECT i, 'a' || i, i FROM generate_series(1, 5000) i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "CREATE TABLE r (*) WITH (snapshot.batch_size = '300') FROM pg TABLE 'public.r';
             CREATE MATERIALIZED VIEW r_v AS SELECT b % 10 AS k, count(*) AS n, sum(b) AS s FROM r GROUP BY 1;",
        )
        .await?;
    let view = ("SELECT k, n, s FROM r_v", "SELECT b % 10, count(*), sum(b) FROM r GROUP BY 1");
    converges_all(&client, &up, &[("SELECT * FROM r", "SELECT * FROM r"), view]).await?;
    // Changes the upstream does not send: the table is out of its publication meanwhile.
    let publication =
        text_rows(&up, "SELECT pubname FROM pg_publication_tables WHERE tablename = 'r'").await?;
    let publication = publication[0][0].clone().context("r is published")?;
    up.batch_execute(&format!(
        "ALTER PUBLICATION {publication} DROP TABLE r;
         UPDATE r SET b = b + 1 WHERE id % 250 = 0;
         DELETE FROM r WHERE id % 500 = 1;
         INSERT INTO r SELECT i, 'n' || i, i FROM generate_series(5001, 5010) i;
         ALTER PUBLICATION {publication} ADD TABLE r;"
    ))
    .await?;
    // 20 updated, 10 deleted, 10 inserted: Sluice does not know.
    let missing = text_rows(&client, "SELECT count(*) FROM r").await?;
    ensure!(missing == [[Some("5000".to_owned())]], "{missing:?}");
    let before = deletes_of(server, "r").await?;
    // A writer goes on while the snapshot is read again: 50 updates.
    let writer = {
        let up = upstream.connect("shop").await?;
        tokio::spawn(async move {
            for i in 0..50 {
                let id = 7 + i * 97;
                up.execute("UPDATE r SET a = a || '+' WHERE id = $1", &[&id]).await?;
            }
            anyhow::Ok(())
        })
    };
    let tag = client.simple_query("ALTER TABLE r RESNAPSHOT").await?;
    ensure!(matches!(tag.last(), Some(tokio_postgres::SimpleQueryMessage::CommandComplete(_))));
    writer.await??;
    converges_all(&client, &up, &[("SELECT * FROM r", "SELECT * FROM r"), view]).await?;
    // Only what differed went downstream: the 20 updated and 10 deleted rows, and the writer's
    // 50 updates, each at most three times (a row written while the page reading it is in
    // flight is applied ahead, overwritten by the page's older version, then applied again);
    // a retraction of every row would be 5000.
    let deleted = deletes_of(server, "r").await? - before;
    ensure!((30.0..=180.0).contains(&deleted), "{deleted} rows retracted");
    // The table's progress shows the snapshot read again, to its end.
    let sql = "SELECT backfill_finished, rows_done FROM rw_catalog.rw_cdc_progress WHERE table_name = 'r'";
    retry_until(Duration::from_secs(30), || async {
        let progress = text_rows(&client, sql).await?;
        ensure!(progress == [[Some("t".to_owned()), Some("5000".to_owned())]], "{progress:?}");
        Ok(())
    })
    .await?;
    // Refused aloud for a table that is not a CDC table, or reads no snapshot; the server
    // stays up.
    client.batch_execute("CREATE TABLE plain (id int PRIMARY KEY)").await?;
    let err = client.batch_execute("ALTER TABLE plain RESNAPSHOT").await.unwrap_err();
    let state = err.as_db_error().map(|e| e.code().code().to_owned());
    ensure!(state.as_deref() == Some("42809"), "{err:?}");
    client
        .batch_execute(
            "CREATE TABLE changes_only (*) WITH (snapshot = 'false') FROM pg TABLE 'public.r'",
        )
        .await?;
    let err = client.batch_execute("ALTER TABLE changes_only RESNAPSHOT").await.unwrap_err();
    let db = err.as_db_error().context("a server error")?;
    ensure!(db.code().code() == "0A000" && db.message().contains("snapshot = 'false'"), "{err:?}");
    client.batch_execute("DROP TABLE changes_only").await?;
    // A kill -9 after the statement: the table reads on from its progress, still exact.
    up.batch_execute("UPDATE r SET b = 0 WHERE id = 2").await?;
    client.batch_execute("ALTER TABLE r RESNAPSHOT").await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_all(&client, &up, &[("SELECT * FROM r", "SELECT * FROM r"), view]).await?;
    // The upstream table dropped and created again with its columns: the table stops, and
    // RESNAPSHOT reads the new one (its rows, then its changes).
    up.batch_execute(
        "DROP TABLE r; CREATE TABLE r (id int PRIMARY KEY, a text, b int);
         INSERT INTO r SELECT i, 'again' || i, i FROM generate_series(1, 100) i;",
    )
    .await?;
    stopped(&client, "r").await?;
    client.batch_execute("ALTER TABLE r RESNAPSHOT").await?;
    up.batch_execute("INSERT INTO r VALUES (101, 'after', 7); DELETE FROM r WHERE id = 5").await?;
    converges_all(&client, &up, &[("SELECT * FROM r", "SELECT * FROM r"), view]).await?;
    not_stopped(&client, "r").await?;
    // One whose columns changed is refused, with what to do; the table keeps its rows.
    up.batch_execute("ALTER TABLE r DROP COLUMN a").await?;
    let err = client.batch_execute("ALTER TABLE r RESNAPSHOT").await.unwrap_err();
    let db = err.as_db_error().context("a server error")?;
    ensure!(db.code().code() == "55000", "{err:?}");
    ensure!(
        db.message().contains("ALTER TABLE r REFRESH SCHEMA builds it again"),
        "{}",
        db.message()
    );
    let kept = text_rows(&client, "SELECT count(*) FROM r").await?;
    ensure!(kept == [[Some("100".to_owned())]], "{kept:?}");
    server.ensure_running()
}

#[tokio::test]
async fn a_lost_slot_is_created_again_and_every_table_reads_its_snapshot_again()
-> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = lost_slot(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn lost_slot(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE a (id int PRIMARY KEY, v text);
         INSERT INTO a SELECT i, 'a' || i FROM generate_series(1, 300) i;
         CREATE TABLE b (id int PRIMARY KEY, n int);
         INSERT INTO b SELECT i, i FROM generate_series(1, 200) i;",
    )
    .await?;
    let client = server.connect().await?;
    let bad = client.batch_execute(&upstream.source_sql("bad", ", slot.lost = 'maybe'")).await;
    let bad = bad.unwrap_err();
    let message = bad.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
    ensure!(message.contains("slot.lost must be 'stop' or 'resnapshot'"), "{bad:?}");
    client.batch_execute(&upstream.source_sql("pg", ", slot.lost = 'resnapshot'")).await?;
    client
        .batch_execute(
            "CREATE TABLE a (*) FROM pg TABLE 'public.a';
             CREATE TABLE b (*) FROM pg TABLE 'public.b';
             CREATE MATERIALIZED VIEW ab AS SELECT a.id, a.v, b.n FROM a JOIN b ON a.id = b.id;",
        )
        .await?;
    let pairs = [
        ("SELECT * FROM a", "SELECT * FROM a"),
        ("SELECT * FROM b", "SELECT * FROM b"),
        ("SELECT * FROM ab", "SELECT a.id, a.v, b.n FROM a JOIN b ON a.id = b.id"),
    ];
    converges_all(&client, &up, &pairs).await?;
    // The slot is dropped while Sluice is down, and the upstream changes meanwhile: those
    // changes are in no slot.
    server.kill9().await?;
    retry_until(Duration::from_secs(30), || async {
        up.batch_execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE database = 'shop'",
        )
        .await?;
        Ok(())
    })
    .await?;
    up.batch_execute(
        "UPDATE a SET v = 'lost' WHERE id % 3 = 0; DELETE FROM b WHERE id <= 50;
         INSERT INTO a SELECT i, 'new' || i FROM generate_series(301, 320) i;",
    )
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_all(&client, &up, &pairs).await?;
    let events = text_rows(&client, "SELECT error FROM rw_catalog.rw_recovery_events").await?;
    ensure!(
        events.iter().any(|e| e[0].as_deref().is_some_and(|e| e.contains("was lost upstream"))),
        "{events:?}"
    );
    // The new slot streams on.
    up.batch_execute("INSERT INTO b VALUES (1000, 1); UPDATE a SET v = 'later' WHERE id = 1")
        .await?;
    converges_all(&client, &up, &pairs).await?;
    server.ensure_running()
}

#[tokio::test]
async fn a_purged_binlog_is_read_on_from_its_end_and_every_table_reads_its_snapshot_again()
-> anyhow::Result<()> {
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    let upstream = MySqlUpstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = purged_binlog(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn purged_binlog(upstream: &MySqlUpstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.a (id int PRIMARY KEY, v varchar(20));
             INSERT INTO shop.a SELECT seq, CONCAT('a', seq) FROM shop.seq_1_to_300;",
        )
        .await?;
    let client = server.connect().await?;
    let bad = client.batch_execute(&upstream.source_sql("bad", ", binlog.lost = 'x'")).await;
    let message = bad.unwrap_err().as_db_error().map(|e| e.message().to_owned());
    ensure!(message.is_some_and(|m| m.contains("binlog.lost must be")), "bad option accepted");
    let source = upstream.source_sql("my", ", server.id = '5413', binlog.lost = 'resnapshot'");
    client.batch_execute(&source).await?;
    client.batch_execute("CREATE TABLE a (*) FROM my TABLE 'a'").await?;
    converges_mysql(&client, upstream, "SELECT * FROM a", "SELECT * FROM shop.a").await?;
    // Down while the upstream changes and purges the binlog those changes are in.
    server.kill9().await?;
    upstream
        .execute(
            "UPDATE shop.a SET v = 'lost' WHERE id % 3 = 0; DELETE FROM shop.a WHERE id <= 40;
             INSERT INTO shop.a SELECT seq, 'new' FROM shop.seq_301_to_320;",
        )
        .await?;
    let status = upstream.rows("SHOW MASTER STATUS").await?;
    let file = status.first().and_then(|r| r[0].clone()).context("no binlog")?;
    upstream.execute("FLUSH BINARY LOGS").await?;
    let status = upstream.rows("SHOW MASTER STATUS").await?;
    let newer = status.first().and_then(|r| r[0].clone()).context("no binlog")?;
    ensure!(newer != file, "the binlog did not rotate");
    // A file the killed server's dump thread still reads is kept: purge until it is gone.
    retry_until(Duration::from_secs(30), || async {
        upstream.execute(&format!("PURGE BINARY LOGS TO '{newer}'")).await?;
        let logs = upstream.rows("SHOW BINARY LOGS").await?;
        ensure!(logs.iter().all(|l| l[0].as_deref() != Some(file.as_str())), "{logs:?}");
        Ok(())
    })
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    converges_mysql(&client, upstream, "SELECT * FROM a", "SELECT * FROM shop.a").await?;
    let events = text_rows(&client, "SELECT error FROM rw_catalog.rw_recovery_events").await?;
    ensure!(
        events.iter().any(|e| e[0].as_deref().is_some_and(|e| e.contains("was purged upstream"))),
        "{events:?}"
    );
    // It reads on.
    upstream
        .execute("INSERT INTO shop.a VALUES (1000, 'later'); DELETE FROM shop.a WHERE id = 50")
        .await?;
    converges_mysql(&client, upstream, "SELECT * FROM a", "SELECT * FROM shop.a").await?;
    server.ensure_running()
}

#[tokio::test]
async fn tables_matching_a_pattern_are_created_and_new_ones_picked_up() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = pattern_tables(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Waits until Sluice's table `t` equals the upstream's.
async fn table_converges(client: &Client, up: &Client, t: &str) -> anyhow::Result<()> {
    let sql = format!("SELECT * FROM {t}");
    converges_all(client, up, &[(&sql, &sql)]).await
}

async fn pattern_tables(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    let create = |t: &str, rows: u32| {
        format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, note text);
             INSERT INTO {t} SELECT i, '{t}' || i FROM generate_series(1, {rows}) i;"
        )
    };
    up.batch_execute(&format!(
        "{}{}{}",
        create("orders_a", 100),
        create("orders_b", 20),
        create("customers", 10)
    ))
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "CREATE TABLE FROM pg TABLES 'public.orders_*' WITH (snapshot.batch_size = '7', discovery.interval = '1')",
        )
        .await?;
    // Created and read at once (the statement returns once their snapshots are read).
    for t in ["orders_a", "orders_b"] {
        table_converges(&client, &up, t).await?;
    }
    let names = text_rows(&client, "SHOW TABLES").await?;
    ensure!(!names.iter().any(|r| r[0].as_deref() == Some("customers")), "{names:?}");
    let patterns =
        text_rows(&client, "SELECT table_patterns FROM rw_catalog.rw_sources WHERE name = 'pg'")
            .await?;
    ensure!(patterns == [[Some("public.orders_*".to_owned())]], "{patterns:?}");
    // A bad pattern or option is refused, naming it.
    let err = client.batch_execute("CREATE TABLE FROM pg TABLES 'orders_*'").await.unwrap_err();
    ensure!(format!("{err:?}").contains("needs a schema and a table pattern"), "{err:?}");
    let err = client
        .batch_execute("CREATE TABLE FROM pg TABLES 'public.x*' WITH (snapshot.bogus = '1')")
        .await
        .unwrap_err();
    ensure!(format!("{err:?}").contains("snapshot.bogus"), "{err:?}");
    // A table created upstream later, and changes to the others, are picked up.
    up.batch_execute(&format!(
        "{} UPDATE orders_a SET note = 'u' WHERE id < 5; DELETE FROM orders_b WHERE id = 3;",
        create("orders_c", 30)
    ))
    .await?;
    for t in ["orders_a", "orders_b", "orders_c"] {
        table_converges(&client, &up, t).await?;
    }
    // A dropped table is not created again; one created while Sluice is down is picked up.
    client.batch_execute("DROP TABLE orders_b").await?;
    server.kill9().await?;
    up.batch_execute(&format!("{} INSERT INTO orders_c VALUES (31, 'x');", create("orders_d", 5)))
        .await?;
    server.restart().await?;
    let client = server.connect().await?;
    for t in ["orders_c", "orders_d"] {
        table_converges(&client, &up, t).await?;
    }
    let names = text_rows(&client, "SHOW TABLES").await?;
    ensure!(!names.iter().any(|r| r[0].as_deref() == Some("orders_b")), "{names:?}");
    server.ensure_running()
}

#[tokio::test]
async fn mysql_tables_matching_a_pattern_are_created_and_new_ones_picked_up() -> anyhow::Result<()>
{
    if !MySqlUpstream::available() {
        eprintln!("\n!!!!!!!! SKIPPED: mariadbd is missing (install mariadb-server) !!!!!!!!\n");
        return Ok(());
    }
    let upstream = MySqlUpstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = mysql_pattern_tables(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn mysql_pattern_tables(upstream: &MySqlUpstream, server: &mut Sluice) -> anyhow::Result<()> {
    let create = |t: &str| {
        format!(
            "CREATE TABLE shop.{t} (id int PRIMARY KEY, note varchar(20));
             INSERT INTO shop.{t} SELECT seq, CONCAT('{t}', seq) FROM shop.seq_1_to_40;"
        )
    };
    upstream
        .execute(&format!("CREATE DATABASE shop; {} {}", create("items_1"), create("other")))
        .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("my", ", server.id = '5413'")).await?;
    client
        .batch_execute("CREATE TABLE FROM my TABLES 'items_*' WITH (discovery.interval = '1')")
        .await?;
    upstream
        .execute(&format!("{} UPDATE shop.items_1 SET note = 'u' WHERE id < 4;", create("items_2")))
        .await?;
    for t in ["items_1", "items_2"] {
        let (ours, theirs) = (format!("SELECT * FROM {t}"), format!("SELECT * FROM shop.{t}"));
        converges_mysql(&client, upstream, &ours, &theirs).await?;
    }
    let names = text_rows(&client, "SHOW TABLES").await?;
    ensure!(!names.iter().any(|r| r[0].as_deref() == Some("other")), "{names:?}");
    server.ensure_running()
}
