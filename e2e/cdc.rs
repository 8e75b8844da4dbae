//! Postgres CDC sources against a private upstream Postgres: creation checks the upstream and
//! creates the publication and slot, bad input fails with a clear SQLSTATE and leaves nothing
//! behind, and dropping the source drops what it created.

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use std::time::Duration;

use crate::harness::{Sluice, retry_until, sorted, text_rows, wait_jobs};
use crate::upstream::Upstream;

/// The SQLSTATE of a failed statement, or an error if it succeeded.
async fn sqlstate_of(client: &Client, sql: &str) -> anyhow::Result<String> {
    Ok(error_of(client, sql).await?.0)
}

async fn count(client: &Client, sql: &str) -> anyhow::Result<i64> {
    let rows = client.query_one(sql, &[]).await?;
    Ok(rows.get(0))
}

#[tokio::test]
async fn sources_create_and_drop_their_upstream_objects() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = sources(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn sources(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    let client = server.connect().await?;

    client
        .batch_execute(
            &upstream.source_sql("pg", ", slot.name = 'sl_pg', publication.name = 'pub_pg'"),
        )
        .await?;
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sl_pg'").await?
            == 1
    );
    ensure!(count(&up, "SELECT count(*) FROM pg_publication WHERE pubname = 'pub_pg'").await? == 1);
    let listed = text_rows(&client, "SHOW SOURCES").await?;
    ensure!(listed == vec![vec![Some("pg".to_owned())]], "SHOW SOURCES gave {listed:?}");
    ensure!(sqlstate_of(&client, &upstream.source_sql("pg", "")).await? == "42P07");
    ensure!(sqlstate_of(&client, "SELECT * FROM pg").await? == "0A000");

    // Bad input: each a clear error, nothing created upstream or in the catalog.
    let wrong_port = "CREATE SOURCE bad WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', \
                      port = '1', username = 'postgres', database.name = 'shop')";
    ensure!(sqlstate_of(&client, wrong_port).await? == "08001");
    up.batch_execute("CREATE ROLE plain LOGIN PASSWORD 'secret'").await?;
    let no_replication = format!(
        "CREATE SOURCE bad WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', port = '{}', \
         username = 'plain', password = 'secret', database.name = 'shop', slot.name = 'sl_bad')",
        upstream.port()
    );
    ensure!(sqlstate_of(&client, &no_replication).await? == "42501");
    ensure!(
        sqlstate_of(&client, &upstream.source_sql("bad", ", database.name = 'nope'")).await?
            == "42601"
    );
    let missing_db = upstream.source_sql("bad", "").replace("'shop'", "'nope'");
    ensure!(sqlstate_of(&client, &missing_db).await? == "3D000");
    ensure!(sqlstate_of(&client, "CREATE SOURCE bad WITH (connector = 'kafka')").await? == "0A000");
    ensure!(
        sqlstate_of(&client, "CREATE MATERIALIZED VIEW v AS SELECT * FROM pg").await? == "0A000"
    );

    // A wrong password: the upstream asks this role for one.
    up.batch_execute(
        "CREATE ROLE pw LOGIN REPLICATION PASSWORD 'right';
         DO $$ BEGIN EXECUTE format(
           'COPY (SELECT line FROM (VALUES (1, %L), (2, %L), (3, %L)) AS l(n, line) ORDER BY n) TO %L',
           'host all pw 127.0.0.1/32 scram-sha-256', 'host all all 127.0.0.1/32 trust', 'local all all trust',
           current_setting('hba_file')); END $$;
         SELECT pg_reload_conf();",
    )
    .await?;
    let wrong_password = format!(
        "CREATE SOURCE bad WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', port = '{}', \
         username = 'pw', password = 'wrong', database.name = 'shop')",
        upstream.port()
    );
    ensure!(sqlstate_of(&client, &wrong_password).await? == "28P01");
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sl_bad'").await?
            == 0
    );
    ensure!(text_rows(&client, "SHOW SOURCES").await?.len() == 1, "a failed source was listed");

    // An existing publication is used, not created, and so not dropped with the source.
    up.batch_execute("CREATE PUBLICATION pub_mine").await?;
    client.batch_execute(&upstream.source_sql("pg2", ", publication.name = 'pub_mine'")).await?;
    client.batch_execute("DROP SOURCE pg2").await?;
    ensure!(
        count(&up, "SELECT count(*) FROM pg_publication WHERE pubname = 'pub_mine'").await? == 1
    );
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_pg2'")
            .await?
            == 0
    );

    client.batch_execute("DROP SOURCE pg").await?;
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sl_pg'").await?
            == 0
    );
    ensure!(count(&up, "SELECT count(*) FROM pg_publication WHERE pubname = 'pub_pg'").await? == 0);
    ensure!(sqlstate_of(&client, "DROP SOURCE pg").await? == "42P01");
    client.batch_execute("DROP SOURCE IF EXISTS pg").await?;
    Ok(())
}

