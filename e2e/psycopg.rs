//! Python clients: psycopg 3 runs `e2e/psycopg_client.py` against a fresh server; asyncpg runs
//! `e2e/asyncpg_client.py` against a fresh server and the private Postgres, and compares.

use anyhow::{Context, ensure};

use crate::harness::Sluice;

#[tokio::test]
async fn psycopg_client_works() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/psycopg_client.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(server.conn_string())
        .output()
        .await
        .context("running python3 (psycopg 3 is required: pip install 'psycopg[binary]')")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.success() && stdout.contains("psycopg: ok"),
        "psycopg client failed\nstdout: {stdout}\nstderr: {stderr}\n{}",
        server.log_tail()
    );
    Ok(())
}

#[tokio::test]
async fn asyncpg_client_gets_what_postgres_gives() -> anyhow::Result<()> {
    let upstream = crate::upstream::Upstream::start().await?;
    let server = Sluice::start().await?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/asyncpg_client.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(format!("127.0.0.1:{}/dev/root", server.port()))
        .arg(format!("127.0.0.1:{}/postgres/postgres", upstream.port()))
        .output()
        .await
        .context("running python3 (asyncpg is required: pip install asyncpg)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.success() && stdout.contains("asyncpg: ok"),
        "asyncpg client failed\nstdout: {stdout}\nstderr: {stderr}\n{}",
        server.log_tail()
    );
    Ok(())
}
