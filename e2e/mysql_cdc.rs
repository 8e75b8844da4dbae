//! MySQL / MariaDB CDC against a private MariaDB: the connector's validation, table
//! descriptions and snapshot pages.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use arrow::array::Array;
use sluice::connector::common::SplitRange;
use sluice::connector::mysql::{self, MySqlSourceConfig};
use sluice::connector::offset::CdcOffset;
use sluice::error::Error;
use sluice::types::DataType;

use crate::mysql_upstream::MySqlUpstream;

/// Starts a MariaDB, or says loudly why the test cannot run.
async fn mariadb() -> anyhow::Result<Option<MySqlUpstream>> {
    if !MySqlUpstream::available() {
        eprintln!(
            "\n!!!!!!!! SKIPPED: mariadbd is missing. Install Debian's mariadb-server package \
             (.ci/run does) to run the MySQL CDC tests. !!!!!!!!\n"
        );
        return Ok(None);
    }
    Ok(Some(MySqlUpstream::start().await?))
}

fn source_config(
    upstream: &MySqlUpstream,
    extra: &[(&str, &str)],
) -> anyhow::Result<MySqlSourceConfig> {
    let mut options: BTreeMap<String, String> = [
        ("connector", "mysql-cdc".to_owned()),
        ("hostname", "127.0.0.1".to_owned()),
        ("port", upstream.port().to_string()),
        ("username", "root".to_owned()),
        ("database.name", "shop".to_owned()),
        ("server.id", "5401".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in extra {
        options.insert(k.to_string(), v.to_string());
    }
    Ok(MySqlSourceConfig::from_options("my", &options)?)
}

/// The SQLSTATE of an upstream error.
fn code(result: Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Err(Error::Upstream { code, .. }) => code.to_owned(),
        other => format!("not an upstream error: {other:?}"),
    }
}

#[tokio::test]
async fn mysql_connector_validates_describes_and_pages() -> anyhow::Result<()> {
    let Some(mut upstream) = mariadb().await? else { return Ok(()) };
    let outcome = connector_scenario(&mut upstream).await;
    outcome.with_context(|| upstream.log_tail())
}

async fn connector_scenario(upstream: &mut MySqlUpstream) -> anyhow::Result<()> {
    upstream
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.kinds (
               id int PRIMARY KEY, ti tinyint, si smallint unsigned, bi bigint unsigned,
               d decimal(10,2), f float, db double, vc varchar(20), bin varbinary(8),
               dt date, dtm datetime(6), ts timestamp(3) NULL, tm time, yr year, js json,
               en enum('red','green'), st set('a','b','c'), bt bit(10));
             INSERT INTO shop.kinds VALUES
               (1, -5, 65535, 18446744073709551615, 12.50, 3.14159274, 0.1, 'héllo', x'00ff',
                '2024-02-29', '2024-02-29 10:11:12.123456', '2024-03-01 00:00:01.500',
                '-838:59:59', 2024, '{\"a\": [1, 2]}', 'green', 'a,c', b'1000000001'),
               (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                NULL, NULL, NULL, NULL),
               (3, 1, 2, 3, -0.01, -1.5, 1e300, '', x'', '1970-01-01', '1970-01-01 00:00:00',
                '1970-01-02 00:00:00', '00:00:00', 1901, '[]', 'red', '', b'0');
             CREATE TABLE shop.no_key (v int);
             CREATE TABLE shop.`Names` (`Key` varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n int);
             INSERT INTO shop.`Names` VALUES ('b', 1), ('B', 2), ('a', 3), ('é', 4), ('A', 5);",
        )
        .await?;
    let config = source_config(upstream, &[])?;
    let mut conn = config.connect().await?;
    config.validate(&mut conn).await?;

    // Types.
    let table = mysql::describe_table(&mut conn, "shop", "kinds").await?;
    let types: Vec<DataType> = table.columns.iter().map(|c| c.data_type).collect();
    use DataType::*;
    let decimal = |precision, scale| Decimal { precision, scale };
    ensure!(
        types
            == [
                Int32,
                Int16,
                Int32,
                decimal(20, 0),
                decimal(10, 2),
                Float32,
                Float64,
                Varchar,
                Bytea,
                Date,
                Timestamp,
                Timestamptz,
                Varchar,
                Int32,
                Varchar,
                Varchar,
                Varchar,
                decimal(20, 0)
            ],
        "{types:?}"
    );
    // MariaDB's json is longtext with a check: it reads as text.
    ensure!(table.pk == [0]);

    // Pages of two rows, in key order, each with the binlog position of its snapshot.
    let all = SplitRange::default();
    let (first, offset) = mysql::snapshot::snapshot_page(&mut conn, &table, None, &all, 2).await?;
    ensure!(matches!(offset, CdcOffset::MySql { file_seq: 1, .. }), "{offset:?}");
    ensure!(offset > CdcOffset::mysql("binlog.000001", 4)?, "{offset:?}");
    ensure!(first[0].len() == 2);
    let row: Vec<Option<&str>> = first.iter().map(|c| c.is_valid(0).then(|| c.value(0))).collect();
    let expected = [
        "1",
        "-5",
        "65535",
        "18446744073709551615",
        "12.50",
        "3.1415927410125732",
        "0.1",
        "héllo",
        "\\x00ff",
        "2024-02-29",
        "2024-02-29 10:11:12.123456",
        "2024-03-01 00:00:01.500+00",
        "-838:59:59",
        "2024",
        "{\"a\": [1, 2]}",
        "green",
        "a,c",
        "513",
    ];
    ensure!(row == expected.map(Some), "row 1 reads {row:?}");
    ensure!((1..first.len()).all(|c| first[c].is_null(1)), "row 2 is not all NULL");
    let cursor: Vec<Option<String>> = vec![Some(first[0].value(1).to_owned())];
    let (rest, later) =
        mysql::snapshot::snapshot_page(&mut conn, &table, Some(&cursor), &all, 2).await?;
    ensure!(rest[0].len() == 1 && rest[0].value(0) == "3", "after the cursor: {:?}", rest[0]);
    ensure!(later >= offset);

    // Integer keys 1..=3 split evenly between the lowest and highest; a split's pages stay in
    // its range.
    let points = mysql::snapshot::split_points(&mut conn, &table, 2).await?;
    ensure!(points == ["2"], "split points {points:?}");
    let first_split = SplitRange { start: None, end: Some("2".into()) };
    let (page, _) =
        mysql::snapshot::snapshot_page(&mut conn, &table, None, &first_split, 10).await?;
    ensure!(page[0].len() == 1 && page[0].value(0) == "1", "first split: {:?}", page[0]);
    let second_split = SplitRange { start: Some("2".into()), end: None };
    let (page, _) =
        mysql::snapshot::snapshot_page(&mut conn, &table, None, &second_split, 10).await?;
    ensure!(page[0].len() == 2 && page[0].value(0) == "2", "second split: {:?}", page[0]);

    // String keys page by their bytes, as Sluice orders them, whatever the collation says.
    let names = mysql::describe_table(&mut conn, "shop", "Names").await?;
    let mut keys = Vec::new();
    let mut cursor: Option<Vec<Option<String>>> = None;
    loop {
        let (page, _) =
            mysql::snapshot::snapshot_page(&mut conn, &names, cursor.as_deref(), &all, 2).await?;
        if page[0].is_empty() {
            break;
        }
        keys.extend((0..page[0].len()).map(|i| page[0].value(i).to_owned()));
        cursor = Some(vec![Some(page[0].value(page[0].len() - 1).to_owned())]);
    }
    ensure!(keys == ["A", "B", "a", "b", "é"], "keys read {keys:?}");

    // Bad input: each says what to fix.
    let described = mysql::describe_table(&mut conn, "shop", "no_key").await;
    ensure!(format!("{described:?}").contains("has no primary key"), "{described:?}");
    let described = mysql::describe_table(&mut conn, "shop", "nowhere").await;
    ensure!(matches!(described, Err(Error::UnknownRelation { .. })), "{described:?}");
    let wrong = source_config(upstream, &[("password", "nope")])?;
    ensure!(code(wrong.connect().await) == "28P01");
    let unknown_db = source_config(upstream, &[("database.name", "nope")])?;
    ensure!(code(unknown_db.connect().await) == "3D000");
    let closed = source_config(upstream, &[("port", &crate::harness::free_port()?.to_string())])?;
    ensure!(code(closed.connect().await) == "08001");

    for (setting, value, wrong) in [
        ("binlog_format", "ROW", "MIXED"),
        ("binlog_row_image", "FULL", "MINIMAL"),
        ("binlog_row_metadata", "FULL", "MINIMAL"),
    ] {
        upstream.execute(&format!("SET GLOBAL {setting} = '{wrong}'")).await?;
        let mut conn = config.connect().await?;
        let refused = config.validate(&mut conn).await;
        upstream.execute(&format!("SET GLOBAL {setting} = '{value}'")).await?;
        let message = format!("{refused:?}");
        ensure!(code(refused) == "55000" && message.contains(setting), "{message}");
    }
    let same_id = source_config(upstream, &[("server.id", "1")])?;
    let refused = same_id.validate(&mut same_id.connect().await?).await;
    ensure!(format!("{refused:?}").contains("server.id 1"), "{refused:?}");
    upstream
        .execute("CREATE USER weak@'%' IDENTIFIED BY 'pw'; GRANT SELECT ON shop.* TO weak@'%';")
        .await?;
    let weak = source_config(upstream, &[("username", "weak"), ("password", "pw")])?;
    let refused = weak.validate(&mut weak.connect().await?).await;
    let message = format!("{refused:?}");
    ensure!(
        code(refused) == "42501" && message.contains("REPLICATION SLAVE"),
        "weak user: {message}"
    );

    // A restart starts a new binlog file: positions keep their order across files.
    let before = mysql::current_offset(&mut conn).await?;
    drop(conn);
    upstream.restart().await?;
    let mut conn = config.connect().await?;
    let after = mysql::current_offset(&mut conn).await?;
    ensure!(after > before, "{after} is not after {before}");
    let count = upstream.rows("SELECT count(*) FROM shop.kinds").await?;
    ensure!(count == [[Some("3".to_owned())]], "{count:?}");
    Ok(())
}

