//! Real clients against a real server: tokio-postgres's extended protocol (typed parameters,
//! binary results), SQLSTATE codes on errors, many concurrent sessions, and the `psql` binary
//! (`\copy` in CSV and text format, `\d`, `\dt`, the progress notices of a foreground CREATE),
//! and, against a real Postgres, `COPY .. TO STDOUT` byte for byte and psql's meta-commands.
//!
//! Every test starts its own server. DML returns only after its write is committed, so each
//! read that follows a write expects to see it at once: nothing here retries, and a stale read
//! is a failure.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tokio::process::Command;
use tokio::task::JoinSet;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Row};

use crate::harness::{self, Sluice, text_rows};

#[tokio::test]
async fn prepared_statements_with_parameters() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = prepared_statements(&server).await;
    outcome.with_context(|| server.log_tail())
}

#[tokio::test]
async fn errors_carry_sqlstate_and_connection_survives() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = errors_and_recovery(&server).await;
    outcome.with_context(|| server.log_tail())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_connections() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = concurrent_writers(&server).await;
    outcome.with_context(|| server.log_tail())
}

#[tokio::test]
async fn psql_copy_and_describe() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = psql_session(&server).await;
    outcome.with_context(|| server.log_tail())
}

// ---------------------------------------------------------------------------------------------
// Prepared statements

/// One row of the `people` table as the test wrote it: the oracle for what reads return.
#[derive(Debug, Clone, PartialEq)]
struct Person {
    id: i64,
    name: Option<String>,
    score: f64,
    active: bool,
    small: i16,
    n: i32,
}

impl Person {
    /// Reads a row of `SELECT id, name, score, active, small, n` (binary result format).
    fn from_row(row: &Row) -> anyhow::Result<Self> {
        Ok(Person {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
            score: row.try_get(2)?,
            active: row.try_get(3)?,
            small: row.try_get(4)?,
            n: row.try_get(5)?,
        })
    }
}

/// Rows with a NULL, quotes and a `$1` inside a string, unicode, and each type's extremes.
fn people() -> Vec<Person> {
    let person = |id, name: Option<&str>, score, active, small, n| Person {
        id,
        name: name.map(str::to_owned),
        score,
        active,
        small,
        n,
    };
    vec![
        person(1, Some("ada"), 91.5, true, 7, 100),
        person(2, None, 0.1, false, -1, -5),
        person(3, Some("O'Brien paid $1"), 75.25, true, i16::MAX, i32::MIN),
        person(4, Some(""), -3.5e10, false, i16::MIN, i32::MAX),
        person(5, Some("ünïcødé ✓"), 1e-3, true, 0, 0),
        person(i64::MAX, Some("max"), 50.0, false, 1, 1),
        person(i64::MIN, Some("min"), 12.0, true, -2, -2),
    ]
}

/// The query every typed read uses, so [`Person::from_row`] can decode its rows.
const SELECT_PEOPLE: &str = "SELECT id, name, score, active, small, n FROM people";

async fn prepared_statements(server: &Sluice) -> anyhow::Result<()> {
    let mut client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE people (id bigint PRIMARY KEY, name varchar, score double precision, \
             active boolean, small smallint, n int)",
        )
        .await?;
    let mut oracle = people();
    let insert = client.prepare("INSERT INTO people VALUES ($1, $2, $3, $4, $5, $6)").await?;
    for p in &oracle {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
            [&p.id, &p.name, &p.score, &p.active, &p.small, &p.n];
        let inserted =
            client.execute(&insert, &params).await.with_context(|| format!("insert {p:?}"))?;
        ensure!(inserted == 1, "inserting {p:?} reported {inserted} rows");
    }
    check_lookups(&client, &oracle).await?;
    check_score_filter(&client, &oracle).await?;
    update_and_delete(&client, &mut oracle).await?;
    check_lookups(&client, &oracle).await?;
    let all = client.query(&format!("{SELECT_PEOPLE} ORDER BY id"), &[]).await?;
    let found = all.iter().map(Person::from_row).collect::<anyhow::Result<Vec<_>>>()?;
    oracle.sort_by_key(|p| p.id);
    ensure!(found == oracle, "final table:\nexpected {oracle:#?}\nfound {found:#?}");
    // A portal read a few rows per Execute (JDBC's fetch size) suspends and resumes where it
    // stopped.
    let transaction = client.transaction().await?;
    let statement = transaction.prepare(&format!("{SELECT_PEOPLE} ORDER BY id")).await?;
    let portal = transaction.bind(&statement, &[]).await?;
    let mut paged = Vec::new();
    loop {
        let rows = transaction.query_portal(&portal, 2).await?;
        ensure!(rows.len() <= 2, "an Execute for 2 rows returned {}", rows.len());
        if rows.is_empty() {
            break;
        }
        paged.extend(rows.iter().map(Person::from_row).collect::<anyhow::Result<Vec<_>>>()?);
    }
    ensure!(paged == oracle, "paged read:\nexpected {oracle:#?}\nfound {paged:#?}");
    transaction.commit().await?;
    Ok(())
}

/// Looks up every row by key with one prepared statement, reused, and a key that is absent.
async fn check_lookups(client: &Client, oracle: &[Person]) -> anyhow::Result<()> {
    let by_id = client.prepare(&format!("{SELECT_PEOPLE} WHERE id = $1")).await?;
    for p in oracle {
        let row = client
            .query_one(&by_id, &[&p.id])
            .await
            .with_context(|| format!("look up id {}", p.id))?;
        let found = Person::from_row(&row)?;
        ensure!(found == *p, "id {}: expected {p:?}, found {found:?}", p.id);
    }
    let absent = client.query_opt(&by_id, &[&424242_i64]).await?;
    ensure!(absent.is_none(), "absent id 424242 returned {absent:?}");
    Ok(())
}

