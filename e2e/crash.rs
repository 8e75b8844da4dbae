//! Crash recovery: `kill -9` the server, restart it on the same data directory, and check that
//! everything that was committed before the kill is still there.
//!
//! DML returns only after its write is committed, so a row acknowledged before the SIGKILL must
//! be visible right after the restart, without waiting for anything.

use anyhow::{Context, ensure};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::harness::Sluice;

/// Runs `sql` and returns its rows as text, `None` for NULL.
async fn rows(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let messages = client.simple_query(sql).await?;
    Ok(messages
        .iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

#[tokio::test]
async fn committed_row_survives_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = kill9_keeps_committed_row(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

/// Inserts a row, kills the server with SIGKILL, restarts it, and expects the row back.
async fn kill9_keeps_committed_row(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client
        .simple_query("CREATE TABLE kv (k bigint PRIMARY KEY, v int)")
        .await?;
    client.simple_query("INSERT INTO kv VALUES (1, 10)").await?;
    drop(client);

    server.kill9().await?;
    server.restart().await?;

    let client = server.connect().await?;
    let found = rows(&client, "SELECT k, v FROM kv").await?;
    let expected = vec![vec![Some("1".to_owned()), Some("10".to_owned())]];
    ensure!(
        found == expected,
        "after restart: expected {expected:?}, found {found:?}"
    );
    Ok(())
}
