//! The binary's command line as a new user meets it: `--help` lists every flag with its
//! default, `--version` answers, a `--config` file sets flags (the command line wins), and a
//! bad config file stops the server before it starts, naming the file and the key.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, ensure};
use tokio::process::{Child, Command};

use crate::harness::{connect, free_port, retry_until, text_rows};

fn sluice() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.stdin(Stdio::null()).kill_on_drop(true);
    command
}

/// Runs the binary to its end and returns (exit code, stdout, stderr).
async fn run(args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let out = sluice().args(args).output().await.context("run sluice")?;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    Ok((out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr)))
}

#[tokio::test]
async fn help_lists_every_flag_with_its_default_and_version_answers() -> anyhow::Result<()> {
    let (code, help, _) = run(&["--help"]).await?;
    ensure!(code == 0, "--help exited with {code}");
    for expected in [
        "--listen <LISTEN>",
        "[default: 127.0.0.1:4566]",
        "--data-dir <DATA_DIR>",
        "[default: ./sluice-data]",
        "--http <HTTP>",
        "[default: 127.0.0.1:5691]",
        "--barrier-interval-ms <BARRIER_INTERVAL_MS>",
        "[default: 250]",
        "--backfill-barrier-interval-ms <BACKFILL_BARRIER_INTERVAL_MS>",
        "[default: 1000]",
        "--config <FILE>",
        "--version",
    ] {
        ensure!(help.contains(expected), "--help lacks {expected:?}:\n{help}");
    }
    let (code, version, _) = run(&["--version"]).await?;
    ensure!(code == 0, "--version exited with {code}");
    ensure!(version.trim() == format!("sluice {}", env!("CARGO_PKG_VERSION")), "{version}");
    Ok(())
}

/// Starts the binary with `args` and waits until it answers on `port`.
async fn start(args: &[&str], port: u16) -> anyhow::Result<Child> {
    let mut child = sluice().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let conn = format!("host=127.0.0.1 port={port} user=root dbname=dev");
    tokio::select! {
        status = child.wait() => anyhow::bail!("sluice {args:?} exited at start: {status:?}"),
        ready = retry_until(Duration::from_secs(30), || {
            let conn = conn.clone();
            async move { Ok(connect(&conn).await?) }
        }) => { ready?; }
    }
    Ok(child)
}

#[tokio::test]
async fn a_config_file_sets_flags_and_the_command_line_wins() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let (port, other_port) = (free_port()?, free_port()?);
    let file = dir.path().join("sluice.toml");
    std::fs::write(
        &file,
        format!(
            "# as docs/running.md shows\nlisten = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\n\
             http = \"off\"\nbarrier-interval-ms = 100\n",
            data.display()
        ),
    )?;
    let file = file.to_str().context("utf-8 path")?;

    let mut server = start(&["--config", file], port).await?;
    let client = connect(&format!("host=127.0.0.1 port={port} user=root dbname=dev")).await?;
    client.batch_execute("CREATE TABLE c (id int PRIMARY KEY, v text)").await?;
    client.batch_execute("INSERT INTO c VALUES (1, 'from the file''s data dir')").await?;
    ensure!(data.read_dir()?.next().is_some(), "nothing written in {data:?}");
    server.kill().await?;

    // Same file, another address on the command line: the data dir is the file's.
    let mut server =
        start(&["--config", file, "--listen", &format!("127.0.0.1:{other_port}")], other_port)
            .await?;
    let client = connect(&format!("host=127.0.0.1 port={other_port} user=root dbname=dev")).await?;
    let rows = text_rows(&client, "SELECT v FROM c").await?;
    ensure!(rows == [[Some("from the file's data dir".to_owned())]], "{rows:?}");
    server.kill().await?;
    Ok(())
}

#[tokio::test]
async fn a_bad_config_file_stops_the_server_naming_file_and_key() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "lissen = \"127.0.0.1:1\"\n")?;
    let (code, _, stderr) = run(&["--config", file.to_str().context("utf-8 path")?]).await?;
    ensure!(code == 2, "exit code {code}: {stderr}");
    ensure!(
        stderr.contains("bad.toml") && stderr.contains("'lissen' is not a flag of sluice"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["--config", "/nonexistent/sluice.toml"]).await?;
    ensure!(code == 2 && stderr.contains("cannot read the config file"), "{code}: {stderr}");
    Ok(())
}