/// Reuses `WHERE score > $1` with several thresholds and compares the ids with the oracle.
async fn check_score_filter(client: &Client, oracle: &[Person]) -> anyhow::Result<()> {
    let above = client.prepare("SELECT id FROM people WHERE score > $1 ORDER BY id").await?;
    for threshold in [-1e12, 0.0, 0.1, 50.0, 1e12] {
        let found = client
            .query(&above, &[&threshold])
            .await?
            .iter()
            .map(|row| row.try_get::<_, i64>(0))
            .collect::<Result<Vec<_>, _>>()?;
        let mut expected: Vec<i64> =
            oracle.iter().filter(|p| p.score > threshold).map(|p| p.id).collect();
        expected.sort_unstable();
        ensure!(
            found == expected,
            "score > {threshold}: expected ids {expected:?}, found {found:?}"
        );
    }
    Ok(())
}

/// UPDATE and DELETE with parameters, applying the same changes to the oracle.
async fn update_and_delete(client: &Client, oracle: &mut Vec<Person>) -> anyhow::Result<()> {
    let rename = client.prepare("UPDATE people SET name = $1 WHERE id = $2").await?;
    let renames = [(2, Some("was null")), (1, None), (i64::MIN, Some("it's new"))];
    for (id, name) in renames {
        let name = name.map(str::to_owned);
        let updated = client.execute(&rename, &[&name, &id]).await?;
        ensure!(updated == 1, "renaming id {id} reported {updated} rows");
        let person = oracle.iter_mut().find(|p| p.id == id).expect("oracle id");
        person.name = name;
    }
    let missing = client.execute(&rename, &[&"nobody", &424242_i64]).await?;
    ensure!(missing == 0, "renaming an absent id reported {missing} rows");

    let delete = client.prepare("DELETE FROM people WHERE id = $1").await?;
    let deleted = client.execute(&delete, &[&3_i64]).await?;
    ensure!(deleted == 1, "deleting id 3 reported {deleted} rows");
    oracle.retain(|p| p.id != 3);
    let again = client.execute(&delete, &[&3_i64]).await?;
    ensure!(again == 0, "deleting id 3 twice reported {again} rows");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Errors

/// Expects `result` to be a server error with SQLSTATE `code`.
fn expect_code<T>(
    result: Result<T, tokio_postgres::Error>,
    code: &SqlState,
    what: &str,
) -> anyhow::Result<()> {
    match result {
        Ok(_) => bail!("{what}: expected SQLSTATE {}, but it succeeded", code.code()),
        Err(e) if e.code() == Some(code) => Ok(()),
        Err(e) => bail!(
            "{what}: expected SQLSTATE {}, got {:?}: {e:?}",
            code.code(),
            e.code().map(SqlState::code)
        ),
    }
}

/// The rows of `accounts`, as text, in key order.
async fn accounts(client: &Client) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    text_rows(client, "SELECT id, owner FROM accounts ORDER BY id").await
}

async fn errors_and_recovery(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client.batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, owner varchar)").await?;
    client.execute("INSERT INTO accounts VALUES ($1, $2)", &[&1_i64, &"ann"]).await?;
    client.batch_execute("INSERT INTO accounts VALUES (2, 'bob')").await?;
    let before = accounts(&client).await?;

    let insert = client.prepare("INSERT INTO accounts VALUES ($1, $2)").await?;
    extended_errors(&client, &insert).await?;
    simple_errors(&client).await?;

    let after = accounts(&client).await?;
    ensure!(
        after == before,
        "failed statements changed the table: before {before:?}, after {after:?}"
    );
    let other = server.connect().await?;
    let seen = accounts(&other).await?;
    ensure!(seen == before, "another session sees {seen:?}, expected {before:?}");

    // The session, and a statement prepared before the errors, still work.
    let inserted = client.execute(&insert, &[&3_i64, &"cat"]).await?;
    ensure!(inserted == 1, "insert after errors reported {inserted} rows");
    let count: i64 = client.query_one("SELECT count(*) FROM accounts", &[]).await?.try_get(0)?;
    ensure!(count == 3, "count after errors: expected 3, found {count}");

    // Postgres fails DML on an unknown table at Parse, before announcing parameter types.
    let unknown = client.prepare("INSERT INTO no_such_table VALUES ($1)").await;
    expect_code(unknown, &SqlState::UNDEFINED_TABLE, "prepare insert into unknown table")
}

/// Errors of the extended protocol, at parse time and at execution time.
async fn extended_errors(
    client: &Client,
    insert: &tokio_postgres::Statement,
) -> anyhow::Result<()> {
    let duplicate = client.execute(insert, &[&1_i64, &"dup"]).await;
    expect_code(duplicate, &SqlState::UNIQUE_VIOLATION, "extended duplicate key")?;
    let unknown = client.prepare("SELECT * FROM no_such_table").await;
    expect_code(unknown, &SqlState::UNDEFINED_TABLE, "extended unknown table")?;
    let syntax = client.query("SELEC 1", &[]).await;
    expect_code(syntax, &SqlState::SYNTAX_ERROR, "extended syntax error")?;
    let owner: Option<String> = client
        .query_one("SELECT owner FROM accounts WHERE id = $1", &[&2_i64])
        .await?
        .try_get(0)?;
    ensure!(owner.as_deref() == Some("bob"), "owner of id 2 after extended errors: {owner:?}");
    Ok(())
}

