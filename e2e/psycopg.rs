//! psycopg 3 as a client: runs `e2e/psycopg_client.py` against a fresh server.

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
