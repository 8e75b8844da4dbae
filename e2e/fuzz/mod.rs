//! A random-SQL fuzzer against one real server.
//!
//! One `sluice` process receives a long stream of generated statements from three sources: a
//! small grammar of the SQL Sluice supports (CREATE/DROP TABLE, CREATE/DROP/ALTER MATERIALIZED
//! VIEW including views over views, INSERT/UPDATE/DELETE, SELECTs with random nested
//! expressions over every supported type, session settings, FLUSH), a few hostile statements
//! (thousands of OR terms, dozens of nested CASTs, huge literals, NULLs everywhere), and random
//! mutations of the statements of `sql_tests/**/*.slt` (run on a session and objects of their
//! own). For the seed it prints, a run proves:
//!
//! 1. the process never exits, never drops a connection and never panics (the log is scanned)
//!    nor fails an actor (`rw_catalog.rw_recovery_events`); after an exit the server is
//!    restarted on the same data and the run goes on, so one run reports many bugs;
//! 2. no statement fails with SQLSTATE XX000 (an internal error is a bug), nor with 40001
//!    ("run it again") unless an actor failure made the server discard its changes;
//! 3. acknowledged writes are exact: the fuzzer owns `fz_a` and `fz_b`, generates every
//!    INSERT/UPDATE/DELETE on them so that it can compute the effect with Postgres semantics
//!    (new rows, row count, or the error Postgres raises: a statement that fails changes
//!    nothing), and `SELECT` must return exactly its model after every write and after every
//!    restart (where the statement in flight may or may not have happened); the server is
//!    also killed with SIGKILL every [`KILL_EVERY`] statements and at the end, and must start
//!    again with everything. Every materialized view it creates (filters, projections that can
//!    fail, aggregates, inner and left joins, UNION [ALL], views over views) must equal its
//!    query run as a batch SELECT; the comparison is skipped when the batch query fails, since
//!    a view turns a failing expression into NULL instead. DDL does what it says: a failed
//!    CREATE leaves nothing, a DROP removes exactly the view and (with CASCADE) its readers,
//!    a DROP of something views read fails without CASCADE;
//! 4. no statement stalls: each one has [`STATEMENT_TIMEOUT`] in a long run of its own, and
//!    [`SHARED_STATEMENT_TIMEOUT`] in the short run of plain `cargo test`, where it shares the
//!    machine with every other end-to-end test.
//!
//! Findings are collected, not fatal one by one: the test prints a summary and fails listing
//! the distinct ones (same kind, SQLSTATE and message shape), each with its shortest statement
//! and the definitions of the fuzzer's tables and views it reads.
//!
//! Environment: `SLUICE_FUZZ_SEED=n` replays a run (the seed is printed at the start),
//! `SLUICE_FUZZ_STATEMENTS=n` sets its length (default [`DEFAULT_STATEMENTS`], a short run for
//! plain `cargo test`; 10000 is the long variant), `SLUICE_FUZZ_TRACE=file` writes every
//! statement sent and its outcome to `file`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, ensure};
use tokio::time::Instant;
use tokio_postgres::{CancelToken, Client, NoTls, SimpleQueryMessage};

use crate::harness::{self, Sluice, retry_until};

/// Random expressions of every type.
mod expr;
/// Findings and statistics.
mod findings;
/// Hostile statements.
mod hostile;
/// The oracle: a model of `fz_a` and `fz_b`.
mod model;
/// Mutations of the `.slt` statements.
mod mutate;
/// Randomness.
mod random;
/// Running statements on the server and surviving its crashes.
mod server;
/// Statements beyond the oracle's writes.
mod statements;
/// Random views and their checks.
mod views;

use expr::*;
use findings::*;
use hostile::*;
use model::*;
use mutate::*;
use random::*;