/// Errors of the simple protocol; each failing statement must write none of its rows.
async fn simple_errors(client: &Client) -> anyhow::Result<()> {
    let failing = [
        ("INSERT INTO accounts VALUES (2, 'dup')", SqlState::UNIQUE_VIOLATION),
        // The first row is new, the second is not: the statement writes neither.
        ("INSERT INTO accounts VALUES (7, 'new'), (1, 'dup')", SqlState::UNIQUE_VIOLATION),
        // Two rows with the same new key in one statement.
        ("INSERT INTO accounts VALUES (8, 'a'), (8, 'b')", SqlState::UNIQUE_VIOLATION),
        ("UPDATE accounts SET id = 1 WHERE id = 2", SqlState::UNIQUE_VIOLATION),
        ("SELECT * FROM no_such_table", SqlState::UNDEFINED_TABLE),
        ("DELETE FROM no_such_table", SqlState::UNDEFINED_TABLE),
        ("SELEC 1", SqlState::SYNTAX_ERROR),
        ("INSERT INTO accounts VALUES (9, 'x'", SqlState::SYNTAX_ERROR),
    ];
    for (sql, code) in failing {
        expect_code(client.simple_query(sql).await, &code, sql)?;
        let one = text_rows(client, "SELECT 1").await?;
        ensure!(one == [[Some("1".to_owned())]], "SELECT 1 after {sql:?} returned {one:?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Concurrent sessions

/// How many sessions write at the same time.
const WRITERS: i64 = 16;
/// How many rows each session inserts.
const ROWS_PER_WRITER: i64 = 20;

async fn concurrent_writers(server: &Sluice) -> anyhow::Result<()> {
    let setup = server.connect().await?;
    setup.batch_execute("CREATE TABLE events (id bigint PRIMARY KEY, writer int, seq int)").await?;
    let mut tasks = JoinSet::new();
    for writer in 0..WRITERS {
        let conn = server.conn_string();
        tasks.spawn(async move {
            write_events(&conn, writer).await.with_context(|| format!("writer {writer}"))
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("writer task panicked")??;
    }

    let count: i64 = setup.query_one("SELECT count(*) FROM events", &[]).await?.try_get(0)?;
    ensure!(
        count == WRITERS * ROWS_PER_WRITER,
        "count(*) = {count}, expected {}",
        WRITERS * ROWS_PER_WRITER
    );
    let found: BTreeSet<(i64, i32, i32)> = setup
        .query("SELECT id, writer, seq FROM events", &[])
        .await?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<anyhow::Result<_>>()?;
    let expected: BTreeSet<(i64, i32, i32)> =
        (0..WRITERS).flat_map(|w| (0..ROWS_PER_WRITER).map(move |s| event(w, s))).collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    ensure!(
        missing.is_empty() && extra.is_empty(),
        "rows missing: {missing:?}; unexpected rows: {extra:?}"
    );
    Ok(())
}

/// The row `(id, writer, seq)` that `writer` inserts as its `seq`th; ids are disjoint.
fn event(writer: i64, seq: i64) -> (i64, i32, i32) {
    let narrow = |v: i64| i32::try_from(v).expect("small test numbers");
    (writer * ROWS_PER_WRITER + seq, narrow(writer), narrow(seq))
}

/// One session's inserts. Odd writers use the simple protocol; even writers use a prepared
/// statement and, after every insert, count their own rows (which must all be visible at once)
/// and the whole table (which can only grow while everyone writes).
async fn write_events(conn: &str, writer: i64) -> anyhow::Result<()> {
    let client = harness::connect(conn).await?;
    let insert = client.prepare("INSERT INTO events VALUES ($1, $2, $3)").await?;
    let mut last_total = 0;
    for seq in 0..ROWS_PER_WRITER {
        let (id, w, s) = event(writer, seq);
        if writer % 2 == 1 {
            let sql = format!("INSERT INTO events VALUES ({id}, {w}, {s})");
            client.simple_query(&sql).await?;
            continue;
        }
        let inserted = client.execute(&insert, &[&id, &w, &s]).await?;
        ensure!(inserted == 1, "insert of id {id} reported {inserted} rows");
        let mine: i64 = client
            .query_one("SELECT count(*) FROM events WHERE writer = $1", &[&w])
            .await?
            .try_get(0)?;
        ensure!(mine == seq + 1, "after {} inserts I see {mine} of mine", seq + 1);
        let total: i64 = client.query_one("SELECT count(*) FROM events", &[]).await?.try_get(0)?;
        ensure!(
            (last_total.max(seq + 1)..=WRITERS * ROWS_PER_WRITER).contains(&total),
            "count(*) = {total} after {} own inserts, previously {last_total}",
            seq + 1
        );
        last_total = total;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// psql

/// How many rows the CSV file holds.
const ORDERS: i64 = 10_000;
/// How long one `psql` invocation may take.
const PSQL_TIMEOUT: Duration = Duration::from_secs(60);
/// `2024-01-02 03:04:05+00`, the `created` of order 0.
const FIRST_CREATED: i64 = 1_704_164_645;

/// One order of the CSV file; every field is kept as the text Postgres prints (with
/// `TimeZone` UTC, which is what Sluice sessions use).
struct Order {
    id: i64,
    customer: i64,
    /// The amount in cents; printed with two decimals.
    cents: i64,
    note: Option<String>,
    created: String,
}

/// Order `i`: notes with commas, quotes, a line break and NULLs; amounts of both signs.
fn order(i: i64) -> Order {
    // TODO: add quoted empty strings (`""`) once COPY CSV stops reading them as NULL.
    let note = match i {
        4243 => Some("two\nlines, \"quoted\"".to_owned()),
        _ if i % 13 == 0 => None,
        _ if i % 5 == 0 => Some(format!("note {i}, with a comma")),
        _ if i % 7 == 0 => Some(format!("say \"hi\" to {i}")),
        _ => Some(format!("plain {i}")),
    };
    let created = chrono::DateTime::from_timestamp(FIRST_CREATED + i * 3607, 0)
        .expect("timestamps in 2024")
        .format("%Y-%m-%d %H:%M:%S+00")
        .to_string();
    Order { id: i, customer: i % 97, cents: (i * 7919) % 100_000 - 20_000, note, created }
}

/// `cents` as a numeric with two decimals: `-0.05`, `12.30`.
fn decimal(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

/// A CSV field: NULL is an unquoted empty field; an empty string, and text with a comma,
/// quote or line break, are quoted with inner quotes doubled.
fn csv_field(value: Option<&str>) -> String {
    match value {
        None => String::new(),
        Some(s) if s.is_empty() || s.contains([',', '"', '\n', '\r']) => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        Some(s) => s.to_owned(),
    }
}

impl Order {
    fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{}\n",
            self.id,
            self.customer,
            decimal(self.cents),
            csv_field(self.note.as_deref()),
            self.created
        )
    }

    /// The row as `SELECT id, customer, amount, note, created` prints it.
    fn text_row(&self) -> Vec<Option<String>> {
        vec![
            Some(self.id.to_string()),
            Some(self.customer.to_string()),
            Some(decimal(self.cents)),
            self.note.clone(),
            Some(self.created.clone()),
        ]
    }
}

/// Runs `psql -c command` against the server and returns its stdout; fails on a non-zero exit.
async fn psql(server: &Sluice, command: &str) -> anyhow::Result<String> {
    Ok(psql_output(server, command).await?.0)
}

/// Runs `psql -c command` against the server and returns its stdout and stderr (where psql
/// prints notices); fails on a non-zero exit.
async fn psql_output(server: &Sluice, command: &str) -> anyhow::Result<(String, String)> {
    psql_with(server, &[], command).await
}

/// [`psql_output`] with more psql options (`-v FETCH_COUNT=100`, `-At`, ..).
async fn psql_with(
    server: &Sluice,
    options: &[&str],
    command: &str,
) -> anyhow::Result<(String, String)> {
    psql_at(server.port(), "root", "dev", options, command).await
}

/// Runs `psql -c command` as `user` against database `db` of the server on `port` (Sluice or
/// the private Postgres); returns stdout and stderr, failing on a non-zero exit.
async fn psql_at(
    port: u16,
    user: &str,
    db: &str,
    options: &[&str],
    command: &str,
) -> anyhow::Result<(String, String)> {
    let port = port.to_string();
    let run = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", user, "-d", db])
        .args(options)
        .args(["-v", "ON_ERROR_STOP=1", "-c", command])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(PSQL_TIMEOUT, run).await {
        Err(_) => bail!("psql -c {command:?} did not finish within {PSQL_TIMEOUT:?}"),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("this test needs the `psql` binary on PATH (apt-get install postgresql-client)")
        }
        Ok(result) => result.context("run psql")?,
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    ensure!(
        output.status.success(),
        "psql -c {command:?} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    Ok((stdout, stderr))
}

#[tokio::test]
async fn psql_shows_the_progress_of_a_foreground_create() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE big (id int PRIMARY KEY, v int);
             INSERT INTO big SELECT i, i FROM generate_series(1, 6000) AS s(i)",
        )
        .await?;
    // 6000 rows at 2000 rows/s take about 3 s: several notices half a second apart.
    let slow = "SET streaming_parallelism = 1; SET backfill_rate_limit = 2000; \
                SET progress_notice_interval = 0.5;";
    let (_, stderr) =
        psql_output(&server, &format!("{slow} CREATE MATERIALIZED VIEW a AS SELECT v FROM big"))
            .await?;
    let notices: Vec<&str> =
        stderr.lines().filter(|l| l.starts_with("NOTICE:  backfill of a: ")).collect();
    ensure!(notices.len() >= 2, "expected progress notices, psql printed:\n{stderr}");
    let percent = |line: &str| -> anyhow::Result<f64> {
        let text = line.split(": ").nth(2).and_then(|t| t.split('%').next());
        Ok(text.context("no percentage")?.parse()?)
    };
    let (first, last) = (percent(notices[0])?, percent(notices[notices.len() - 1])?);
    ensure!(first < last && last < 100.0, "progress did not move: {notices:?}");
    ensure!(notices.iter().all(|l| l.contains("rows/s")), "{notices:?}");
    let rows = text_rows(&client, "SELECT count(*) FROM a").await?;
    ensure!(rows == [[Some("6000".to_owned())]], "the view holds {rows:?}");
    // client_min_messages above NOTICE silences them, as in Postgres.
    let quiet = format!(
        "{slow} SET client_min_messages = warning; \
                         CREATE MATERIALIZED VIEW b AS SELECT v FROM big"
    );
    let (_, stderr) = psql_output(&server, &quiet).await?;
    ensure!(!stderr.contains("NOTICE"), "client_min_messages = warning, yet:\n{stderr}");
    Ok(())
}

async fn psql_session(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE orders (id bigint PRIMARY KEY, customer int, amount numeric(10,2), \
             note varchar, created timestamptz)",
        )
        .await?;
    let dir = tempfile::Builder::new().prefix("sluice-copy-").tempdir()?;
    copy_csv(server, &client, dir.path()).await?;
    copy_text(server, &client, dir.path()).await?;
    describe(server).await
}

/// `\copy orders FROM 'orders.csv' CSV` of [`ORDERS`] rows, checked row by row.
async fn copy_csv(server: &Sluice, client: &Client, dir: &Path) -> anyhow::Result<()> {
    let orders: Vec<Order> = (0..ORDERS).map(order).collect();
    let csv: String = orders.iter().map(Order::csv_line).collect();
    let path = dir.join("orders.csv");
    std::fs::write(&path, csv)?;
    let out = psql(server, &format!("\\copy orders FROM '{}' CSV", path.display())).await?;
    ensure!(out.contains(&format!("COPY {ORDERS}")), "psql printed {out:?}");

    let total = decimal(orders.iter().map(|o| o.cents).sum());
    let found = text_rows(client, "SELECT count(*), sum(amount) FROM orders").await?;
    let expected = [[Some(ORDERS.to_string()), Some(total.clone())]];
    ensure!(found == expected, "count, sum: expected {expected:?}, found {found:?}");
    let cast = text_rows(client, "SELECT CAST(sum(amount) AS varchar) FROM orders").await?;
    ensure!(cast == [[Some(total.clone())]], "sum as varchar: {cast:?}, expected {total}");

    let comma: Option<String> =
        client.query_one("SELECT note FROM orders WHERE id = $1", &[&5_i64]).await?.try_get(0)?;
    ensure!(comma.as_deref() == Some("note 5, with a comma"), "note of order 5: {comma:?}");
    let found =
        text_rows(client, "SELECT id, customer, amount, note, created FROM orders ORDER BY id")
            .await?;
    let expected: Vec<_> = orders.iter().map(Order::text_row).collect();
    if let Some(i) = (0..expected.len().max(found.len())).find(|&i| found.get(i) != expected.get(i))
    {
        bail!(
            "table differs from the CSV at row {i} ({} rows found): expected {:?}, found {:?}",
            found.len(),
            expected.get(i),
            found.get(i)
        );
    }
    Ok(())
}

/// `\copy orders FROM 'extra.tsv'` in text format: tab separated, `\N` for NULL, backslash
/// escapes.
async fn copy_text(server: &Sluice, client: &Client, dir: &Path) -> anyhow::Result<()> {
    let lines = [
        "20001\t1\t1.50\t\\N\t2024-02-01 00:00:00+00",
        "20002\t\\N\t-2.25\ttab\\there\t2024-02-01 00:00:01+00",
        "20003\t3\t\\N\tback\\\\slash\t\\N",
        "20004\t\\N\t\\N\t\\N\t\\N",
    ];
    let mut tsv = String::new();
    for line in lines {
        writeln!(tsv, "{line}")?;
    }
    let path = dir.join("extra.tsv");
    std::fs::write(&path, tsv)?;
    let out = psql(server, &format!("\\copy orders FROM '{}'", path.display())).await?;
    ensure!(out.contains("COPY 4"), "psql printed {out:?}");

    let found = text_rows(
        client,
        "SELECT id, customer, amount, note, created FROM orders WHERE id > 20000 ORDER BY id",
    )
    .await?;
    let text = |s: &str| Some(s.to_owned());
    let expected = vec![
        vec![text("20001"), text("1"), text("1.50"), None, text("2024-02-01 00:00:00+00")],
        vec![text("20002"), None, text("-2.25"), text("tab\there"), text("2024-02-01 00:00:01+00")],
        vec![text("20003"), text("3"), None, text("back\\slash"), None],
        vec![text("20004"), None, None, None, None],
    ];
    ensure!(found == expected, "text COPY:\nexpected {expected:?}\nfound {found:?}");
    let nulls =
        text_rows(client, "SELECT count(*) FROM orders WHERE id > 20000 AND note IS NULL").await?;
    ensure!(nulls == [[text("2")]], "NULL notes from text COPY: {nulls:?}");
    Ok(())
}

/// `\d orders` lists every column with its type; `\dt` lists the table.
async fn describe(server: &Sluice) -> anyhow::Result<()> {
    let out = psql(server, "\\d orders").await?;
    // Rows of the column table look like ` id | bigint | | not null |`.
    let types: HashMap<&str, &str> = out
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim);
            Some((cells.next()?, cells.next()?))
        })
        .collect();
    // TODO: expect `numeric(10,2)` and `character varying` once \d shows declared types.
    let expected = [
        ("id", Some("bigint")),
        ("customer", Some("integer")),
        ("amount", Some("numeric")),
        ("note", None),
        ("created", Some("timestamp with time zone")),
    ];
    for (column, ty) in expected {
        let found = types.get(column).copied();
        ensure!(
            found.is_some_and(|f| f.starts_with(ty.unwrap_or_default())),
            "\\d orders: column {column:?} has type {found:?}, expected {ty:?}..:\n{out}"
        );
    }
    let out = psql(server, "\\dt").await?;
    ensure!(out.contains("orders"), "\\dt does not list orders:\n{out}");
    Ok(())
}

#[tokio::test]
async fn repeated_output_names_are_allowed_and_shown_as_written() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE named (id int PRIMARY KEY, v int); INSERT INTO named VALUES (1, 7)",
        )
        .await?;
    for (sql, names, values) in [
        ("SELECT 1, 1", vec!["?column?", "?column?"], vec!["1", "1"]),
        ("SELECT v, v::text FROM named", vec!["v", "v"], vec!["7", "7"]),
        ("SELECT v, v, id AS v FROM named", vec!["v", "v", "v"], vec!["7", "7", "1"]),
        ("SELECT sum(v), sum(id) FROM named", vec!["sum", "sum"], vec!["7", "1"]),
    ] {
        // Extended protocol: the described names.
        let statement = client.prepare(sql).await?;
        let described: Vec<&str> = statement.columns().iter().map(|c| c.name()).collect();
        ensure!(described == names, "{sql}: columns {described:?}");
        // Simple protocol: the row description and the values.
        let messages = client.simple_query(sql).await?;
        let row = messages
            .iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
                _ => None,
            })
            .context("no row")?;
        let shown: Vec<&str> = row.columns().iter().map(|c| c.name()).collect();
        ensure!(shown == names, "{sql}: columns {shown:?}");
        let got: Vec<Option<&str>> = (0..row.len()).map(|i| row.get(i)).collect();
        ensure!(got == values.iter().map(|v| Some(*v)).collect::<Vec<_>>(), "{sql}: {got:?}");
    }
    Ok(())
}