/// Waits until Sluice's rows of `ours` equal MariaDB's rows of `theirs` (both sorted, as text).
async fn assert_converges(
    client: &tokio_postgres::Client,
    upstream: &MySqlUpstream,
    ours: &str,
    theirs: &str,
) -> anyhow::Result<()> {
    crate::harness::retry_until(std::time::Duration::from_secs(60), || async {
        let ours = crate::harness::sorted(client, ours).await?;
        let theirs = upstream.rows(theirs).await?;
        ensure!(
            ours == theirs,
            "{} rows in Sluice, {} upstream; first differences: {:?}",
            ours.len(),
            theirs.len(),
            ours.iter().zip(&theirs).filter(|(a, b)| a != b).take(2).collect::<Vec<_>>()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn mysql_cdc_table_follows_its_upstream() -> anyhow::Result<()> {
    let Some(mut upstream) = mariadb().await? else { return Ok(()) };
    let mut server = crate::harness::Sluice::start().await?;
    let outcome = table_scenario(&mut upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn table_scenario(
    upstream: &mut MySqlUpstream,
    server: &mut crate::harness::Sluice,
) -> anyhow::Result<()> {
    upstream
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.orders (id int PRIMARY KEY, customer int NOT NULL,
               amount decimal(10,2), note varchar(40));
             INSERT INTO shop.orders SELECT seq, seq % 97, seq / 100, CONCAT('n', seq)
               FROM shop.seq_1_to_100000;",
        )
        .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("my", ", server.id = '5402'")).await?;
    // Small pages, so the writes below overlap the snapshot and the kill lands in it.
    client
        .batch_execute(
            "SET background_ddl = true;
             CREATE TABLE orders (*) WITH (snapshot.batch_size = '100') FROM my TABLE 'shop.orders'",
        )
        .await?;
    let mut conn = upstream.connect().await?;
    for i in 0..300u32 {
        let id = 1 + (i * 7919) % 100_000;
        let sql = match i % 4 {
            0 => {
                format!("UPDATE shop.orders SET amount = amount + 1, note = 'u{i}' WHERE id = {id}")
            }
            1 => format!("DELETE FROM shop.orders WHERE id = {id}"),
            2 => format!("INSERT IGNORE INTO shop.orders VALUES ({}, 7, 1.50, 'new')", 200_000 + i),
            // A key change: the old row goes, the new one comes.
            _ => format!("UPDATE IGNORE shop.orders SET id = id + 300000 WHERE id = {id}"),
        };
        mysql_async::prelude::Queryable::query_drop(&mut conn, sql).await?;
    }

    // SIGKILL mid-snapshot: the snapshot resumes after its persisted cursor, and changes made
    // while Sluice is down arrive after the restart, exactly once.
    let before = crate::harness::retry_until(std::time::Duration::from_secs(60), || async {
        let read = crate::cdc::cdc_rows_read(&client).await?;
        ensure!(read >= 2000, "only {read} rows read");
        Ok(read)
    })
    .await?;
    ensure!(before < 100_000, "the snapshot finished before the kill; use smaller pages");
    server.kill9().await?;
    upstream
        .execute(
            "UPDATE shop.orders SET note = 'offline' WHERE id < 100;
             DELETE FROM shop.orders WHERE id BETWEEN 100 AND 150;
             INSERT INTO shop.orders VALUES (500000, 1, 2.00, 'offline');",
        )
        .await?;
    server.restart().await?;
    let client = server.connect().await?;
    let after = crate::cdc::cdc_rows_read(&client).await?;
    ensure!(after >= before, "the snapshot went back from {before} to {after} rows");
    let query = "SELECT id, customer, amount, note FROM orders";
    let upstream_query = "SELECT id, customer, amount, note FROM shop.orders";
    assert_converges(&client, upstream, query, upstream_query).await?;
    let total = crate::cdc::cdc_rows_read(&client).await?;
    ensure!(total < 150_000, "the snapshot read {total} rows for a 100 k-row table");

    // An upstream restart while streaming: the reader reconnects where it stopped.
    upstream.restart().await?;
    upstream.execute("UPDATE shop.orders SET customer = 3 WHERE id % 10 = 1").await?;
    assert_converges(&client, upstream, query, upstream_query).await?;

    // A transaction larger than the reader holds at once goes on in parts; killed while it
    // streams, it is read again whole after the restart.
    upstream
        .execute("UPDATE shop.orders SET note = 'big', amount = amount + 2 WHERE id <= 30000")
        .await?;
    server.kill9().await?;
    server.restart().await?;
    let client = server.connect().await?;
    upstream.execute("DELETE FROM shop.orders WHERE id BETWEEN 1000 AND 1100").await?;
    assert_converges(&client, upstream, query, upstream_query).await?;

    // A view over the MySQL CDC table follows it.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_customer AS \
             SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
        )
        .await?;
    upstream.execute("DELETE FROM shop.orders WHERE customer = 5").await?;
    assert_converges(
        &client,
        upstream,
        "SELECT customer, n, total FROM per_customer",
        "SELECT customer, count(*), sum(amount) FROM shop.orders GROUP BY customer",
    )
    .await?;
    // An upstream TRUNCATE empties the table, and the view with it; rows written after it
    // stay.
    upstream
        .execute(
            "TRUNCATE TABLE shop.orders;
             INSERT INTO shop.orders VALUES (1, 5, 1.00, 'after'), (2, 6, 2.00, 'after');",
        )
        .await?;
    assert_converges(&client, upstream, query, upstream_query).await?;
    assert_converges(
        &client,
        upstream,
        "SELECT customer, n, total FROM per_customer",
        "SELECT customer, count(*), sum(amount) FROM shop.orders GROUP BY customer",
    )
    .await?;
    let progress = crate::harness::text_rows(
        &client,
        "SELECT backfill_finished, upstream_offset, source_error, slot_lag_bytes \
         FROM rw_catalog.rw_cdc_progress",
    )
    .await?;
    ensure!(progress.len() == 1 && progress[0][0].as_deref() == Some("t"), "{progress:?}");
    ensure!(progress[0][2].is_none(), "{progress:?}");
    // Caught up: little or no binlog left after the source's recorded position.
    let lag: i64 = progress[0][3].as_deref().context("no binlog lag")?.parse()?;
    ensure!((0..1_000_000).contains(&lag), "binlog lag {lag}");
    Ok(())
}

/// The SQLSTATE of a failed statement.
async fn sqlstate(client: &tokio_postgres::Client, sql: &str) -> String {
    match client.batch_execute(sql).await {
        Ok(()) => "ok".to_owned(),
        Err(e) => e.code().map_or_else(|| e.to_string(), |c| c.code().to_owned()),
    }
}

/// Every column but the key of the rows with `ids`, as Sluice prints them.
async fn rows_of(
    client: &tokio_postgres::Client,
    table: &str,
    ids: &str,
) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let rows = crate::harness::text_rows(
        client,
        &format!("SELECT * FROM {table} WHERE id IN ({ids}) ORDER BY id"),
    )
    .await?;
    Ok(rows.into_iter().map(|r| r[1..].to_vec()).collect())
}

#[tokio::test]
async fn mysql_types_keys_and_bad_input() -> anyhow::Result<()> {
    let Some(mut upstream) = mariadb().await? else { return Ok(()) };
    let mut server = crate::harness::Sluice::start().await?;
    let outcome = types_scenario(&mut upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn types_scenario(
    upstream: &mut MySqlUpstream,
    server: &mut crate::harness::Sluice,
) -> anyhow::Result<()> {
    upstream
        .execute(
            "SET NAMES utf8mb4;
             CREATE DATABASE shop;
             CREATE TABLE shop.kinds (
               id int PRIMARY KEY, ti tinyint, si smallint unsigned, mi mediumint, bi bigint unsigned,
               d decimal(10,2), f float, db double, vc varchar(20), bin varbinary(8), fb binary(4),
               dt date, dtm datetime(6), ts timestamp(3) NULL, tm time, t2 time(2), yr year, js json,
               en enum('red','green'), st set('a','b','c'), bt bit(10), tx text);
             INSERT INTO shop.kinds VALUES
               (1, -5, 65535, -1, 18446744073709551615, 12.50, 3.14159274, 0.1, 'héllo 🙂',
                x'00ff', x'01', '2024-02-29', '2024-02-29 10:11:12.123456',
                '2024-03-01 00:00:01.500', '-838:59:59', '-00:00:00.50', 2024,
                '{\"a\": [1, 2]}', 'green', 'a,c', b'1000000001', 'long text'),
               (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
               (3, 127, 0, -8388608, 0, -0.01, -1.5, 1e300, '', x'', x'00000000', '1970-01-01',
                '1970-01-01 00:00:00', '1970-01-02 00:00:00', '12:00:00', '10:11:12.37', 1901,
                '[]', 'red', '', b'0', '');
             CREATE TABLE shop.pairs (a int, b varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
               v int, PRIMARY KEY (a, b));
             INSERT INTO shop.pairs VALUES (1, 'b', 1), (1, 'B', 2), (2, 'a', 3);
             CREATE TABLE shop.no_key (v int);",
        )
        .await?;
    let client = server.connect().await?;
    // Bad sources say what to fix.
    let port = upstream.port();
    let bad = |extra: &str| {
        format!(
            "CREATE SOURCE bad WITH (connector = 'mysql-cdc', hostname = '127.0.0.1', \
             username = 'root', database.name = 'shop'{extra})"
        )
    };
    let wrong_password = bad(&format!(", port = '{port}', password = 'nope'"));
    ensure!(sqlstate(&client, &wrong_password).await == "28P01");
    let unknown_db = format!(
        "CREATE SOURCE bad WITH (connector = 'mysql-cdc', hostname = '127.0.0.1', \
         port = '{port}', username = 'root', database.name = 'nope')"
    );
    ensure!(sqlstate(&client, &unknown_db).await == "3D000");
    let closed = bad(&format!(", port = '{}'", crate::harness::free_port()?));
    ensure!(sqlstate(&client, &closed).await == "08001");
    let unknown_option = bad(&format!(", port = '{port}', slot.name = 's'"));
    let refused = client.batch_execute(&unknown_option).await.unwrap_err();
    ensure!(format!("{refused:?}").contains("unknown mysql-cdc option slot.name"), "{refused:?}");
    upstream.execute("SET GLOBAL binlog_format = 'MIXED'").await?;
    let mixed = sqlstate(&client, &upstream.source_sql("bad", "")).await;
    upstream.execute("SET GLOBAL binlog_format = 'ROW'").await?;
    ensure!(mixed == "55000", "binlog_format MIXED: {mixed}");
    ensure!(sqlstate(&client, "SHOW SOURCES").await == "ok");
    let sources = crate::harness::text_rows(&client, "SHOW SOURCES").await?;
    ensure!(sources.is_empty(), "a refused source was kept: {sources:?}");

    client.batch_execute(&upstream.source_sql("my", "")).await?;
    let no_key = client
        .batch_execute("CREATE TABLE no_key (*) FROM my TABLE 'shop.no_key'")
        .await
        .unwrap_err();
    ensure!(format!("{no_key:?}").contains("has no primary key"), "{no_key:?}");
    ensure!(sqlstate(&client, "CREATE TABLE nope (*) FROM my TABLE 'shop.nope'").await == "42P01");
    // The source reads one database's changes: a table of another is refused, not left stale.
    upstream.execute("CREATE DATABASE other; CREATE TABLE other.t (id int PRIMARY KEY)").await?;
    let other = client.batch_execute("CREATE TABLE o (*) FROM my TABLE 'other.t'").await;
    ensure!(format!("{other:?}").contains("in another database"), "{other:?}");

    // Every type reads the same from the snapshot (rows 1-3) as from the binlog (rows 101-103).
    client.batch_execute("CREATE TABLE kinds (*) FROM my TABLE 'kinds'").await?;
    upstream
        .execute("INSERT INTO shop.kinds SELECT id + 100, ti, si, mi, bi, d, f, db, vc, bin, fb, dt, dtm, ts, tm, t2, yr, js, en, st, bt, tx FROM shop.kinds")
        .await?;
    let binlog = crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        let rows = rows_of(&client, "kinds", "101, 102, 103").await?;
        ensure!(rows.len() == 3, "{} binlog rows so far", rows.len());
        Ok(rows)
    })
    .await?;
    let snapshot = rows_of(&client, "kinds", "1, 2, 3").await?;
    ensure!(snapshot == binlog, "snapshot {snapshot:?}\nbinlog   {binlog:?}");
    let first: Vec<Option<&str>> = snapshot[0].iter().map(Option::as_deref).collect();
    let expected = [
        "-5",
        "65535",
        "-1",
        "18446744073709551615",
        "12.50",
        "3.1415927",
        "0.1",
        "héllo 🙂",
        "\\x00ff",
        "\\x01000000",
        "2024-02-29",
        "2024-02-29 10:11:12.123456",
        "2024-03-01 00:00:01.5+00",
        "-838:59:59",
        "-00:00:00.50",
        "2024",
        "{\"a\": [1, 2]}",
        "green",
        "a,c",
        "513",
        "long text",
    ];
    ensure!(first == expected.map(Some), "row 1 reads {first:?}");
    ensure!(snapshot[1].iter().all(Option::is_none), "row 2 is not all NULL: {:?}", snapshot[1]);
    // Updates from the binlog, the key too.
    upstream
        .execute("UPDATE shop.kinds SET mi = -7, t2 = '-01:02:03.04', en = 'red' WHERE id = 101; UPDATE shop.kinds SET id = 201 WHERE id = 103")
        .await?;
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        let rows = crate::harness::text_rows(
            &client,
            "SELECT id, mi, t2, en FROM kinds WHERE id > 100 ORDER BY id",
        )
        .await?;
        let want = [
            ["101", "-7", "-01:02:03.04", "red"].map(|s| Some(s.to_owned())).to_vec(),
            vec![Some("102".to_owned()), None, None, None],
            ["201", "-8388608", "10:11:12.37", "red"].map(|s| Some(s.to_owned())).to_vec(),
        ];
        ensure!(rows == want, "{rows:?}");
        Ok(())
    })
    .await?;

    // A composite key with case-sensitive text: both parts kept, rows told apart by case.
    client.batch_execute("CREATE TABLE pairs (*) FROM my TABLE 'shop.pairs'").await?;
    upstream.execute("INSERT INTO shop.pairs VALUES (2, 'A', 4); DELETE FROM shop.pairs WHERE a = 1 AND b = 'b'").await?;
    assert_converges(
        &client,
        upstream,
        "SELECT a, b, v FROM pairs",
        "SELECT a, b, v FROM shop.pairs",
    )
    .await?;

    // A table with a source of its own, which goes with it.
    client
        .batch_execute(&format!(
            "CREATE TABLE pairs2 (a int, b varchar, v int, PRIMARY KEY (a, b)) WITH (
               connector = 'mysql-cdc', hostname = '127.0.0.1', port = '{port}', username = 'root',
               password = '', database.name = 'shop', table.name = 'pairs')"
        ))
        .await?;
    assert_converges(
        &client,
        upstream,
        "SELECT a, b, v FROM pairs2",
        "SELECT a, b, v FROM shop.pairs",
    )
    .await?;
    client.batch_execute("DROP TABLE pairs2").await?;
    let sources = crate::harness::text_rows(&client, "SHOW SOURCES").await?;
    ensure!(sources == [[Some("my".to_owned())]], "{sources:?}");

    // A binlog position purged while Sluice was down: a clear error, never a silent skip.
    server.kill9().await?;
    upstream.execute("INSERT INTO shop.pairs VALUES (9, 'z', 9)").await?;
    let (file, _) = mysql::master_status(&mut upstream.connect().await?).await?;
    upstream.execute("FLUSH BINARY LOGS").await?;
    let (newest, _) = mysql::master_status(&mut upstream.connect().await?).await?;
    ensure!(newest != file);
    // The killed reader's dump thread still holds its file open, which PURGE would skip.
    for row in upstream
        .rows("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'")
        .await?
    {
        let id = row[0].clone().unwrap_or_default();
        upstream.execute(&format!("KILL {id}")).await?;
    }
    // MariaDB keeps a file until its binlog checkpoint has passed it: retry the purge.
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        upstream.execute(&format!("PURGE BINARY LOGS TO '{newest}'")).await?;
        let logs = upstream.rows("SHOW BINARY LOGS").await?;
        let gone = logs.iter().all(|l| l[0].as_deref() != Some(file.as_str()));
        ensure!(gone, "{file} is still there: {logs:?}");
        Ok(())
    })
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        let rows = crate::harness::text_rows(
            &client,
            "SELECT DISTINCT source_error FROM rw_catalog.rw_cdc_progress",
        )
        .await?;
        let error = rows.first().and_then(|r| r[0].clone()).unwrap_or_default();
        ensure!(error.contains("no longer has the binlog"), "source_error: {rows:?}");
        Ok(())
    })
    .await?;
    let rows = crate::harness::text_rows(&client, "SELECT count(*) FROM pairs WHERE a = 9").await?;
    ensure!(rows == [[Some("0".to_owned())]], "a change past a purged position arrived: {rows:?}");
    Ok(())
}

