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