/// A `numeric` parameter sent in Postgres's binary form, as asyncpg sends it.
#[derive(Debug)]
struct BinaryNumeric(Vec<u8>);

impl BinaryNumeric {
    /// Header words (`ndigits`, `weight`, `sign`, `dscale`), then base-10000 digits.
    fn new(weight: i16, dscale: u16, digits: &[u16]) -> Self {
        let mut out = Vec::new();
        for w in [digits.len() as u16, weight as u16, 0, dscale].iter().chain(digits) {
            out.extend_from_slice(&w.to_be_bytes());
        }
        Self(out)
    }
}

impl tokio_postgres::types::ToSql for BinaryNumeric {
    fn to_sql(
        &self,
        _ty: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(tokio_postgres::types::IsNull::No)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::NUMERIC
    }

    tokio_postgres::types::to_sql_checked!();
}

#[tokio::test]
async fn binary_numeric_parameters_keep_every_digit() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE money (id int PRIMARY KEY, v numeric(24,4), small numeric(6,2))",
        )
        .await?;
    // 99999999999999999999.99: 22 digits, rescaled to 4 decimals: 24, past a 28-digit
    // decimal's room at that scale.
    let big = BinaryNumeric::new(4, 2, &[9999, 9999, 9999, 9999, 9999, 9900]);
    let small = BinaryNumeric::new(0, 2, &[12, 5000]);
    client.execute("INSERT INTO money VALUES (1, $1, $2)", &[&big, &small]).await?;
    let rows = text_rows(&client, "SELECT v, small FROM money").await?;
    let expected = [Some("99999999999999999999.9900".to_owned()), Some("12.50".to_owned())];
    ensure!(rows == [expected], "stored {rows:?}");
    // In a WHERE clause too; and one too large for its column is refused, not cut.
    let found = client.query("SELECT id FROM money WHERE v = $1", &[&big]).await?;
    ensure!(found.len() == 1, "WHERE v = $1 found {} rows", found.len());
    let too_big = BinaryNumeric::new(2, 0, &[1, 0, 0]);
    let refused = client.execute("UPDATE money SET small = $1 WHERE id = 1", &[&too_big]).await;
    let code = refused.as_ref().err().and_then(|e| e.code()).map(|c| c.code().to_owned());
    ensure!(code.as_deref() == Some("22003"), "100000000 into numeric(6,2): {refused:?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// COPY .. TO STDOUT, against Postgres as the oracle

#[tokio::test]
async fn copy_to_stdout_writes_what_postgres_writes() -> anyhow::Result<()> {
    let upstream = crate::upstream::Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = copy_out(&upstream, &server).await;
    outcome.with_context(|| server.log_tail())
}

/// Sends `data` to `COPY .. FROM STDIN` statement `sql`; returns the rows copied.
async fn copy_in(client: &Client, sql: &str, data: &[u8]) -> anyhow::Result<u64> {
    use futures::SinkExt;
    let sink = client.copy_in(sql).await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::copy_from_slice(data)).await?;
    Ok(sink.finish().await?)
}