#[tokio::test]
async fn a_view_joins_a_mysql_and_a_postgres_table() -> anyhow::Result<()> {
    let Some(mysql) = mariadb().await? else { return Ok(()) };
    let postgres = crate::upstream::Upstream::start().await?;
    let server = crate::harness::Sluice::start().await?;
    let outcome = join_scenario(&mysql, &postgres, &server).await;
    outcome.with_context(|| {
        format!("{}\n{}\n{}", server.log_tail(), mysql.log_tail(), postgres.log_tail())
    })
}

async fn join_scenario(
    mysql: &MySqlUpstream,
    postgres: &crate::upstream::Upstream,
    server: &crate::harness::Sluice,
) -> anyhow::Result<()> {
    mysql
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.orders (id int PRIMARY KEY, customer int, amount decimal(10,2));
             INSERT INTO shop.orders SELECT seq, seq % 50, seq / 10 FROM shop.seq_1_to_5000;",
        )
        .await?;
    postgres.create_database("shop").await?;
    let pg = postgres.connect("shop").await?;
    pg.batch_execute(
        "CREATE TABLE customers (id int PRIMARY KEY, name text);
         INSERT INTO customers SELECT i, 'c' || i FROM generate_series(0, 49) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&mysql.source_sql("my", "")).await?;
    client.batch_execute(&postgres.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "CREATE TABLE orders (*) FROM my TABLE 'shop.orders';
             CREATE TABLE customers (*) FROM pg TABLE 'public.customers';
             CREATE MATERIALIZED VIEW spend AS
               SELECT c.name, count(*) AS n, sum(o.amount) AS total
               FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.name;",
        )
        .await?;
    mysql
        .execute(
            "UPDATE shop.orders SET customer = 1 WHERE id % 7 = 0;
             DELETE FROM shop.orders WHERE id % 11 = 0;
             INSERT INTO shop.orders VALUES (9001, 2, 99.99);",
        )
        .await?;
    pg.batch_execute(
        "UPDATE customers SET name = 'renamed' WHERE id = 2; DELETE FROM customers WHERE id = 3",
    )
    .await?;
    let query = "SELECT c.name, count(*) AS n, sum(o.amount) AS total \
                 FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.name";
    crate::harness::retry_until(std::time::Duration::from_secs(60), || async {
        // Both tables equal their upstreams, and the view equals its query over them.
        let ours =
            crate::harness::sorted(&client, "SELECT id, customer, amount FROM orders").await?;
        let theirs = mysql.rows("SELECT id, customer, amount FROM shop.orders").await?;
        ensure!(ours == theirs, "orders: {} rows, {} upstream", ours.len(), theirs.len());
        let ours = crate::harness::sorted(&client, "SELECT id, name FROM customers").await?;
        let theirs = crate::harness::sorted(&pg, "SELECT id, name FROM customers").await?;
        ensure!(ours == theirs, "customers differ");
        crate::harness::assert_view_matches(&client, "spend", query).await
    })
    .await
}