/// Waits until Sluice's `table` holds exactly the upstream's `upstream_query` rows.
async fn assert_converges(
    sluice: &Client,
    up: &Client,
    sluice_query: &str,
    upstream_query: &str,
) -> anyhow::Result<()> {
    crate::harness::retry_until(std::time::Duration::from_secs(60), || async {
        let ours = sorted(sluice, sluice_query).await?;
        let theirs = sorted(up, upstream_query).await?;
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

const PERSON_COLUMNS: &str = "id, name, amount, created, flag";

#[tokio::test]
async fn cdc_table_backfills_under_concurrent_writes() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = cdc_table(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn cdc_table(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "SET TimeZone = 'UTC';
         CREATE TABLE person (id int PRIMARY KEY, name text, amount numeric(10,2), created timestamptz, flag boolean);
         INSERT INTO person SELECT i, 'p' || i, i / 100.0, '2024-01-01'::timestamptz + i * interval '1 minute', i % 2 = 0
           FROM generate_series(1, 100000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    // Small pages so the writer overlaps the snapshot.
    client
        .batch_execute("CREATE TABLE person (*) WITH (snapshot.batch_size = '500') FROM pg TABLE 'public.person'")
        .await?;
    let writer = upstream.connect("shop").await?;
    for i in 0..300 {
        let id = 1 + (i * 7919) % 100_000;
        let sql = match i % 3 {
            0 => format!(
                "UPDATE person SET name = 'changed{i}', amount = amount + 1 WHERE id = {id}"
            ),
            1 => format!("DELETE FROM person WHERE id = {id}"),
            _ => format!(
                "INSERT INTO person VALUES ({}, 'new', 1.5, now(), true) ON CONFLICT DO NOTHING",
                30000 + i
            ),
        };
        writer.batch_execute(&sql).await?;
    }
    let query = format!("SELECT {PERSON_COLUMNS} FROM person");
    if let Err(e) = assert_converges(&client, &up, &query, &query).await {
        let internal = text_rows(&client, "SHOW INTERNAL TABLES").await?;
        let mut state = Vec::new();
        for t in internal.iter().filter_map(|r| r[0].clone()) {
            state.push((t.clone(), text_rows(&client, &format!("SELECT * FROM {t}")).await?));
        }
        let count = text_rows(&client, "SELECT count(*), max(id) FROM person").await?;
        anyhow::bail!("{e:#}\nstate: {state:?}\ncount: {count:?}");
    }

    // Its snapshot finished, the table's level-0 files were merged (in the background).
    crate::harness::retry_until(std::time::Duration::from_secs(30), || async {
        let log = server.current_run_log();
        ensure!(log.contains("merged the snapshot's level-0 files"), "no merge logged");
        Ok(())
    })
    .await?;

    // The source's changes and lag show in /metrics and /api/sources.
    let s = crate::observability::scrape(server).await?;
    let person = [("source", "pg"), ("table", "public.person")];
    let changes = crate::observability::sample(&s, "sluice_cdc_source_changes_total", &person);
    ensure!(changes.is_some_and(|n| n >= 200.0), "changes counted: {changes:?}");
    let pg = [("source", "pg")];
    ensure!(crate::observability::sample(&s, "sluice_cdc_lag_bytes", &pg).is_some());
    let lag = crate::observability::sample(&s, "sluice_cdc_lag_seconds", &pg);
    ensure!(lag.is_some_and(|s| s < 30.0), "lag {lag:?}");
    let (status, sources) = server.http("GET", "/api/sources").await?;
    ensure!(status == 200 && sources.contains("\"person\""), "{status} {sources}");

    // DML on a CDC table is refused; the upstream is the writer.
    ensure!(sqlstate_of(&client, "DELETE FROM person").await? == "42809");

    // Changes while Sluice is down arrive after the restart, exactly once.
    server.kill9().await?;
    up.batch_execute("UPDATE person SET flag = NOT flag WHERE id < 100; DELETE FROM person WHERE id BETWEEN 100 AND 150; INSERT INTO person VALUES (500000, 'offline', 2, now(), false)").await?;
    server.restart().await?;
    let client = server.connect().await?;
    assert_converges(&client, &up, &query, &query).await?;

    // A graceful stop (SIGTERM) exits cleanly and keeps every committed row.
    let status = server.terminate(Duration::from_secs(30)).await?;
    ensure!(status.success(), "sluice exited with {status} on SIGTERM");
    ensure!(server.current_run_log().contains("shutting down"), "no shutdown logged");
    server.restart().await?;
    let client = server.connect().await?;
    assert_converges(&client, &up, &query, &query).await?;

    // A view over the CDC table follows it.
    client.batch_execute("CREATE MATERIALIZED VIEW person_flags AS SELECT flag, count(*) AS n FROM person GROUP BY flag").await?;
    up.batch_execute("UPDATE person SET flag = true WHERE id % 10 = 3").await?;
    assert_converges(
        &client,
        &up,
        "SELECT * FROM person_flags",
        "SELECT flag, count(*) AS n FROM person GROUP BY flag",
    )
    .await?;

    ensure!(sqlstate_of(&client, "DROP SOURCE pg").await? == "2BP01");
    // Dropping the table takes it out of the publication Sluice created for the source.
    let published = "SELECT count(*) FROM pg_publication_tables WHERE tablename = 'person'";
    ensure!(count(&up, published).await? == 1);
    // ... but not while another table of the source reads the same upstream table.
    client
        .batch_execute("CREATE TABLE person_changes (*) WITH (snapshot = 'false') FROM pg TABLE 'public.person'")
        .await?;
    client.batch_execute("DROP MATERIALIZED VIEW person_flags; DROP TABLE person").await?;
    ensure!(count(&up, published).await? == 1, "a table still read was unpublished");
    up.batch_execute("INSERT INTO person VALUES (600000, 'after drop', 1, now(), true)").await?;
    retry_until(Duration::from_secs(30), || async {
        let n = count(&client, "SELECT count(*) FROM person_changes WHERE id = 600000").await?;
        ensure!(n == 1, "person_changes has not received the insert");
        Ok(())
    })
    .await?;
    client.batch_execute("DROP TABLE person_changes").await?;
    ensure!(count(&up, published).await? == 0, "the dropped table is still published");
    client.batch_execute("DROP SOURCE pg").await?;
    Ok(())
}

#[tokio::test]
async fn cdc_tables_cover_keys_types_and_bad_input() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = keys_types_bad_input(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn keys_types_bad_input(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "SET TimeZone = 'UTC';
         CREATE TABLE \"Orders\" (active boolean, n bigint, day date, note text, big text, PRIMARY KEY (active, n, day));
         INSERT INTO \"Orders\" SELECT i % 2 = 0, i, '2024-01-01'::date + (i % 7), 'o' || i, NULL FROM generate_series(1, 700) AS i;
         CREATE TABLE customers (id int PRIMARY KEY, name text);
         INSERT INTO customers SELECT i, 'c' || i FROM generate_series(0, 49) AS i;
         CREATE TABLE nokey (a int);
         CREATE TABLE later (id int PRIMARY KEY, v int);
         INSERT INTO later VALUES (1, 1), (2, 2);
         CREATE TABLE pairs (region varchar(8), seq int, v int, PRIMARY KEY (region, seq));
         INSERT INTO pairs SELECT CASE WHEN i % 3 = 0 THEN 'Zeta' WHEN i % 3 = 1 THEN 'alpha' ELSE 'beta' END, i, i
           FROM generate_series(1, 500) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;

    // Bad input, each with a clear SQLSTATE and nothing created.
    ensure!(sqlstate_of(&client, "CREATE TABLE x (*) FROM pg TABLE 'customers'").await? == "42601");
    ensure!(
        sqlstate_of(&client, "CREATE TABLE x (*) FROM pg TABLE 'public.missing'").await? == "42P01"
    );
    ensure!(
        sqlstate_of(&client, "CREATE TABLE x (*) FROM pg TABLE 'public.nokey'").await? == "42601"
    );
    ensure!(sqlstate_of(&client, "CREATE TABLE x (id int, name text, PRIMARY KEY (name)) FROM pg TABLE 'public.customers'").await? == "42601");
    ensure!(
        sqlstate_of(
            &client,
            "CREATE TABLE x (id int PRIMARY KEY, name int) FROM pg TABLE 'public.customers'"
        )
        .await?
            == "42804"
    );
    ensure!(
        sqlstate_of(&client, "CREATE TABLE x (*) FROM nosource TABLE 'public.customers'").await?
            == "42P01"
    );
    // Options are honoured or refused, never accepted and ignored.
    for (options, state) in [
        ("backfill.parallelism = '0'", "42601"),
        ("backfill.num_rows_per_split = 'many'", "42601"),
        ("snapshot.interval = '5'", "0A000"),
        ("snapshot = 'yes'", "42601"),
        ("snapshot.chunk = '5'", "42601"),
    ] {
        let sql = format!("CREATE TABLE x (*) WITH ({options}) FROM pg TABLE 'public.customers'");
        let got = sqlstate_of(&client, &sql).await?;
        ensure!(got == state, "{options}: expected {state}, got {got:?}");
    }
    ensure!(
        text_rows(&client, "SHOW TABLES").await?.is_empty(),
        "a failed CREATE TABLE left a table"
    );

    let plan =
        text_rows(&client, "EXPLAIN CREATE TABLE customers (*) FROM pg TABLE 'public.customers'")
            .await?;
    let plan: Vec<String> = plan.into_iter().filter_map(|r| r[0].clone()).collect();
    ensure!(
        plan.len() == 3 && plan[1].contains("StreamCdcScan") && plan[2].contains("StreamSource"),
        "EXPLAIN gave {plan:?}"
    );
    // Splits are left to the table's size unless given.
    ensure!(plan[1].contains("parallelism: auto"), "EXPLAIN gave {plan:?}");
    let plan = text_rows(
        &client,
        "EXPLAIN CREATE TABLE customers (*) WITH (backfill.parallelism = '3') \
         FROM pg TABLE 'public.customers'",
    )
    .await?;
    let scan = plan.get(1).and_then(|r| r[0].clone()).unwrap_or_default();
    ensure!(scan.contains("parallelism: 3"), "EXPLAIN gave {scan}");

    // Composite keys of mixed types and a case-sensitive upstream name.
    client
        .batch_execute("CREATE TABLE orders (*) WITH (snapshot.batch_size = '64') FROM pg TABLE 'public.\"Orders\"'")
        .await?;
    client.batch_execute("CREATE TABLE customers (id int PRIMARY KEY, name varchar) FROM pg TABLE 'public.customers'").await?;
    // Two key columns, text first: pages compare the text bytewise, as Sluice's keys do.
    client
        .batch_execute(
            "CREATE TABLE pairs (*) WITH (snapshot.batch_size = '7') FROM pg TABLE 'public.pairs'",
        )
        .await?;
    // Only changes from now on.
    client
        .batch_execute(
            "CREATE TABLE later (*) WITH (snapshot = 'false') FROM pg TABLE 'public.later'",
        )
        .await?;
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_customer AS SELECT c.name, count(*) AS n FROM orders o JOIN customers c ON o.n % 50 = c.id GROUP BY c.name",
        )
        .await?;
    up.batch_execute(
        "UPDATE \"Orders\" SET note = 'moved', day = day + 30 WHERE n % 50 = 3;
         DELETE FROM \"Orders\" WHERE n % 50 = 4 AND active;
         INSERT INTO \"Orders\" VALUES (true, 999, '2025-01-01', 'new', NULL);
         UPDATE customers SET name = 'renamed' WHERE id = 5;
         INSERT INTO later VALUES (3, 3);
         UPDATE later SET v = 20 WHERE id = 2;",
    )
    .await?;
    // A large (TOASTed) value, then an update that leaves it unchanged: Sluice keeps it.
    up.batch_execute(
        "UPDATE \"Orders\" SET big = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) AS i) WHERE n % 50 = 7;
         UPDATE \"Orders\" SET note = 'touched' WHERE n % 50 = 7;",
    )
    .await?;
    up.batch_execute(
        "UPDATE pairs SET v = -v WHERE seq % 10 = 0; DELETE FROM pairs WHERE seq % 11 = 0",
    )
    .await?;
    assert_converges(
        &client,
        &up,
        "SELECT region, seq, v FROM pairs",
        "SELECT region, seq, v FROM pairs",
    )
    .await?;
    let orders = "SELECT active, n, day, note, big FROM orders";
    let upstream_orders = "SELECT active, n, day, note, big FROM \"Orders\"";
    assert_converges(&client, &up, orders, upstream_orders).await?;
    assert_converges(
        &client,
        &up,
        "SELECT * FROM per_customer",
        "SELECT c.name, count(*) AS n FROM \"Orders\" o JOIN customers c ON o.n % 50 = c.id GROUP BY c.name",
    )
    .await?;
    // The snapshot was skipped: row 1 never changed, so it never arrived.
    assert_converges(
        &client,
        &up,
        "SELECT id, v FROM later",
        "SELECT id, v FROM later WHERE id <> 1",
    )
    .await?;

    // One statement for a table with a source of its own, which goes with the table.
    client
        .batch_execute(&format!(
            "CREATE TABLE cust2 (id int PRIMARY KEY, name varchar) WITH (connector = 'postgres-cdc', \
             hostname = '127.0.0.1', port = '{}', username = 'postgres', database.name = 'shop', \
             table.name = 'public.customers', snapshot.batch_size = '10')",
            upstream.port()
        ))
        .await?;
    assert_converges(&client, &up, "SELECT id, name FROM cust2", "SELECT id, name FROM customers")
        .await?;
    ensure!(
        text_rows(&client, "SHOW SOURCES").await?.len() == 2,
        "the table's own source is listed"
    );
    client.batch_execute("DROP TABLE cust2").await?;
    ensure!(
        text_rows(&client, "SHOW SOURCES").await?.len() == 1,
        "the table's own source went with it"
    );
    ensure!(
        count(
            &up,
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice__cust2_source'"
        )
        .await?
            == 0
    );
    Ok(())
}

#[tokio::test]
async fn snapshot_pages_and_changes_read_every_type_alike() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = every_type(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Columns of `types`: one of each upstream type Sluice reads, decoded from binary pages or
/// (enums, arrays, uuid, interval, json) read as text.
const TYPE_COLUMNS: &str = "b boolean, s smallint, i int, l bigint, r real, d double precision, \
     n numeric, n2 numeric(10,2), dt date, ts timestamp, tz timestamptz, by bytea, t text, \
     vc varchar(5), ch char(3), j jsonb, js json, u uuid, arr int[], e mood, iv interval";

/// Rows 1-6 are read by the snapshot (binary pages); copies of them inserted afterwards as rows
/// 101-106 arrive through the change stream (text): each copy must equal its original in every
/// column. A second table keyed on a timestamp (BC ones too), a numeric, bytes and a float is
/// read in pages of 7 rows, each page after the previous one's last key.
async fn every_type(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(&format!(
        "SET TimeZone = 'Europe/Paris';
         CREATE TYPE mood AS ENUM ('sad', 'happy');
         CREATE TABLE types (id int PRIMARY KEY, {TYPE_COLUMNS});
         INSERT INTO types VALUES
         (1, true, 1, 1, 1, 1.5, 0.1, 3.14159, 12.34, '2024-02-29', '2024-01-01 12:34:56.789',
          '2024-01-01 12:34:56.789+02', '\\x00ff5c27', 'héllo ☃', 'abc', 'ab', '{{\"a\": [1, 2.50]}}',
          '{{\"b\":  1}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{1,2,NULL}}', 'happy', '1 day 02:03:04'),
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
          NULL, NULL, NULL, NULL, NULL, NULL),
         (3, false, -32768, -2147483648, -9223372036854775808, 'NaN', '-Infinity', -0.0000000001, -99999999.99,
          '1970-01-01', '1999-12-31 23:59:59.999999', '1900-01-01 00:00:00+00', '\\x', '', '', ' ',
          '[]', 'null', '00000000-0000-0000-0000-000000000000', '{{}}', 'sad', '-1 mon'),
         (4, true, 32767, 2147483647, 9223372036854775807, 'Infinity', 1e308,
          123456789012345678.0123456789, 0.005, 'infinity', 'infinity', '-infinity', '\\x0a0d09',
          E'tab\\tand\\nnewline ''quoted'' \\\\', 'x', 'xyz', '{{\"k\": \"v\\\"w\"}}', '1.50',
          'ffffffff-ffff-ffff-ffff-ffffffffffff', '{{3,NULL,-4}}', 'happy', '3 years'),
         (5, false, 0, 0, 0, 1e-30, -0.0, 1.0000000005, -0.005, '2000-01-01', '2000-01-01 00:00:00',
          '2000-01-01 00:00:00+00', '\\x00', 'a', 'b', 'c', '{{}}', '{{}}',
          '12345678-1234-1234-1234-123456789012', '{{-1}}', 'sad', '0'),
         (6, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0044-03-15 BC', '0001-12-31 23:59:59.5 BC',
          '0100-06-01 12:00:00+00 BC', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
         CREATE TABLE keyed (k_ts timestamp, k_num numeric, k_by bytea, k_f float8, v int,
           PRIMARY KEY (k_ts, k_num, k_by, k_f));
         INSERT INTO keyed SELECT
           CASE WHEN i % 3 = 0 THEN '0044-03-15 12:00:00.25 BC'::timestamp + i * interval '1 day'
                ELSE '2024-01-01'::timestamp + (i % 5) * interval '1.5 seconds' END,
           (i % 4) / 4.0, decode(lpad(to_hex(i % 6), 4, '0'), 'hex'), i * 0.1, i
         FROM generate_series(1, 300) AS i;"
    ))
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "CREATE TABLE types (*) FROM pg TABLE 'public.types';
             CREATE TABLE keyed (*) WITH (snapshot.batch_size = '7') FROM pg TABLE 'public.keyed'",
        )
        .await?;
    wait_jobs(&client, Duration::from_secs(60)).await?;
    let columns: Vec<&str> =
        TYPE_COLUMNS.split(", ").map(|c| c.split(' ').next().unwrap_or(c)).collect();
    let columns = columns.join(", ");
    up.batch_execute(&format!(
        "INSERT INTO types SELECT id + 100, {columns} FROM types WHERE id <= 6"
    ))
    .await?;
    let rows = retry_until(Duration::from_secs(60), || async {
        let rows =
            text_rows(&client, &format!("SELECT id, {columns} FROM types ORDER BY id")).await?;
        ensure!(rows.len() == 12, "{} rows of 12", rows.len());
        Ok(rows)
    })
    .await?;
    let names: Vec<&str> = columns.split(", ").collect();
    for (snapshot, change) in rows[..6].iter().zip(&rows[6..]) {
        for (c, name) in names.iter().enumerate() {
            let (a, b) = (&snapshot[c + 1], &change[c + 1]);
            ensure!(
                a == b,
                "row {:?}, column {name}: snapshot {a:?}, change stream {b:?}",
                snapshot[0]
            );
        }
    }
    // And both as Postgres has them, where Sluice prints what Postgres prints.
    assert_converges(
        &client,
        &up,
        "SELECT id, b, s, i, l, t, vc, ch, u, arr, e, iv, encode(by, 'hex') FROM types",
        // char(n) without its blank padding, as Postgres compares it (and prints it as text).
        "SELECT id, b, s, i, l, t, vc, ch::text, u::text, arr::text, e::text, iv::text, \
         encode(by, 'hex') FROM types",
    )
    .await?;
    let first = &rows[0];
    ensure!(
        first[7].as_deref() == Some("3.14159") && first[8].as_deref() == Some("12.34"),
        "numerics read as {:?} and {:?}",
        first[7],
        first[8]
    );
    // Every digit of an unconstrained numeric that fits numeric(38, 10) is kept (one that does
    // not stops the table: e2e/cdc_upstream_events.rs).
    ensure!(rows[4][7].as_deref() == Some("1.0000000005"), "n of row 5 is {:?}", rows[4][7]);
    ensure!(rows[4][8].as_deref() == Some("-0.01"), "n2 of row 5 is {:?}", rows[4][8]);
    // Years before 1 are kept, not lost to NULL.
    ensure!(rows[5][9..=11].iter().all(Option::is_some), "row 6: {:?}", rows[5]);

    let keyed = "SELECT count(*), count(DISTINCT v), sum(v) FROM keyed";
    assert_converges(&client, &up, keyed, keyed).await?;
    Ok(())
}

#[tokio::test]
async fn writes_ahead_of_the_snapshot_cursor_show_long_before_it_gets_there() -> anyhow::Result<()>
{
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = writes_ahead(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Rows read so far by the one CDC backfill (0 before its first checkpoint).
async fn rows_read(client: &Client) -> anyhow::Result<i64> {
    Ok(split_rows(client).await?.iter().map(|s| s.1).sum())
}

/// A snapshot read slowly (2000 rows/s) while the upstream writes to the end of the table it
/// has not read yet: the writes show in Sluice within seconds, also after a kill -9, and the
/// table and a view on it end equal to the upstream.
async fn writes_ahead(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 100_000;
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(&format!(
        "CREATE TABLE big (id bigint PRIMARY KEY, v int);
         INSERT INTO big SELECT i, i % 100 FROM generate_series(1, {ROWS}) AS i;"
    ))
    .await?;
    let mut client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true;
             SET backfill_rate_limit = 2000;
             CREATE TABLE big (*) WITH (snapshot.batch_size = '100') FROM pg TABLE 'public.big';
             CREATE MATERIALIZED VIEW big_sum AS SELECT v % 10 AS k, count(*) AS n, sum(v) AS s FROM big GROUP BY v % 10;",
        )
        .await?;
    retry_until(Duration::from_secs(60), || async {
        ensure!(rows_read(&client).await? > 0, "no page read yet");
        Ok(())
    })
    .await?;
    for round in 0..2 {
        let marker = -1 - round;
        up.batch_execute(&format!(
            "UPDATE big SET v = {marker} WHERE id > {ROWS} - 20 AND id <= {ROWS} - 10;
             INSERT INTO big VALUES ({ROWS} + 1 + {round}, {marker});
             DELETE FROM big WHERE id = {ROWS} - 1 - {round};"
        ))
        .await?;
        retry_until(Duration::from_secs(10), || async {
            let sql = format!("SELECT count(*) FROM big WHERE v = {marker}");
            let shown = text_rows(&client, &sql).await?;
            ensure!(shown[0][0].as_deref() == Some("11"), "{shown:?} rows show the writes");
            let gone = format!("SELECT count(*) FROM big WHERE id = {ROWS} - 1 - {round}");
            ensure!(text_rows(&client, &gone).await?[0][0].as_deref() == Some("0"));
            Ok(())
        })
        .await
        .with_context(|| format!("round {round}: writes ahead of the cursor did not show"))?;
        let read = rows_read(&client).await?;
        ensure!(
            read < ROWS / 2,
            "round {round}: the snapshot had read {read} rows: not ahead of it any more"
        );
        if round == 0 {
            // Rescaled mid-snapshot: the backfill goes on from its cursor.
            client.batch_execute("ALTER TABLE big SET PARALLELISM = 2").await?;
        }
        // After a kill the rows written ahead are still there, and are still overwritten by
        // the pages that reach them.
        server.kill9().await?;
        server.restart().await?;
        client = server.connect().await?;
    }
    client.batch_execute("ALTER TABLE big SET BACKFILL_RATE_LIMIT = DEFAULT").await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    let query = "SELECT id, v FROM big";
    assert_converges(&client, &up, query, query).await?;
    let view = "SELECT v % 10 AS k, count(*) AS n, sum(v) AS s FROM big GROUP BY v % 10";
    assert_converges(&client, &up, "SELECT k, n, s FROM big_sum", view).await?;
    let read = rows_read(&client).await?;
    ensure!(read < ROWS * 12 / 10, "read {read} rows for {ROWS}: the snapshot started over");
    Ok(())
}

#[tokio::test]
async fn sources_use_tls_as_ssl_mode_says() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = tls(&mut upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// The message of a failed statement, with its SQLSTATE.
async fn error_of(client: &Client, sql: &str) -> anyhow::Result<(String, String)> {
    match client.batch_execute(sql).await {
        Ok(()) => anyhow::bail!("expected {sql} to fail"),
        Err(e) => {
            let db = e.as_db_error().context("not a server error")?;
            Ok((db.code().code().to_owned(), db.message().to_owned()))
        }
    }
}

/// `ssl.mode` against an upstream without TLS, then with it (a certificate from a private CA):
/// snapshot, changes and validation all go over TLS when asked, and a certificate that does not
/// chain to `ssl.root.cert` is refused.
async fn tls(upstream: &mut Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    upstream
        .connect("shop")
        .await?
        .batch_execute(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 500) AS i;",
        )
        .await?;
    let client = server.connect().await?;
    let (code, message) =
        error_of(&client, &upstream.source_sql("s", ", ssl.mode = 'required'")).await?;
    ensure!(code == "08001" && message.contains("TLS"), "{code}: {message}");
    client.batch_execute(&upstream.source_sql("s", ", ssl.mode = 'preferred'")).await?;
    client.batch_execute("DROP SOURCE s").await?;
    let (code, message) =
        error_of(&client, &upstream.source_sql("s", ", ssl.mode = 'verify-full'")).await?;
    ensure!(code == "22023" && message.contains("ssl.root.cert"), "{code}: {message}");
    let (code, _) = error_of(&client, &upstream.source_sql("s", ", ssl.mode = 'on'")).await?;
    ensure!(code == "22023", "ssl.mode 'on': {code}");

    let ca = upstream.enable_tls().await?;
    let ca = ca.display().to_string();
    let up = upstream.connect("shop").await?;
    client
        .batch_execute(
            &upstream
                .source_sql("pg", &format!(", ssl.mode = 'verify-full', ssl.root.cert = '{ca}'")),
        )
        .await?;
    client.batch_execute("CREATE TABLE t (*) FROM pg TABLE 'public.t'").await?;
    up.batch_execute("UPDATE t SET v = 'changed' WHERE id % 7 = 0; DELETE FROM t WHERE id > 490")
        .await?;
    assert_converges(&client, &up, "SELECT id, v FROM t", "SELECT id, v FROM t").await?;
    let plain = count(
        &up,
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'sluice' AND NOT s.ssl",
    )
    .await?;
    let encrypted = count(
        &up,
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'sluice' AND s.ssl",
    )
    .await?;
    ensure!(plain == 0 && encrypted > 0, "{plain} plain and {encrypted} TLS connections");
    // The change stream is one of them: its replication connection.
    let streams = count(
        &up,
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'sluice' AND a.backend_type = 'walsender' AND s.ssl",
    )
    .await?;
    ensure!(streams == 1, "{streams} replication connections over TLS");

    // The same CA as PEM text; `required` does not check the certificate.
    let pem = std::fs::read_to_string(&ca)?.replace('\'', "''");
    client
        .batch_execute(
            &upstream
                .source_sql("s2", &format!(", ssl.mode = 'verify-ca', ssl.root.cert = '{pem}'")),
        )
        .await?;
    client.batch_execute(&upstream.source_sql("s3", ", ssl.mode = 'required'")).await?;
    // A certificate from another CA is refused.
    let other = tempfile::tempdir()?;
    let other_ca = crate::upstream::make_ca(other.path(), "other")?;
    let sql = upstream.source_sql(
        "s4",
        &format!(", ssl.mode = 'verify-ca', ssl.root.cert = '{}'", other_ca.display()),
    );
    let (code, message) = error_of(&client, &sql).await?;
    ensure!(code == "08001" && message.contains("TLS"), "{code}: {message}");
    client.batch_execute("DROP SOURCE s2; DROP SOURCE s3").await?;
    Ok(())
}

#[tokio::test]
async fn a_parallel_snapshot_rides_out_cut_connections_and_a_dropped_slot_is_reported()
-> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = cut_connections(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Every connection Sluice has to the upstream is cut (as a network cut or an upstream
/// restart does) three times while 4 splits read: each split reads on after its own cursor,
/// and the table ends equal to the upstream. Then the slot is dropped upstream: the progress
/// view says so, and the server stays up.
async fn cut_connections(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 60_000;
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(&format!(
        "CREATE TABLE events (id bigint PRIMARY KEY, v int);
         INSERT INTO events SELECT i, i FROM generate_series(1, {ROWS}) AS i;"
    ))
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true;
             SET backfill_rate_limit = 6000;
             CREATE TABLE events (*) WITH (backfill.parallelism = '4', snapshot.batch_size = '100')
               FROM pg TABLE 'public.events'",
        )
        .await?;
    for round in 1..=3i64 {
        retry_until(Duration::from_secs(60), || async {
            let read = rows_read(&client).await?;
            ensure!(read >= round * 8_000, "{read} rows read");
            Ok(())
        })
        .await?;
        up.batch_execute(&format!(
            "UPDATE events SET v = -v WHERE id % 1000 = {round};
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'sluice' AND pid <> pg_backend_pid();"
        ))
        .await?;
    }
    let splits = split_rows(&client).await?;
    ensure!(splits.len() == 4 && splits.iter().any(|s| !s.2), "finished too soon: {splits:?}");
    client.batch_execute("ALTER TABLE events SET BACKFILL_RATE_LIMIT = DEFAULT").await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    let query = "SELECT id, v FROM events";
    assert_converges(&client, &up, query, query).await?;
    let read = rows_read(&client).await?;
    ensure!(read < ROWS * 12 / 10, "read {read} rows for {ROWS}: some split started over");

    // The slot goes behind Sluice's back: its stream is cut, and the slot dropped before
    // Sluice starts it again.
    retry_until(Duration::from_secs(30), || async {
        up.batch_execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
             WHERE slot_name = 'sluice_pg' AND active_pid IS NOT NULL;
             SELECT pg_drop_replication_slot('sluice_pg');",
        )
        .await?;
        Ok(())
    })
    .await?;
    up.batch_execute("UPDATE events SET v = 0 WHERE id = 1").await?;
    let error = retry_until(Duration::from_secs(30), || async {
        let rows = text_rows(
            &client,
            "SELECT source_error FROM rw_catalog.rw_cdc_progress WHERE table_name = 'events'",
        )
        .await?;
        // The cut stream shows first, as an error that passes.
        let error = rows.first().and_then(|r| r[0].clone()).context("no source error yet")?;
        ensure!(error.contains("dropped outside Sluice"), "source_error: {error}");
        Ok(error)
    })
    .await?;
    ensure!(error.contains("sluice_pg"), "source_error: {error}");
    ensure!(count(&client, "SELECT count(*) FROM events").await? == ROWS, "the table is intact");
    Ok(())
}

#[tokio::test]
async fn source_needs_logical_wal_level() -> anyhow::Result<()> {
    let upstream = Upstream::start_with_wal_level("replica").await?;
    let server = Sluice::start().await?;
    let outcome = replica_wal_level(&upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

async fn replica_wal_level(upstream: &Upstream, server: &Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let client = server.connect().await?;
    let state = sqlstate_of(&client, &upstream.source_sql("pg", "")).await?;
    ensure!(state == "55000", "expected 55000 for wal_level = replica, got {state}");
    ensure!(text_rows(&client, "SHOW SOURCES").await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn cdc_survives_a_crash_mid_snapshot_and_an_upstream_restart() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = crash_and_restart(&mut upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Rows read so far by the CDC backfill, from its state table (all splits).
pub async fn cdc_rows_read(client: &Client) -> anyhow::Result<i64> {
    Ok(split_rows(client).await?.iter().map(|s| s.1).sum())
}

async fn crash_and_restart(upstream: &mut Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int);
         INSERT INTO items SELECT i, i FROM generate_series(1, 100000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            // At 20 000 rows/s the 100 000 rows take 5 s, however fast the machine: the kill
            // lands mid-snapshot.
            "SET background_ddl = true;
             SET backfill_rate_limit = 20000;
             CREATE TABLE items (*) WITH (snapshot.batch_size = '50') FROM pg TABLE 'public.items'",
        )
        .await?;
    let before = crate::harness::retry_until(std::time::Duration::from_secs(60), || async {
        let read = cdc_rows_read(&client).await?;
        ensure!(read >= 2000, "only {read} rows read");
        Ok(read)
    })
    .await?;
    ensure!(before < 100_000, "the snapshot finished before the kill; lower its rate limit");
    server.kill9().await?;
    up.batch_execute(
        "UPDATE items SET v = -v WHERE id % 1000 = 0; DELETE FROM items WHERE id % 1000 = 1",
    )
    .await?;
    server.restart().await?;
    let client = server.connect().await?;
    let after = cdc_rows_read(&client).await?;
    ensure!(after >= before, "the snapshot went back from {before} to {after} rows");
    // The creation goes on in the background, listed with at least the rows read before.
    let progress = text_rows(
        &client,
        "SELECT rows_done, create_type FROM rw_catalog.rw_ddl_progress WHERE ddl_statement LIKE '%items%'",
    )
    .await?;
    if let Some(row) = progress.first() {
        let done: i64 = row[0].as_deref().unwrap_or("0").parse()?;
        ensure!(done >= before, "rw_ddl_progress went back from {before} to {done} rows");
        ensure!(row[1].as_deref() == Some("BACKGROUND"), "{row:?}");
    }

    // The upstream restarts while changes keep coming; the reader reconnects and resumes.
    up.batch_execute("INSERT INTO items VALUES (200001, 1)").await?;
    upstream.restart().await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute("INSERT INTO items VALUES (200002, 2); UPDATE items SET v = 7 WHERE id = 5")
        .await?;
    let query = "SELECT id, v FROM items";
    crate::harness::retry_until(std::time::Duration::from_secs(120), || async {
        let ours = sorted(&client, query).await?;
        let theirs = sorted(&up, query).await?;
        ensure!(ours == theirs, "{} rows in Sluice, {} upstream", ours.len(), theirs.len());
        Ok(())
    })
    .await?;
    let total = cdc_rows_read(&client).await?;
    ensure!(total < 150_000, "the snapshot read {total} rows: it restarted instead of resuming");
    Ok(())
}

#[tokio::test]
async fn cdc_splits_read_in_parallel_and_resume_each_after_a_crash() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = parallel_splits(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// Each split's `(split_id, row_count, backfill_finished)`, from the CDC backfill's state table.
async fn split_rows(client: &Client) -> anyhow::Result<Vec<(String, i64, bool)>> {
    let tables = text_rows(client, "SHOW INTERNAL TABLES").await?;
    let Some(table) =
        tables.iter().filter_map(|r| r[0].clone()).find(|n| n.contains("streamcdcscan"))
    else {
        return Ok(Vec::new());
    };
    let sql =
        format!("SELECT split_id, row_count, backfill_finished FROM {table} ORDER BY split_id");
    let rows = text_rows(client, &sql).await?;
    rows.iter()
        .map(|r| {
            let id = r[0].clone().unwrap_or_default();
            let count = r[1].as_deref().unwrap_or("0").parse()?;
            Ok((id, count, r[2].as_deref() == Some("t")))
        })
        .collect()
}

async fn parallel_splits(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    const ROWS: i64 = 200_000;
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(&format!(
        "CREATE TABLE events (id bigint PRIMARY KEY, v int, note text);
         INSERT INTO events SELECT i, i, 'n' || i FROM generate_series(1, {ROWS}) AS i;"
    ))
    .await?;
    let mut client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true;
             SET backfill_rate_limit = 10000;
             CREATE TABLE events (*) WITH (backfill.parallelism = '4', snapshot.batch_size = '100')
               FROM pg TABLE 'public.events'",
        )
        .await?;
    // Writes all over the key space while the splits read: inserts, updates, deletes and
    // updates that move a row to another key (and so, often, to another split).
    let writer = upstream.connect("shop").await?;
    let writes = tokio::spawn(async move {
        for i in 0..400i64 {
            let id = 1 + (i * 7919) % ROWS;
            let sql = match i % 4 {
                0 => format!("UPDATE events SET v = -v, note = 'u{i}' WHERE id = {id}"),
                1 => format!("DELETE FROM events WHERE id = {id}"),
                2 => format!(
                    "INSERT INTO events VALUES ({}, {i}, 'new') ON CONFLICT DO NOTHING",
                    ROWS + i
                ),
                _ => format!("UPDATE events SET id = {} WHERE id = {id}", ROWS * 2 + i),
            };
            writer.batch_execute(&sql).await?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        anyhow::Ok(())
    });

    // Killed twice mid-snapshot (it reads 10 k rows/s until the limit is lifted); no split's
    // count goes back.
    let mut seen: Vec<(String, i64, bool)> = Vec::new();
    for round in 0..2 {
        let at_least = 20_000 * (round + 1);
        let splits = retry_until(Duration::from_secs(120), || async {
            let splits = split_rows(&client).await?;
            let read: i64 = splits.iter().map(|s| s.1).sum();
            ensure!(splits.len() == 4 && read >= at_least, "splits {splits:?}");
            Ok(splits)
        })
        .await?;
        ensure!(splits.iter().all(|s| s.0.starts_with("public.events/")), "{splits:?}");
        for (before, after) in seen.iter().zip(&splits) {
            ensure!(
                before.0 == after.0 && after.1 >= before.1,
                "{before:?} went back to {after:?}"
            );
        }
        ensure!(
            splits.iter().any(|s| !s.2),
            "the snapshot finished before kill {round}: {splits:?}"
        );
        seen = splits;
        server.kill9().await?;
        server.restart().await?;
        client = server.connect().await?;
    }
    let restored = split_rows(&client).await?;
    for (before, after) in seen.iter().zip(&restored) {
        ensure!(after.1 >= before.1, "{before:?} went back to {after:?} after the restart");
    }
    client.batch_execute("ALTER TABLE events SET BACKFILL_RATE_LIMIT = DEFAULT").await?;
    writes.await??;
    let query = "SELECT id, v, note FROM events";
    if let Err(e) = assert_converges(&client, &up, query, query).await {
        let splits = split_rows(&client).await?;
        anyhow::bail!("{e:#}\nsplits: {splits:?}");
    }
    let splits = retry_until(Duration::from_secs(60), || async {
        let splits = split_rows(&client).await?;
        ensure!(splits.iter().all(|s| s.2), "not all splits finished: {splits:?}");
        Ok(splits)
    })
    .await?;
    let read: i64 = splits.iter().map(|s| s.1).sum();
    ensure!(read < ROWS * 12 / 10, "the splits read {read} rows for {ROWS}: some started over");
    // The sample cut the key space into parts of about as many rows.
    ensure!(splits.iter().all(|s| s.1 > ROWS / 8), "unbalanced splits: {splits:?}");
    // All splits count in the progress view.
    let progress = text_rows(
        &client,
        "SELECT split_total_count, split_backfilled_count, rows_done FROM rw_catalog.rw_cdc_progress",
    )
    .await?;
    let expected = vec![Some("4".to_owned()), Some("4".to_owned()), Some(read.to_string())];
    ensure!(progress == vec![expected], "rw_cdc_progress: {progress:?}");
    // And each split on its own, its range following the one before.
    let per_split = text_rows(
        &client,
        "SELECT split_id, split_start, split_end, cursor, rows_done, backfill_finished \
         FROM rw_catalog.rw_cdc_split_progress WHERE table_name = 'events' ORDER BY split_id",
    )
    .await?;
    ensure!(per_split.len() == 4, "rw_cdc_split_progress: {per_split:?}");
    for (i, row) in per_split.iter().enumerate() {
        ensure!(row[0].as_deref() == Some(format!("public.events/{i}").as_str()), "{row:?}");
        ensure!(row[5].as_deref() == Some("t") && row[3].is_some(), "{row:?}");
        let rows: i64 = row[4].as_deref().unwrap_or("0").parse()?;
        ensure!(rows == splits[i].1, "split {i}: {row:?} vs the state table's {:?}", splits[i]);
    }
    ensure!(per_split[0][1].is_none() && per_split[3][2].is_none(), "{per_split:?}");
    for pair in per_split.windows(2) {
        ensure!(pair[0][2].is_some() && pair[0][2] == pair[1][1], "ranges: {per_split:?}");
    }
    Ok(())
}

#[tokio::test]
async fn cdc_backfill_is_listed_in_ddl_progress() -> anyhow::Result<()> {
    let mut upstream = Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = cdc_progress(&mut upstream, &server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// The `(rows_done, rows_total, status, progress)` of the creating job of table `items`.
async fn items_progress(
    client: &Client,
) -> anyhow::Result<Option<(i64, Option<i64>, String, String)>> {
    let rows = text_rows(
        client,
        "SELECT rows_done, rows_total, status, progress FROM rw_catalog.rw_ddl_progress \
         WHERE ddl_statement LIKE 'CREATE TABLE items%'",
    )
    .await?;
    let Some(row) = rows.into_iter().next() else { return Ok(None) };
    let done = row[0].as_deref().unwrap_or("0").parse()?;
    let total = row[1].as_deref().map(str::parse).transpose()?;
    Ok(Some((done, total, row[2].clone().unwrap_or_default(), row[3].clone().unwrap_or_default())))
}

async fn cdc_progress(upstream: &mut Upstream, server: &Sluice) -> anyhow::Result<()> {
    use std::time::Duration;

    use crate::harness::retry_until;

    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int);
         INSERT INTO items SELECT i, i FROM generate_series(1, 20000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "SET background_ddl = true; SET backfill_rate_limit = 1000;
             CREATE TABLE items (*) WITH (snapshot.batch_size = '200') FROM pg TABLE 'public.items'",
        )
        .await?;
    // Listed with the upstream's row count, throttled, moving.
    let (done, total, status, progress) = retry_until(Duration::from_secs(30), || async {
        let all = text_rows(&client, "SELECT * FROM rw_catalog.rw_ddl_progress").await?;
        let p = items_progress(&client).await?.with_context(|| format!("not listed: {all:?}"))?;
        ensure!(p.0 > 0 && p.1.is_some(), "not moving yet: {p:?}");
        Ok(p)
    })
    .await?;
    let total = total.expect("checked");
    ensure!((19_000..=21_000).contains(&total), "rows_total {total} for 20000 upstream rows");
    ensure!(status == "throttled", "status {status}");
    ensure!(progress.ends_with(&format!("({done}/{total})")), "{progress}");
    let cdc = text_rows(
        &client,
        "SELECT upstream_table, split_total_count, split_backfilled_count, backfill_finished, \
         slot_lag_bytes IS NOT NULL FROM rw_catalog.rw_cdc_progress WHERE table_name = 'items'",
    )
    .await?;
    let expected = ["public.items", "1", "0", "f", "t"].map(|s| Some(s.to_owned())).to_vec();
    ensure!(cdc == vec![expected], "{cdc:?}");
    let code = sqlstate_of(&client, "ALTER TABLE pg SET PARALLELISM = 2").await?;
    ensure!(code == "42809", "ALTER of a source: SQLSTATE {code}");

    // The upstream goes away: the status says so and why; it comes back: the snapshot goes on.
    upstream.stop().await?;
    let status = retry_until(Duration::from_secs(30), || async {
        let (_, _, status, _) = items_progress(&client).await?.context("items is gone")?;
        ensure!(status.starts_with("waiting for upstream"), "status {status}");
        Ok(status)
    })
    .await?;
    ensure!(status.len() > "waiting for upstream: ".len(), "no reason given: {status}");
    upstream.resume().await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute("UPDATE items SET v = -v WHERE id % 100 = 0").await?;

    // Full speed; WAIT returns once the snapshot is done, then the table equals the upstream.
    client.batch_execute("ALTER TABLE items SET BACKFILL_RATE_LIMIT = DEFAULT").await?;
    wait_jobs(&client, Duration::from_secs(120)).await?;
    ensure!(items_progress(&client).await?.is_none(), "still listed after WAIT");
    let cdc = text_rows(
        &client,
        "SELECT split_backfilled_count, backfill_finished, rows_done FROM rw_catalog.rw_cdc_progress",
    )
    .await?;
    let finished = &cdc[0];
    ensure!(finished[0].as_deref() == Some("1") && finished[1].as_deref() == Some("t"), "{cdc:?}");
    let rows: i64 = finished[2].as_deref().unwrap_or("0").parse()?;
    ensure!(rows >= 20_000, "the snapshot read {rows} rows of 20000");
    assert_converges(&client, &up, "SELECT id, v FROM items", "SELECT id, v FROM items").await
}

#[tokio::test]
async fn unconstrained_numerics_keep_the_upstream_display_scale() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = display_scales(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// A value's bytes as the server sent them, whatever its type (a binary numeric: digits,
/// weight, sign and display scale).
#[derive(Debug, PartialEq)]
struct Raw(Option<Vec<u8>>);

impl<'a> tokio_postgres::types::FromSql<'a> for Raw {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw.to_vec())))
    }

    fn from_sql_null(
        _: &tokio_postgres::types::Type,
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &tokio_postgres::types::Type) -> bool {
        true
    }
}

/// Rows of `sql` in the binary format, each value's bytes.
async fn binary_rows(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<Raw>>> {
    let rows = client.query(sql, &[]).await?;
    Ok(rows.iter().map(|r| (0..r.len()).map(|i| r.get::<_, Raw>(i)).collect()).collect())
}

/// An unconstrained numeric prints as the upstream prints it (`1.50`, `2.000`), in text and in
/// binary, from the snapshot and from the change stream, in the CDC table, in views reading it
/// as it is (a view of a view too) and its sums, and across a SIGKILL; arithmetic on it has its
/// own digits.
async fn display_scales(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(
        "CREATE TABLE p (id int PRIMARY KEY, n numeric, c numeric(10, 3), note text);
         INSERT INTO p VALUES (1, 1.50, 1.5, 'a'), (2, 2.000, 2, 'b'), (3, 10, 3.25, 'c'),
           (4, -0.0100, NULL, 'd'), (5, 'NaN', 1, 'e'), (6, NULL, 0, 'f'),
           (7, 123456789012345678901234567890.123456789, 7, 'g'), (8, 0.000, 0, 'h');",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    client
        .batch_execute(
            "CREATE TABLE p (*) FROM pg TABLE 'public.p';
             CREATE MATERIALIZED VIEW pv AS SELECT id, n, n AS m, note FROM p WHERE id > 1;
             CREATE MATERIALIZED VIEW pvv AS SELECT * FROM pv WHERE n > 1;
             CREATE MATERIALIZED VIEW psum AS SELECT note < 'e' AS early, sum(n) AS s, count(*) AS c
               FROM p GROUP BY note < 'e';",
        )
        .await?;
    wait_jobs(&client, Duration::from_secs(60)).await?;
    let queries = [
        ("SELECT * FROM p ORDER BY id", "SELECT * FROM p ORDER BY id"),
        ("SELECT * FROM pv", "SELECT id, n, n AS m, note FROM p WHERE id > 1"),
        ("SELECT * FROM pvv", "SELECT id, n, n AS m, note FROM p WHERE id > 1 AND n > 1"),
        (
            "SELECT * FROM psum",
            "SELECT note < 'e' AS early, sum(n) AS s, count(*) AS c FROM p GROUP BY note < 'e'",
        ),
        ("SELECT sum(n) AS s FROM p WHERE id <> 5", "SELECT sum(n) AS s FROM p WHERE id <> 5"),
        (
            "SELECT n, id FROM p WHERE note < 'f' ORDER BY n DESC LIMIT 3",
            "SELECT n, id FROM p WHERE note < 'f' ORDER BY n DESC LIMIT 3",
        ),
    ];
    // Text (any order), then binary (rows sorted by their bytes).
    let up = &up;
    let same = |client: Client| async move {
        for (ours, theirs) in queries {
            assert_converges(&client, up, ours, theirs).await?;
            let sorted_binary = |rows: Vec<Vec<Raw>>| {
                let mut rows: Vec<String> = rows.iter().map(|r| format!("{r:?}")).collect();
                rows.sort();
                rows
            };
            let ours_binary = sorted_binary(binary_rows(&client, ours).await?);
            let theirs_binary = sorted_binary(binary_rows(up, theirs).await?);
            ensure!(
                ours_binary == theirs_binary,
                "{ours} in binary: {ours_binary:?}, upstream {theirs_binary:?}"
            );
        }
        anyhow::Ok(client)
    };
    let client = same(client).await?;
    up.batch_execute(
        "INSERT INTO p VALUES (9, 3.14000, 1, 'i');
         UPDATE p SET n = 5.5000 WHERE id = 3;
         UPDATE p SET n = 7.250, note = 'z' WHERE id = 1;",
    )
    .await?;
    same(client).await?;
    server.kill9().await?;
    server.restart().await?;
    up.batch_execute("INSERT INTO p VALUES (10, 19.9000, 1, 'j'); DELETE FROM p WHERE id = 2;")
        .await?;
    let client = same(server.connect().await?).await?;
    // Arithmetic prints its own digits (Postgres: the scale of its operands).
    let sum = text_rows(&client, "SELECT n + 0 FROM p WHERE id = 1").await?;
    ensure!(sum == [[Some("7.25".to_owned())]], "n + 0 is {sum:?}");
    Ok(())
}