/// Statements of a run when `SLUICE_FUZZ_STATEMENTS` is not set.
const DEFAULT_STATEMENTS: usize = 600;
/// How long one statement may take before it counts as a stall.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// The same in the short run of plain `cargo test`, beside the other end-to-end tests.
const SHARED_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a view created in the background may take to finish its (small) backfill.
const BACKGROUND_VIEW_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a view that differs from its query is watched for catching up, to tell a stale
/// view from a wrong one.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(5);
/// The server is killed with SIGKILL and restarted every this many statements (and at the
/// end), and must come back with every acknowledged write.
const KILL_EVERY: usize = 500;
/// The tables and views are compared with the model every this many statements.
const CHECK_EVERY: usize = 25;
/// How long a recovery of the streaming jobs after an actor failure may take (its pause grows
/// up to 30 s when failures repeat).
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(40);
/// Runs of a statement that keeps failing with 40001 ("run it again").
const ATTEMPTS: u32 = 3;
/// Distinct findings listed in the failure message.
const MAX_REPORTED: usize = 30;
/// Views of the fuzzer alive at once; more make every write slower.
const MAX_VIEWS: usize = 10;
/// Scratch tables (`fz_s*`) of the fuzzer alive at once.
const MAX_SCRATCH_TABLES: usize = 3;
/// Keys of the oracle tables are drawn from `0..=KEY_SPACE`, so inserts collide often.
const KEY_SPACE: i64 = 60;