/// The bytes `COPY .. TO STDOUT` sends for `sql`.
async fn copied(client: &Client, sql: &str) -> anyhow::Result<Vec<u8>> {
    use futures::TryStreamExt;
    let stream = client.copy_out(sql).await.with_context(|| sql.to_owned())?;
    let parts: Vec<bytes::Bytes> = stream.try_collect().await.with_context(|| sql.to_owned())?;
    Ok(parts.concat())
}

async fn copy_out(upstream: &crate::upstream::Upstream, server: &Sluice) -> anyhow::Result<()> {
    let pg = upstream.connect("postgres").await?;
    let client = server.connect().await?;
    // One row per INSERT: each value is cast to its column's type on its own.
    let setup = "CREATE TABLE ct (id int PRIMARY KEY, b boolean, big bigint, f float8, r real, \
                 n numeric(10,2), t text, d date, ts timestamp);
                 INSERT INTO ct VALUES (1, true, 9223372036854775807, 1.5, 123.45, 12.30, \
                  'plain', '2024-02-29', '2024-02-29 12:34:56.5');
                 INSERT INTO ct VALUES (2, false, -1, -0.1, 1e-7, -0.05, \
                  E'tab\\there, \"quoted\"; back\\\\slash', '1999-12-31', '2000-01-01 00:00:00');
                 INSERT INTO ct VALUES (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
                 INSERT INTO ct VALUES (4, true, 0, '1e300', '3.4e38', 99999999.99, \
                  E'line\\nbreak and ünïcode', '0001-01-01', '1970-01-01 00:00:00.000001');
                 INSERT INTO ct VALUES (5, false, 42, 2.5, -1.25, 0, '', '2100-06-15', \
                  '2100-06-15 23:59:59');";
    pg.batch_execute(setup).await?;
    client.batch_execute(setup).await?;

    // The same bytes as Postgres, in every text form.
    let ordered = "(SELECT * FROM ct ORDER BY id)";
    for options in [
        "",
        "(FORMAT text)",
        "(FORMAT csv)",
        "(FORMAT csv, HEADER)",
        "WITH (FORMAT csv, DELIMITER ';', NULL 'null', QUOTE '''')",
        "(FORMAT text, DELIMITER '|', NULL '-')",
        "CSV HEADER",
    ] {
        let sql = format!("COPY {ordered} TO STDOUT {options}");
        let (ours, theirs) = (copied(&client, &sql).await?, copied(&pg, &sql).await?);
        ensure!(
            ours == theirs,
            "{sql}\nSluice:\n{}\nPostgres:\n{}",
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
    }
    // Binary, for the types whose binary form has one spelling; and no rows at all.
    for sql in [
        "COPY (SELECT * FROM ct WHERE id < 0) TO STDOUT (FORMAT csv, HEADER)",
        "COPY (SELECT id, b, big, f, r, t, d, ts FROM ct ORDER BY id) TO STDOUT (FORMAT binary)",
        "COPY (SELECT id FROM ct WHERE id < 0) TO STDOUT (FORMAT binary)",
    ] {
        let (ours, theirs) = (copied(&client, sql).await?, copied(&pg, sql).await?);
        ensure!(ours == theirs, "{sql}\nSluice:   {ours:?}\nPostgres: {theirs:?}");
    }
    // A table and a column list, in any row order.
    for sql in ["COPY ct TO STDOUT", "COPY ct (t, id) TO STDOUT (FORMAT csv)"] {
        let lines = |bytes: Vec<u8>| {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            text.lines().map(str::to_owned).collect::<BTreeSet<_>>()
        };
        let (ours, theirs) = (lines(copied(&client, sql).await?), lines(copied(&pg, sql).await?));
        ensure!(ours == theirs, "{sql}\nSluice:   {ours:?}\nPostgres: {theirs:?}");
    }

    // psql's \copy to a file, and the row count it reports.
    let dir = tempfile::Builder::new().prefix("sluice-copy-out-").tempdir()?;
    let path = dir.path().join("ct.csv");
    let out = psql(server, &format!("\\copy ct TO '{}' CSV HEADER", path.display())).await?;
    ensure!(out.contains("COPY 5"), "psql printed {out:?}");
    let written = std::fs::read_to_string(&path)?;
    ensure!(written.starts_with("id,b,big,f,r,n,t,d,ts\n"), "header of {written:?}");
    ensure!(written.lines().count() == 7, "5 rows, one with a line break: {written:?}");

    // Bad input is refused with the code Postgres gives, and the session goes on.
    let code = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_owned());
    let missing = client.copy_out("COPY nosuch TO STDOUT").await.err().and_then(code);
    ensure!(missing.as_deref() == Some("42P01"), "COPY of a missing table: {missing:?}");
    let garbage = copy_in(&client, "COPY ct FROM STDIN (FORMAT binary)", b"not PGCOPY").await;
    let garbage = garbage.err().and_then(|e| e.downcast::<tokio_postgres::Error>().ok());
    let garbage = garbage.and_then(code);
    ensure!(garbage.as_deref() == Some("22P04"), "binary COPY FROM of garbage: {garbage:?}");

    // What binary COPY TO writes, binary COPY FROM reads back: Postgres's bytes into Sluice,
    // Sluice's into Postgres.
    let create = "CREATE TABLE ct2 (id int PRIMARY KEY, b boolean, big bigint, f float8, \
                  r real, n numeric(10,2), t text, d date, ts timestamp)";
    pg.batch_execute(create).await?;
    client.batch_execute(create).await?;
    let out = "COPY (SELECT * FROM ct ORDER BY id) TO STDOUT (FORMAT binary)";
    let into = "COPY ct2 FROM STDIN (FORMAT binary)";
    copy_in(&client, into, &copied(&pg, out).await?).await?;
    copy_in(&pg, into, &copied(&client, out).await?).await?;
    let all = "SELECT * FROM ct2 ORDER BY id";
    let (ours, theirs) = (text_rows(&client, all).await?, text_rows(&pg, all).await?);
    let original = text_rows(&pg, "SELECT * FROM ct ORDER BY id").await?;
    ensure!(ours == original, "binary COPY FROM in Sluice: {ours:?}, expected {original:?}");
    ensure!(theirs == original, "Sluice's binary COPY into Postgres: {theirs:?}");
    let header = client.copy_out("COPY ct TO STDOUT (FORMAT binary, HEADER)").await;
    ensure!(header.is_err(), "HEADER with binary was accepted");
    let count = text_rows(&client, "SELECT count(*) FROM ct").await?;
    ensure!(count == [[Some("5".to_owned())]], "{count:?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Server-side cursors

#[tokio::test]
async fn cursors_fetch_forward_in_pieces() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let outcome = cursors(&server).await;
    outcome.with_context(|| server.log_tail())
}

async fn cursors(server: &Sluice) -> anyhow::Result<()> {
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE cur (id int PRIMARY KEY, v text);
             INSERT INTO cur SELECT i, 'v' || i FROM generate_series(1, 2500) AS s(i);",
        )
        .await?;
    client.batch_execute("BEGIN; DECLARE c CURSOR FOR SELECT id, v FROM cur ORDER BY id").await?;
    let ids = |rows: &[Row]| rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>();
    // Through the extended protocol (FETCH is described from the open cursor).
    let rows = client.query("FETCH 3 FROM c", &[]).await?;
    ensure!(ids(&rows) == [1, 2, 3], "FETCH 3: {:?}", ids(&rows));
    ensure!(rows[0].get::<_, String>(1) == "v1", "the text column");
    let rows = client.query("FETCH NEXT FROM c", &[]).await?;
    ensure!(ids(&rows) == [4], "FETCH NEXT: {:?}", ids(&rows));
    // Across the query's batches, and through the simple protocol.
    let rows = text_rows(&client, "FETCH FORWARD 2000 FROM c").await?;
    ensure!(rows.len() == 2000, "FETCH FORWARD 2000 gave {} rows", rows.len());
    ensure!(rows[0][0].as_deref() == Some("5") && rows[1999][0].as_deref() == Some("2004"));
    let rows = client.query("FETCH ALL IN c", &[]).await?;
    ensure!(rows.len() == 496 && ids(&rows)[495] == 2500, "FETCH ALL: {} rows", rows.len());
    let rows = client.query("FETCH 10 FROM c", &[]).await?;
    ensure!(rows.is_empty(), "past the end: {} rows", rows.len());

    // Misuse is refused with Postgres's codes, and the session goes on.
    let code = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_owned());
    let dup = client.batch_execute("DECLARE c CURSOR FOR SELECT 1").await.err().and_then(code);
    ensure!(dup.as_deref() == Some("42P03"), "a second cursor c: {dup:?}");
    let back = client.batch_execute("FETCH PRIOR FROM c").await.err().and_then(code);
    ensure!(back.as_deref() == Some("0A000"), "FETCH PRIOR: {back:?}");
    let scroll =
        client.batch_execute("DECLARE s SCROLL CURSOR FOR SELECT 1").await.err().and_then(code);
    ensure!(scroll.as_deref() == Some("0A000"), "SCROLL: {scroll:?}");
    client.batch_execute("CLOSE c").await?;
    let gone = client.batch_execute("FETCH 1 FROM c").await.err().and_then(code);
    ensure!(gone.as_deref() == Some("34000"), "FETCH after CLOSE: {gone:?}");
    let gone = client.query("FETCH 1 FROM nosuch", &[]).await.err().and_then(code);
    ensure!(gone.as_deref() == Some("34000"), "describe of FETCH from no cursor: {gone:?}");
    client.batch_execute("DECLARE a CURSOR FOR SELECT 1; DECLARE b CURSOR FOR SELECT 2").await?;
    client.batch_execute("CLOSE ALL; COMMIT").await?;
    let gone = client.batch_execute("FETCH 1 FROM a").await.err().and_then(code);
    ensure!(gone.as_deref() == Some("34000"), "FETCH after CLOSE ALL: {gone:?}");

    // psql, which reads a result through a cursor when FETCH_COUNT is set.
    let options = ["-At", "-v", "FETCH_COUNT=100"];
    let (stdout, _) = psql_with(server, &options, "SELECT id FROM cur ORDER BY id").await?;
    let printed: Vec<&str> = stdout.lines().collect();
    ensure!(
        printed.len() == 2500 && printed[0] == "1" && printed[2499] == "2500",
        "psql with FETCH_COUNT printed {} lines",
        printed.len()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The login role

#[tokio::test]
async fn current_user_is_the_login_role() -> anyhow::Result<()> {
    let server = Sluice::start().await?;
    let conn = server.conn_string().replace("user=root", "user=alice");
    let alice = harness::connect(&conn).await?;
    let rows = text_rows(
        &alice,
        "SELECT current_user, session_user, user, current_role, upper(current_user) AS shout",
    )
    .await?;
    let alice_text = Some("alice".to_owned());
    let expected = vec![vec![
        alice_text.clone(),
        alice_text.clone(),
        alice_text.clone(),
        alice_text,
        Some("ALICE".to_owned()),
    ]];
    ensure!(rows == expected, "{rows:?}");
    // Named as Postgres names them.
    let row = alice.query_one("SELECT current_user, user, current_role", &[]).await?;
    let names: Vec<&str> = row.columns().iter().map(|c| c.name()).collect();
    ensure!(names == ["current_user", "user", "current_role"], "{names:?}");
    // A jsonb column is described as jsonb, and its binary form reads as jsonb's.
    alice.batch_execute("CREATE TABLE jdocs (id int PRIMARY KEY, d jsonb); INSERT INTO jdocs VALUES (1, '{\"a\": 1}')").await?;
    let row = alice.query_one("SELECT d, id FROM jdocs", &[]).await?;
    ensure!(
        *row.columns()[0].type_() == tokio_postgres::types::Type::JSONB,
        "{:?}",
        row.columns()[0]
    );
    let raw: RawJsonb = row.try_get(0)?;
    ensure!(raw.0 == b"\x01{\"a\": 1}", "binary jsonb {:?}", raw.0);
    // Another session keeps its own.
    let root = server.connect().await?;
    let rows = text_rows(&root, "SELECT current_user").await?;
    ensure!(rows == [[Some("root".to_owned())]], "{rows:?}");
    Ok(())
}

/// The bytes of a binary-format jsonb value.
struct RawJsonb(Vec<u8>);

impl<'a> tokio_postgres::types::FromSql<'a> for RawJsonb {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawJsonb(raw.to_vec()))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::JSONB
    }
}

