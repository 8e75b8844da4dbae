//! Crash recovery: `kill -9` the server, restart it on the same data directory, and check that
//! everything that was committed before the kill is still there.
//!
//! DML returns only after its write is committed, so a row acknowledged before the SIGKILL must
//! be visible right after the restart, without waiting for anything.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, ensure};
use tokio::sync::watch;
use tokio_postgres::{Client, Statement};

use crate::harness::{Sluice, text_rows as rows};

#[tokio::test]
async fn committed_row_survives_kill9() -> anyhow::Result<()> {
    let mut server = Sluice::start().await?;
    let outcome = kill9_keeps_committed_row(&mut server).await;
    outcome.with_context(|| server.log_tail())
}

/// Inserts a row, kills the server with SIGKILL, restarts it, and expects the row back.
async fn kill9_keeps_committed_row(server: &mut Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client.simple_query("CREATE TABLE kv (k bigint PRIMARY KEY, v int)").await?;
    client.simple_query("INSERT INTO kv VALUES (1, 10)").await?;
    drop(client);

    server.kill9().await?;
    server.restart().await?;

    let client = server.connect().await?;
    let found = rows(&client, "SELECT k, v FROM kv").await?;
    let expected = vec![vec![Some("1".to_owned()), Some("10".to_owned())]];
    ensure!(found == expected, "after restart: expected {expected:?}, found {found:?}");
    Ok(())
}

/// Rounds of "write, SIGKILL mid-stream, restart, compare" in one crash test.
const ROUNDS: u64 = 4;
/// Keys the writer works on; small, so updates and deletes hit existing rows often.
const KEYS: i64 = 40;

/// One change the writer makes, with prepared statements and parameters.
#[derive(Debug, Clone, Copy)]
enum Change {
    Insert(i64, i64),
    Update(i64, i64),
    Delete(i64),
}

impl Change {
    fn apply(self, table: &mut BTreeMap<i64, i64>) {
        match self {
            Change::Insert(k, v) | Change::Update(k, v) => {
                table.insert(k, v);
            }
            Change::Delete(k) => {
                table.remove(&k);
            }
        }
    }
}

/// What the writer knows: every acknowledged change applied, and the one in flight.
#[derive(Default)]
struct Oracle {
    acknowledged: BTreeMap<i64, i64>,
    in_flight: Option<Change>,
    acks: u64,
}

/// A small deterministic generator, so a failing seed can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_kill9_mid_stream() -> anyhow::Result<()> {
    let seed = std::env::var("CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64)
    });
    let mut server = Sluice::start().await?;
    let outcome = kill_mid_stream(&mut server, seed).await;
    outcome.with_context(|| format!("CRASH_SEED={seed}\n{}", server.log_tail()))
}

/// Runs a writer of INSERT/UPDATE/DELETE, kills the server after a random number of
/// acknowledged statements, restarts, and checks the table holds exactly the acknowledged
/// changes (plus, possibly, the one that was in flight). Repeats on the same data.
async fn kill_mid_stream(server: &mut Sluice, seed: u64) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client.simple_query("CREATE TABLE crash_kv (k bigint PRIMARY KEY, v bigint)").await?;
    let mut rng = Lcg(seed);
    let oracle = Arc::new(Mutex::new(Oracle::default()));
    for round in 0..ROUNDS {
        let client = server.connect().await?;
        let (acks_tx, mut acks_rx) = watch::channel(0u64);
        let writer = tokio::spawn(write_until_error(
            client,
            oracle.clone(),
            Lcg(rng.next(u64::MAX)),
            acks_tx,
        ));
        let kill_after = oracle.lock().unwrap().acks + 5 + rng.next(60);
        acks_rx
            .wait_for(|acks| *acks >= kill_after)
            .await
            .context("the writer stopped before the kill point")?;
        server.kill9().await?;
        writer.await?;
        server.restart().await?;

        let client = server.connect().await?;
        let found: BTreeMap<i64, i64> = client
            .query("SELECT k, v FROM crash_kv", &[])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let mut oracle = oracle.lock().unwrap();
        let mut with_in_flight = oracle.acknowledged.clone();
        if let Some(change) = oracle.in_flight.take() {
            change.apply(&mut with_in_flight);
        }
        if found == with_in_flight {
            oracle.acknowledged = with_in_flight;
        }
        ensure!(
            found == oracle.acknowledged,
            "round {round}: after restart the table is {found:?}, but the acknowledged writes give {:?}",
            oracle.acknowledged
        );
    }
    Ok(())
}

/// Writes random changes until the connection fails, keeping the oracle up to date.
async fn write_until_error(
    client: Client,
    oracle: Arc<Mutex<Oracle>>,
    mut rng: Lcg,
    acks: watch::Sender<u64>,
) {
    let Ok(statements) = prepare_writes(&client).await else {
        return;
    };
    let [insert, update, delete] = &statements;
    loop {
        let k = rng.next(KEYS as u64) as i64;
        let change = {
            let mut oracle = oracle.lock().unwrap();
            let change = match oracle.acknowledged.contains_key(&k) {
                false => Change::Insert(k, rng.next(1000) as i64),
                true if rng.next(4) == 0 => Change::Delete(k),
                true => Change::Update(k, rng.next(1000) as i64),
            };
            oracle.in_flight = Some(change);
            change
        };
        let result = match change {
            Change::Insert(k, v) => client.execute(insert, &[&k, &v]).await,
            Change::Update(k, v) => client.execute(update, &[&v, &k]).await,
            Change::Delete(k) => client.execute(delete, &[&k]).await,
        };
        if result.is_err() {
            return; // the server was killed; the change stays in flight
        }
        let mut oracle = oracle.lock().unwrap();
        change.apply(&mut oracle.acknowledged);
        oracle.in_flight = None;
        oracle.acks += 1;
        acks.send_replace(oracle.acks);
    }
}

async fn prepare_writes(client: &Client) -> Result<[Statement; 3], tokio_postgres::Error> {
    Ok([
        client.prepare("INSERT INTO crash_kv VALUES ($1, $2)").await?,
        client.prepare("UPDATE crash_kv SET v = $1 WHERE k = $2").await?,
        client.prepare("DELETE FROM crash_kv WHERE k = $1").await?,
    ])
}