#[tokio::test]
async fn random_sql_never_crashes_fails_internally_loses_writes_or_stalls() {
    let seed = match std::env::var("SLUICE_FUZZ_SEED") {
        Ok(seed) => seed.trim().parse().expect("SLUICE_FUZZ_SEED must be a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_nanos() as u64,
    };
    let (statements, statement_timeout) = match std::env::var("SLUICE_FUZZ_STATEMENTS") {
        Ok(n) => {
            (n.trim().parse().expect("SLUICE_FUZZ_STATEMENTS must be a number"), STATEMENT_TIMEOUT)
        }
        Err(_) => (DEFAULT_STATEMENTS, SHARED_STATEMENT_TIMEOUT),
    };
    println!("fuzz: seed {seed} (SLUICE_FUZZ_SEED={seed} replays it), {statements} statements");

    let server = Sluice::start().await.expect("start sluice");
    let mut fuzz = Fuzzer::new(server, seed).await.expect("connect to sluice");
    fuzz.statement_timeout = statement_timeout;
    let started = Instant::now();
    fuzz.run(statements).await;
    let report = fuzz.report(started.elapsed());
    println!("{report}");
    assert!(fuzz.findings.is_empty(), "{report}\n{}", fuzz.server.log_tail());
}

// ------------------------------------------------------------------------------------------
// The fuzzer

/// A relation the fuzzer's views may read.
#[derive(Clone, Debug)]
struct Rel {
    name: String,
    cols: Vec<Col>,
}

/// A materialized view of the fuzzer.
#[derive(Clone, Debug)]
struct View {
    name: String,
    query: String,
    cols: Vec<Col>,
    /// The relations its query reads.
    deps: Vec<String>,
    /// Created with `background_ddl = true` and not yet seen created.
    pending: bool,
}

struct Fuzzer {
    server: Sluice,
    /// How long a statement may take before it counts as a stall.
    statement_timeout: Duration,
    main: Client,
    scratch: Client,
    rng: Rng,
    seed: u64,
    stats: Stats,
    findings: Vec<Finding>,
    model: Model,
    views: Vec<View>,
    scratch_tables: Vec<Rel>,
    /// The CREATE TABLE statements of the scratch tables, for reproducing findings.
    scratch_ddl: BTreeMap<String, String>,
    next_name: u64,
    /// `background_ddl` of the main session.
    background_ddl: bool,
    corpus: Vec<String>,
    /// Identifiers of the corpus, for mutations that swap one for another.
    words: Vec<String>,
    texts: Vec<String>,
    /// The last oracle writes, shown with table mismatches.
    history: Vec<String>,
    /// Restarts already verified against the model.
    verified_restarts: u64,
    /// How much of the current run's log has been scanned for panics.
    log_scanned: usize,
    /// The statement number of the last panic scan.
    scanned_at: u64,
    /// The recovery events of the current run already reported.
    recoveries_seen: BTreeSet<(String, String)>,
    /// The server cannot be brought back: the run stops.
    dead: bool,
    /// A write stalled: the views are dropped before the next statement.
    drop_views: bool,
    /// The oracle tables and the `.slt` objects are to be created (at the start, and on a new
    /// server after one could not start again on its data).
    needs_setup: bool,
    /// Hostile statements ([`hostile_key`]) that stalled or crashed the server already.
    hostile_done: BTreeSet<(usize, String)>,
    /// `SLUICE_FUZZ_TRACE`: where every statement and its outcome are written.
    trace: Option<std::fs::File>,
}

fn table_a() -> Rel {
    let int = |n: &str| (n.to_owned(), Some(Ty::Int));
    Rel {
        name: "fz_a".into(),
        cols: vec![int("id"), int("x"), int("y"), ("s".into(), Some(Ty::Text))],
    }
}

fn table_b() -> Rel {
    let int = |n: &str| (n.to_owned(), Some(Ty::Int));
    Rel { name: "fz_b".into(), cols: vec![int("id"), int("k"), ("v".into(), Some(Ty::Double))] }
}

/// Column types of scratch tables: SQL, the expression type, and a literal for the types
/// without one.
const SCRATCH_TYPES: &[(&str, Option<Ty>, &str)] = &[
    ("smallint", Some(Ty::Int), ""),
    ("int", Some(Ty::Int), ""),
    ("bigint", Some(Ty::BigInt), ""),
    ("numeric(10,2)", Some(Ty::Numeric), ""),
    ("numeric", Some(Ty::Numeric), ""),
    ("real", Some(Ty::Double), ""),
    ("double precision", Some(Ty::Double), ""),
    ("varchar", Some(Ty::Text), ""),
    ("text", Some(Ty::Text), ""),
    ("boolean", Some(Ty::Bool), ""),
    ("date", Some(Ty::Date), ""),
    ("timestamp", None, "'2024-01-02 03:04:05'"),
    ("timestamptz", None, "'2024-01-02 03:04:05+00'"),
    ("jsonb", None, "'{\"a\": [1, null]}'"),
    ("bytea", None, "'\\x00ff'"),
];

/// Rows of a view or its query, ready to compare: sorted, and with the double `-0` written as
/// `0` (they are equal, so `min`, `max`, `GROUP BY` and `UNION` may keep either).
fn comparable(mut rows: Vec<Vec<Option<String>>>) -> Vec<Vec<Option<String>>> {
    for cell in rows.iter_mut().flatten() {
        if cell.as_deref() == Some("-0") {
            *cell = Some("0".to_owned());
        }
    }
    rows.sort();
    rows
}

/// The SQLSTATE of a failed query, if the server sent one.
fn sqlstate(error: &anyhow::Error) -> Option<&str> {
    error.downcast_ref::<tokio_postgres::Error>().and_then(|e| e.code()).map(|c| c.code())
}

/// A short form of a long text, for reports.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}... ({} chars)", s.chars().count())
}

/// Arrow type names, which error messages of one kind vary by.
const TYPE_NAMES: &[&str] = &[
    "Boolean",
    "Utf8",
    "LargeUtf8",
    "Int",
    "UInt",
    "Float",
    "Decimal",
    "Date",
    "Time",
    "Interval",
    "Binary",
    "Null",
    "List",
    "Struct",
    "Dictionary",
];