// ---------------------------------------------------------------------------------------------
// psql's meta-commands, against Postgres as the oracle

#[tokio::test]
async fn psql_meta_commands_describe_as_postgres_does() -> anyhow::Result<()> {
    let upstream = crate::upstream::Upstream::start().await?;
    let server = Sluice::start().await?;
    let outcome = meta_commands(&upstream, &server).await;
    outcome.with_context(|| server.log_tail())
}

/// The title and the table of a psql output, without what follows (`Indexes:`, ..).
fn first_block(out: &str) -> String {
    let table_line = |l: &&str| !l.trim().is_empty() && (l.starts_with(' ') || l.starts_with('-'));
    out.lines().take_while(table_line).collect::<Vec<_>>().join("\n")
}

async fn meta_commands(
    upstream: &crate::upstream::Upstream,
    server: &Sluice,
) -> anyhow::Result<()> {
    let setup = "CREATE TABLE m (id int PRIMARY KEY, a numeric(10,2), b varchar(20), c varchar, \
                 d text, e jsonb, f timestamptz, g bytea, h numeric, z numeric(10,0), i int DEFAULT 5, \
                 j timestamptz DEFAULT now()); \
                 CREATE MATERIALIZED VIEW mm AS SELECT id, a, b FROM m; \
                 INSERT INTO m VALUES (1, 1.5, 'twenty characters ok', 'c', 'd', '{}', now(), '\\x00', 1, 7, 2, now())";
    let pg = upstream.connect("postgres").await?;
    pg.batch_execute(setup).await.context("setup in Postgres")?;
    let client = server.connect().await?;
    client.batch_execute(setup).await.context("setup in Sluice")?;
    let sluice = |command: &'static str| psql_at(server.port(), "root", "dev", &[], command);
    let postgres =
        |command: &'static str| psql_at(upstream.port(), "postgres", "postgres", &[], command);

    // The column tables of \d, titles, types and defaults included, are Postgres's, line for
    // line.
    for command in ["\\d m", "\\d mm"] {
        let (ours, theirs) = (sluice(command).await?.0, postgres(command).await?.0);
        ensure!(
            first_block(&ours) == first_block(&theirs),
            "{command} differs from Postgres's\nSluice:\n{ours}\nPostgres:\n{theirs}"
        );
    }
    // \dm lists the view as a materialized view, \dt does not list it.
    let row = |out: &str, name: &str| {
        out.lines()
            .find(|l| l.split('|').nth(1).is_some_and(|c| c.trim() == name))
            .map(str::to_owned)
    };
    let (ours, theirs) = (sluice("\\dm").await?.0, postgres("\\dm").await?.0);
    ensure!(
        row(&ours, "mm").is_some() && row(&ours, "mm") == row(&theirs, "mm"),
        "\\dm differs from Postgres's\nSluice:\n{ours}\nPostgres:\n{theirs}"
    );
    let dt = sluice("\\dt").await?.0;
    ensure!(row(&dt, "m").is_some() && row(&dt, "mm").is_none(), "\\dt:\n{dt}");

    // The + forms, roles, functions and types run; sizes and view definitions are shown.
    let described = sluice("\\d+ mm").await?.0;
    ensure!(
        described.contains("View definition:") && described.contains("FROM m"),
        "\\d+ mm shows no view definition:\n{described}"
    );
    let listed = sluice("\\dt+ m").await?.0;
    let size = row(&listed, "m").and_then(|r| r.split('|').nth(6).map(|c| c.trim().to_owned()));
    ensure!(
        size.as_deref().is_some_and(|s| s.ends_with(" bytes") || s.ends_with(" kB")),
        "\\dt+ m shows no size: {size:?}\n{listed}"
    );
    for command in ["\\d+ m", "\\du", "\\df", "\\dT", "\\l+", "\\d+", "\\dn+"] {
        sluice(command).await?;
    }

    // varchar(n) holds values to n characters, as Postgres does.
    for (db, name) in [(&client, "Sluice"), (&pg, "Postgres")] {
        let long =
            db.execute("INSERT INTO m (id, b) VALUES (2, 'twenty-one characters')", &[]).await;
        expect_code(long, &SqlState::STRING_DATA_RIGHT_TRUNCATION, name)?;
        db.execute("INSERT INTO m (id, b) VALUES (3, 'trailing spaces      ')", &[]).await?;
    }
    let query = "SELECT id, b, length(b) FROM m ORDER BY id";
    let (ours, theirs) = (text_rows(&client, query).await?, text_rows(&pg, query).await?);
    ensure!(ours == theirs, "varchar rows differ: Sluice {ours:?}, Postgres {theirs:?}");

    // pg_size_pretty prints every unit as Postgres does.
    let query = "SELECT pg_size_pretty(x) FROM (VALUES (0::bigint), (10239), (10240), \
                 (10485247), (20971520), (1000000000), (-10240), (5000000000000), \
                 (1152921504606846976)) AS t(x)";
    let (ours, theirs) = (text_rows(&client, query).await?, text_rows(&pg, query).await?);
    ensure!(ours == theirs, "pg_size_pretty: Sluice {ours:?}, Postgres {theirs:?}");
    Ok(())
}
