//! Postgres CDC sources against a private upstream Postgres: creation checks the upstream and
//! creates the publication and slot, bad input fails with a clear SQLSTATE and leaves nothing
//! behind, and dropping the source drops what it created.

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Sluice, text_rows};
use crate::upstream::Upstream;

/// The SQLSTATE of a failed statement, or an error if it succeeded.
async fn sqlstate_of(client: &Client, sql: &str) -> anyhow::Result<String> {
    match client.batch_execute(sql).await {
        Ok(()) => anyhow::bail!("expected {sql} to fail"),
        Err(e) => Ok(e.code().map(|c| c.code().to_owned()).unwrap_or_default()),
    }
}

fn source_sql(name: &str, upstream: &Upstream, extra: &str) -> String {
    format!(
        "CREATE SOURCE {name} WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', port = '{}', \
         username = 'postgres', password = '', database.name = 'shop'{extra})",
        upstream.port()
    )
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
        .batch_execute(&source_sql(
            "pg",
            upstream,
            ", slot.name = 'sl_pg', publication.name = 'pub_pg'",
        ))
        .await?;
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sl_pg'").await?
            == 1
    );
    ensure!(count(&up, "SELECT count(*) FROM pg_publication WHERE pubname = 'pub_pg'").await? == 1);
    let listed = text_rows(&client, "SHOW SOURCES").await?;
    ensure!(listed == vec![vec![Some("pg".to_owned())]], "SHOW SOURCES gave {listed:?}");
    ensure!(sqlstate_of(&client, &source_sql("pg", upstream, "")).await? == "42P07");
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
        sqlstate_of(&client, &source_sql("bad", upstream, ", database.name = 'nope'")).await?
            == "42601"
    );
    let missing_db = source_sql("bad", upstream, "").replace("'shop'", "'nope'");
    ensure!(sqlstate_of(&client, &missing_db).await? == "3D000");
    ensure!(sqlstate_of(&client, "CREATE SOURCE bad WITH (connector = 'kafka')").await? == "0A000");
    ensure!(
        count(&up, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sl_bad'").await?
            == 0
    );
    ensure!(text_rows(&client, "SHOW SOURCES").await?.len() == 1, "a failed source was listed");

    // An existing publication is used, not created, and so not dropped with the source.
    up.batch_execute("CREATE PUBLICATION pub_mine").await?;
    client.batch_execute(&source_sql("pg2", upstream, ", publication.name = 'pub_mine'")).await?;
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

/// The rows of a query, sorted, as text.
async fn sorted(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let mut rows = text_rows(client, sql).await?;
    rows.sort();
    Ok(rows)
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
           FROM generate_series(1, 20000) AS i;",
    )
    .await?;
    let client = server.connect().await?;
    client.batch_execute(&source_sql("pg", upstream, "")).await?;
    // Small pages so the writer overlaps the snapshot.
    client
        .batch_execute("CREATE TABLE person (*) WITH (snapshot.batch_size = '200') FROM pg TABLE 'public.person'")
        .await?;
    let writer = upstream.connect("shop").await?;
    for i in 0..300 {
        let id = 1 + (i * 7919) % 20000;
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

    // DML on a CDC table is refused; the upstream is the writer.
    ensure!(sqlstate_of(&client, "DELETE FROM person").await? == "42809");

    // Changes while Sluice is down arrive after the restart, exactly once.
    server.kill9().await?;
    up.batch_execute("UPDATE person SET flag = NOT flag WHERE id < 100; DELETE FROM person WHERE id BETWEEN 100 AND 150; INSERT INTO person VALUES (50000, 'offline', 2, now(), false)").await?;
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
    client
        .batch_execute("DROP MATERIALIZED VIEW person_flags; DROP TABLE person; DROP SOURCE pg")
        .await?;
    Ok(())
}