/// The shape of a message for deduplication: without its detail, numbers, quoted names, type
/// names and parenthesized parts.
fn shape(message: &str) -> String {
    // Without its detail and parenthesized parts (type parameters, thread ids).
    let mut bare = String::new();
    let mut depth = 0usize;
    for c in message.split(" | ").next().unwrap_or(message).chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => bare.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = bare
        .split(' ')
        .map(|w| if TYPE_NAMES.iter().any(|t| w.starts_with(t)) { "T" } else { w })
        .collect();
    let head = words.join(" ");
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut last_digit = false;
    for c in head.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
                out.push(c);
            }
            continue;
        }
        if c == '"' || c == '\'' || c == '`' {
            quote = Some(c);
            out.push(c);
            out.push('…');
            continue;
        }
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('N');
            }
            last_digit = true;
            continue;
        }
        last_digit = false;
        out.push(c);
    }
    clip(&out, 160)
}

impl Fuzzer {
    async fn new(server: Sluice, seed: u64) -> anyhow::Result<Self> {
        let main = server.connect().await?;
        let scratch = server.connect().await?;
        let corpus = slt_corpus();
        let words: BTreeSet<String> = corpus
            .iter()
            .flat_map(|sql| tokenize(sql))
            .map(|t| t.text)
            .filter(|t| t.contains('_') && t.starts_with(|c: char| c.is_ascii_lowercase()))
            .collect();
        Ok(Fuzzer {
            statement_timeout: STATEMENT_TIMEOUT,
            server,
            main,
            scratch,
            rng: Rng::new(seed),
            seed,
            stats: Stats::default(),
            findings: Vec::new(),
            model: Model::default(),
            views: Vec::new(),
            scratch_tables: Vec::new(),
            scratch_ddl: BTreeMap::new(),
            next_name: 0,
            background_ddl: false,
            corpus,
            words: words.into_iter().collect(),
            texts: text_pool(),
            history: Vec::new(),
            verified_restarts: 0,
            log_scanned: 0,
            scanned_at: 0,
            needs_setup: true,
            drop_views: false,
            recoveries_seen: BTreeSet::new(),
            hostile_done: BTreeSet::new(),
            trace: std::env::var_os("SLUICE_FUZZ_TRACE")
                .map(|path| std::fs::File::create(path).expect("create SLUICE_FUZZ_TRACE")),
            dead: false,
        })
    }

    fn find(&mut self, kind: Kind, source: Source, sql: &str, code: &str, message: &str) {
        let reads = self.lineage(sql);
        self.findings.push(Finding {
            kind,
            source,
            sql: sql.to_owned(),
            code: code.to_owned(),
            message: message.split_whitespace().collect::<Vec<_>>().join(" "),
            at: self.stats.statements,
            reads,
        });
    }