#[tokio::test]
async fn mysql_cdc_follows_a_failover_to_a_replica() -> anyhow::Result<()> {
    let Some(mut primary) = mariadb().await? else { return Ok(()) };
    let mut replica = MySqlUpstream::start_with_server_id(2).await?;
    let mut server = crate::harness::Sluice::start().await?;
    let outcome = failover_scenario(&mut primary, &mut replica, &mut server).await;
    outcome.with_context(|| {
        format!("{}\n{}\n{}", server.log_tail(), primary.log_tail(), replica.log_tail())
    })
}

/// Sluice reads a primary; while Sluice is down the primary fails over to its replica, whose
/// binlog files are numbered differently, on the primary's address. Sluice resumes by GTID.
async fn failover_scenario(
    primary: &mut MySqlUpstream,
    replica: &mut MySqlUpstream,
    server: &mut crate::harness::Sluice,
) -> anyhow::Result<()> {
    // The replica's files are not the primary's: its first ones are gone.
    replica.execute("FLUSH BINARY LOGS; FLUSH BINARY LOGS; FLUSH BINARY LOGS").await?;
    let (newest, _) = mysql::master_status(&mut replica.connect().await?).await?;
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        replica.execute(&format!("PURGE BINARY LOGS TO '{newest}'")).await?;
        let logs = replica.rows("SHOW BINARY LOGS").await?;
        ensure!(logs.len() == 1, "{logs:?}");
        Ok(())
    })
    .await?;
    replica
        .execute(&format!(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, MASTER_USER = 'root', \
             MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos; START SLAVE;",
            primary.port()
        ))
        .await?;
    primary
        .execute(
            "CREATE DATABASE shop;
             CREATE TABLE shop.items (id int PRIMARY KEY, v int);
             INSERT INTO shop.items SELECT seq, seq FROM shop.seq_1_to_2000;",
        )
        .await?;
    let client = server.connect().await?;
    client.batch_execute(&primary.source_sql("my", ", server.id = '5409'")).await?;
    client.batch_execute("CREATE TABLE items (*) FROM my TABLE 'shop.items'").await?;
    let query = "SELECT id, v FROM items";
    let upstream_query = "SELECT id, v FROM shop.items";
    primary.execute("UPDATE shop.items SET v = -v WHERE id <= 10").await?;
    assert_converges(&client, primary, query, upstream_query).await?;

    // Sluice goes down; the primary takes more changes, which the replica copies.
    server.kill9().await?;
    primary
        .execute(
            "UPDATE shop.items SET v = 0 WHERE id % 100 = 0;
             DELETE FROM shop.items WHERE id BETWEEN 500 AND 510;
             INSERT INTO shop.items VALUES (5000, 5000);",
        )
        .await?;
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        let a = primary.rows(upstream_query).await?;
        let b = replica.rows(upstream_query).await?;
        ensure!(a == b, "the replica has not caught up: {} rows of {}", b.len(), a.len());
        Ok(())
    })
    .await?;
    // Failover: the primary is gone, the replica takes its address and new writes.
    let address = primary.port();
    primary.stop().await?;
    replica.execute("STOP SLAVE; RESET SLAVE ALL").await?;
    replica.move_to(address).await?;
    replica
        .execute(
            "UPDATE shop.items SET v = 7 WHERE id = 1; INSERT INTO shop.items VALUES (6000, 6)",
        )
        .await?;
    let (file, _) = mysql::master_status(&mut replica.connect().await?).await?;
    ensure!(file != "binlog.000001", "the replica's files look like the primary's: {file}");

    server.restart().await?;
    let client = server.connect().await?;
    assert_converges(&client, replica, query, upstream_query).await?;
    replica.execute("DELETE FROM shop.items WHERE id = 2").await?;
    assert_converges(&client, replica, query, upstream_query).await?;
    Ok(())
}