    /// The CREATE statements of the scratch tables and views `sql` names, and of everything
    /// they read, inputs first.
    fn lineage(&self, sql: &str) -> Vec<String> {
        fn visit(f: &Fuzzer, name: &str, seen: &mut BTreeSet<String>, out: &mut Vec<String>) {
            if !seen.insert(name.to_owned()) {
                return;
            }
            if let Some(view) = f.views.iter().find(|v| v.name == name) {
                for dep in &view.deps {
                    visit(f, dep, seen, out);
                }
                out.push(format!("CREATE MATERIALIZED VIEW {} AS {}", view.name, view.query));
            } else if let Some(ddl) = f.scratch_ddl.get(name) {
                out.push(ddl.clone());
            }
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for token in tokenize(sql) {
            if token.text.starts_with("fz_v") || token.text.starts_with("fz_s") {
                visit(self, &token.text, &mut seen, &mut out);
            }
        }
        out
    }

    // --------------------------------------------------------------------------------------

    async fn run(&mut self, statements: usize) {
        for i in 0..statements {
            if self.needs_setup {
                self.needs_setup = false;
                self.setup().await;
            }
            if self.dead {
                break;
            }
            if self.drop_views {
                self.drop_views = false;
                self.drop_all_views().await;
            }
            self.stats.generated += 1;
            self.step().await;
            self.verify_restart(None).await;
            if (i + 1) % CHECK_EVERY == 0 {
                self.check_all().await;
            }
            if (i + 1) % KILL_EVERY == 0 {
                self.kill_and_verify().await;
            }
        }
        if !self.dead {
            self.check_all().await;
            self.kill_and_verify().await;
        }
    }

    /// Kills the server with SIGKILL, starts it again on its data, and checks that every
    /// acknowledged write and every view survived (and that it starts at all: a catalog a DDL
    /// left inconsistent shows here).
    async fn kill_and_verify(&mut self) {
        if self.dead {
            return;
        }
        self.stats.kills += 1;
        self.recover().await;
        self.verify_restart(None).await;
        self.scan_log();
    }

    async fn setup(&mut self) {
        for sql in [CREATE_A, CREATE_B] {
            if !matches!(self.exec(Session::Main, Source::Grammar, sql).await, Reply::Rows { .. }) {
                self.find(
                    Kind::DdlOutcome,
                    Source::Grammar,
                    sql,
                    "",
                    "cannot create an oracle table",
                );
                self.dead = true;
                return;
            }
        }
        // The objects of the `.slt` files, for their mutations to find.
        let corpus = self.corpus.clone();
        for sql in &corpus {
            let first = sql.split_whitespace().next().unwrap_or("").to_uppercase();
            if first != "DROP" && !self.dead {
                self.exec(Session::Scratch, Source::SltSetup, sql).await;
            }
        }
        self.verify_restart(None).await;
    }

    async fn step(&mut self) {
        match self.rng.below(100) {
            0..=34 => self.oracle_write().await,
            35..=44 => self.view_ddl().await,
            45..=61 => {
                let sql = self.random_select();
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            62..=77 => {
                let base = self.rng.pick(&self.corpus).clone();
                let sql = mutate(&mut self.rng, &base, &self.words);
                self.exec(Session::Scratch, Source::SltMutation, &sql).await;
            }
            78..=84 => self.scratch_table_statement().await,
            85..=87 => {
                // A hostile statement that already stalled or crashed the server is not sent
                // again: it costs a timeout or a restart and finds nothing new.
                let mut statements = hostile(&mut self.rng);
                for _ in 0..5 {
                    if !self.hostile_done.contains(&hostile_key(&statements)) {
                        break;
                    }
                    statements = hostile(&mut self.rng);
                }
                let fatal = |f: &Finding| matches!(f.kind, Kind::Timeout | Kind::ProcessExit);
                let before = self.findings.iter().filter(|f| fatal(f)).count();
                // A sequence stops at its first failure, but what it created is dropped.
                let cleanup = statements.last().filter(|s| s.starts_with("DROP")).cloned();
                for (i, sql) in statements.iter().enumerate() {
                    let reply = self.exec(Session::Main, Source::Hostile, sql).await;
                    if !matches!(reply, Reply::Rows { .. }) {
                        if i > 0
                            && i + 1 < statements.len()
                            && let Some(cleanup) = &cleanup
                        {
                            self.exec(Session::Main, Source::Hostile, cleanup).await;
                        }
                        break;
                    }
                }
                if self.findings.iter().filter(|f| fatal(f)).count() > before {
                    self.hostile_done.insert(hostile_key(&statements));
                }
            }
            88..=93 => self.session_statement().await,
            _ => self.table_ddl().await,
        }
    }

    // -------------------------------------------------------------------------------- oracle

    async fn oracle_write(&mut self) {
        let planned =
            WriteGen { rng: &mut self.rng, model: &self.model, texts: &self.texts }.plan();
        let restarts = self.stats.restarts;
        let reply = self.exec(Session::Main, Source::Oracle, &planned.sql).await;
        self.history.push(clip(&planned.sql, 200));
        if self.history.len() > 5 {
            self.history.remove(0);
        }
        let after = match &planned.expect {
            Expect::Ok { next, .. } => Some(next.clone()),
            Expect::Fail(_) => None,
        };
        if self.stats.restarts != restarts {
            self.verify_restart(after.as_ref()).await;
            return;
        }
        match (reply, planned.expect) {
            (Reply::Rows { count, .. }, Expect::Ok { next, count: expected }) => {
                if count != Some(expected) {
                    let message =
                        format!("wrong row count | expected {expected}, the reply says {count:?}");
                    self.find(Kind::DmlOutcome, Source::Oracle, &planned.sql, "", &message);
                }
                self.model = next;
                // Read back at once, so a difference names the write that made it.
                self.check_tables(None, Kind::TableMismatch, &planned.sql).await;
            }
            (Reply::Rows { .. }, Expect::Fail(why)) => {
                let message = format!("accepted a write Postgres rejects ({why})");
                self.find(Kind::DmlOutcome, Source::Oracle, &planned.sql, "", &message);
                // What it wrote is now the truth to follow.
                self.resync().await;
            }
            (Reply::Failed { code, message }, Expect::Ok { .. }) => {
                // XX000 is recorded already; 0A000 says plainly that Sluice does not support it.
                if code != "XX000" && code != "0A000" {
                    let message = format!("rejected a valid write | {message}");
                    self.find(Kind::DmlOutcome, Source::Oracle, &planned.sql, &code, &message);
                }
                // A failed statement changes nothing.
                self.check_tables(None, Kind::TableMismatch, &planned.sql).await;
            }
            (Reply::Failed { .. }, Expect::Fail(_)) => {
                self.check_tables(None, Kind::TableMismatch, &planned.sql).await;
            }
            // The connection failed without an exit: the statement may or may not have run.
            (Reply::Lost, _) => {
                self.check_tables(after.as_ref(), Kind::LostWrite, &planned.sql).await
            }
        }
    }

    /// Reads the oracle tables; `None` if a read failed (already recorded).
    async fn read_model(&mut self) -> Option<anyhow::Result<Model>> {
        let Reply::Rows { rows: a, .. } = self.exec(Session::Main, Source::Check, SELECT_A).await
        else {
            return None;
        };
        let Reply::Rows { rows: b, .. } = self.exec(Session::Main, Source::Check, SELECT_B).await
        else {
            return None;
        };
        Some(parse_model(&a, &b))
    }

    async fn resync(&mut self) {
        if let Some(Ok(model)) = self.read_model().await {
            self.model = model;
        }
    }

    /// Compares the oracle tables with the model (or, when the statement in flight had no
    /// reply, with the model after it: `after`). A difference is a finding of `kind`, and the
    /// model follows the tables from then on.
    async fn check_tables(&mut self, after: Option<&Model>, kind: Kind, context: &str) {
        if self.needs_setup {
            return; // A new server: the oracle tables do not exist yet.
        }
        let restarts = self.stats.restarts;
        let found = match self.read_model().await {
            Some(Ok(found)) => found,
            Some(Err(error)) => {
                let message = format!("an oracle table returned unreadable rows | {error}");
                self.find(kind, Source::Check, context, "", &message);
                return;
            }
            None => {
                if self.stats.restarts != restarts || self.dead {
                    return; // Recorded; verified again after the restart.
                }
                self.find(kind, Source::Check, context, "", "an oracle table cannot be read");
                return;
            }
        };
        self.stats.table_checks += 1;
        if found == self.model {
            return;
        }
        if after == Some(&found) {
            self.model = found;
            return;
        }
        let message = format!(
            "an oracle table differs from the model of its acknowledged writes | {}; last writes: {:?}",
            model_diff(&self.model, &found),
            self.history
        );
        self.find(kind, Source::Check, context, "", &message);
        self.model = found;
    }

    /// After a restart: tables equal the model (or the model after the statement in flight)
    /// and every view its query.
    async fn verify_restart(&mut self, after: Option<&Model>) {
        if self.dead || self.needs_setup || self.verified_restarts == self.stats.restarts {
            return;
        }
        // Several restarts may happen in a row (a check crashing again): verify until quiet.
        for _ in 0..3 {
            self.verified_restarts = self.stats.restarts;
            self.check_tables(after, Kind::LostWrite, "(after a restart)").await;
            self.check_views().await;
            if self.dead || self.verified_restarts == self.stats.restarts {
                return;
            }
        }
    }

    async fn check_all(&mut self) {
        self.check_tables(None, Kind::TableMismatch, "(periodic check)").await;
        self.check_views().await;
        self.scan_recoveries().await;
        self.scan_log();
    }

    // --------------------------------------------------------------------------------- views

    /// Relations views may read: the oracle and scratch tables and the views seen created.
    fn relations(&self) -> Vec<Rel> {
        let mut rels = vec![table_a(), table_b()];
        rels.extend(self.scratch_tables.iter().cloned());
        rels.extend(
            self.views
                .iter()
                .filter(|v| !v.pending)
                .map(|v| Rel { name: v.name.clone(), cols: v.cols.clone() }),
        );
        rels
    }

    // ------------------------------------------------------------------------------- grammar

    // -------------------------------------------------------------------------------- report

    fn report(&self, elapsed: Duration) -> String {
        let s = &self.stats;
        let mut out = String::new();
        let expected: u64 = s.expected.values().sum();
        writeln!(
            out,
            "fuzz summary: seed {}, {} generated statements ({} sent in all, checks and .slt setup included) in {:.1?}, {} restarts ({} of them deliberate kill -9), {} new servers on new data",
            self.seed, s.generated, s.statements, elapsed, s.restarts, s.kills, s.new_servers
        )
        .unwrap();
        writeln!(out, "  ok {}, expected errors {expected}, XX000 {}", s.ok, s.internal).unwrap();
        writeln!(
            out,
            "  answer times: {} over 1 s; slowest {:.1?}: {}",
            s.over_a_second, s.slowest.0, s.slowest.1
        )
        .unwrap();
        let codes: Vec<String> = s.expected.iter().map(|(c, n)| format!("{c} {n}")).collect();
        writeln!(out, "  expected errors by SQLSTATE: {}", codes.join(", ")).unwrap();
        let sources: Vec<String> =
            s.by_source.iter().map(|(k, n)| format!("{} {n}", k.name())).collect();
        writeln!(out, "  statements by source: {}", sources.join(", ")).unwrap();
        writeln!(
            out,
            "  oracle: {} table checks, {} view comparisons ({} skipped: batch query failed), {} views created, {} statements run again after 40001",
            s.table_checks, s.view_checks, s.view_skips, s.views_created, s.retried
        )
        .unwrap();
        let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
        for f in &self.findings {
            *by_kind.entry(f.kind).or_default() += 1;
        }
        let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{} {n}", k.name())).collect();
        // Distinct findings, each with its count and shortest statement.
        let mut distinct: BTreeMap<(Kind, String, String), (usize, &Finding)> = BTreeMap::new();
        for f in &self.findings {
            let key = (f.kind, f.code.clone(), shape(&f.message));
            let entry = distinct.entry(key).or_insert((0, f));
            entry.0 += 1;
            if f.sql.len() < entry.1.sql.len() {
                entry.1 = f;
            }
        }
        writeln!(
            out,
            "  findings: {} ({} distinct){}{}",
            self.findings.len(),
            distinct.len(),
            if kinds.is_empty() { "" } else { " by kind: " },
            kinds.join(", ")
        )
        .unwrap();
        for (i, ((kind, code, _), (count, f))) in distinct.iter().take(MAX_REPORTED).enumerate() {
            writeln!(
                out,
                "  [{}] {} x{count} (source {}, statement #{}){}\n      message: {}\n      statement: {}",
                i + 1,
                kind.name(),
                f.source.name(),
                f.at,
                if code.is_empty() { String::new() } else { format!(" SQLSTATE {code}") },
                clip(&f.message, 600),
                clip(&f.sql, 300)
            )
            .unwrap();
            for read in &f.reads {
                writeln!(out, "      reads: {}", clip(read, 400)).unwrap();
            }
        }
        if distinct.len() > MAX_REPORTED {
            writeln!(out, "  ... and {} more distinct findings", distinct.len() - MAX_REPORTED)
                .unwrap();
        }
        out
    }
}
