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
// Randomness

/// The harness's generator with the helpers the grammar uses.
struct Rng(harness::Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(harness::Rng::new(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next()
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn copy_of<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

// ------------------------------------------------------------------------------------------
// Findings and statistics

/// What a finding violates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The server process exited.
    ProcessExit,
    /// The server could not be started again on its data after an exit.
    RestartFailed,
    /// A connection failed while the process kept running.
    ConnectionLost,
    /// The server log shows a panic the process survived.
    ServerPanic,
    /// An actor failed and the server rebuilt its streaming jobs
    /// (`rw_catalog.rw_recovery_events`): the process survived what used to be an exit.
    ActorFailure,
    /// SQLSTATE XX000.
    InternalError,
    /// No reply within [`STATEMENT_TIMEOUT`].
    Timeout,
    /// An owned table differs from the model of its acknowledged writes.
    TableMismatch,
    /// After a restart, an owned table is neither the model before nor after the statement
    /// in flight: an acknowledged write was lost (or an unacknowledged one half-applied).
    LostWrite,
    /// A write on an owned table got another outcome than Postgres semantics give (rejected
    /// while valid, accepted while invalid, or a wrong row count).
    DmlOutcome,
    /// A view differs from its query run as a batch query.
    ViewMismatch,
    /// 40001 ("run it again") while no recovery of the streaming jobs happened.
    SpuriousRetry,
    /// DDL with a wrong outcome: a failed CREATE left something behind, a view vanished or
    /// cannot be read, a DROP with dependents succeeded.
    DdlOutcome,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ProcessExit => "process-exit",
            Kind::RestartFailed => "restart-failed",
            Kind::ConnectionLost => "connection-lost",
            Kind::ServerPanic => "server-panic",
            Kind::ActorFailure => "actor-failure",
            Kind::InternalError => "internal-error",
            Kind::Timeout => "timeout",
            Kind::TableMismatch => "table-mismatch",
            Kind::LostWrite => "lost-write",
            Kind::DmlOutcome => "dml-outcome",
            Kind::ViewMismatch => "view-mismatch",
            Kind::DdlOutcome => "ddl-outcome",
            Kind::SpuriousRetry => "spurious-40001",
        }
    }
}

/// Which generator produced a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    /// DML on the oracle tables.
    Oracle,
    /// Views of the fuzzer: CREATE, DROP, ALTER.
    View,
    /// Random SELECTs, scratch tables, settings, catalog statements.
    Grammar,
    /// Deliberately extreme statements.
    Hostile,
    /// The `.slt` statements run once to create their objects.
    SltSetup,
    /// Mutated `.slt` statements.
    SltMutation,
    /// Reads that compare tables and views with their oracles.
    Check,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Oracle => "oracle-dml",
            Source::View => "view-ddl",
            Source::Grammar => "grammar",
            Source::Hostile => "hostile",
            Source::SltSetup => "slt-setup",
            Source::SltMutation => "slt-mutation",
            Source::Check => "check",
        }
    }
}

struct Finding {
    kind: Kind,
    source: Source,
    /// The statement (or the check) that showed it.
    sql: String,
    /// The SQLSTATE, if the finding is an error reply.
    code: String,
    /// What went wrong. Text after ` | ` is detail, left out of the deduplication shape.
    message: String,
    /// The statement number (1-based, counting every statement sent).
    at: u64,
    /// The definitions of the fuzzer's tables and views the statement reads, inputs first,
    /// so that the finding can be reproduced.
    reads: Vec<String>,
}

#[derive(Default)]
struct Stats {
    /// Every statement sent, checks included.
    statements: u64,
    /// Statements of the run's budget (the loop's iterations).
    generated: u64,
    ok: u64,
    /// Error replies other than XX000, by SQLSTATE.
    expected: BTreeMap<String, u64>,
    internal: u64,
    by_source: BTreeMap<Source, u64>,
    restarts: u64,
    table_checks: u64,
    view_checks: u64,
    /// View comparisons skipped because the batch query failed.
    view_skips: u64,
    views_created: u64,
    /// Statements run again after failing with 40001 (changes discarded by a recovery).
    retried: u64,
    /// Deliberate `kill -9` and restarts (also counted in `restarts`).
    kills: u64,
    /// Servers started on a new data directory because the old one could not go on.
    new_servers: u64,
    /// Statements that took longer than a second to answer.
    over_a_second: u64,
    /// The longest wait for an answer, and its statement.
    slowest: (Duration, String),
}

/// A reply to one statement.
enum Reply {
    Rows {
        rows: Vec<Vec<Option<String>>>,
        count: Option<u64>,
    },
    Failed {
        code: String,
        message: String,
    },
    /// No reply: the connection failed, the statement timed out or the process exited. The
    /// finding is recorded and the session (or the server) is back up.
    Lost,
}

fn reply_of(messages: Vec<SimpleQueryMessage>) -> Reply {
    let mut rows = Vec::new();
    let mut count = None;
    for message in messages {
        match message {
            SimpleQueryMessage::Row(row) => {
                rows.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect())
            }
            SimpleQueryMessage::CommandComplete(n) => count = Some(n),
            _ => {}
        }
    }
    Reply::Rows { rows, count }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Session {
    /// The fuzzer's own session: oracle tables, views, grammar, hostile statements.
    Main,
    /// The session of the mutated `.slt` statements, whose settings must not leak into Main.
    Scratch,
}

// ------------------------------------------------------------------------------------------
// The oracle: a model of `fz_a` and `fz_b`

/// A row of `fz_a (id int PRIMARY KEY, x int, y int, s varchar)` without its key.
#[derive(Clone, Debug, PartialEq)]
struct ARow {
    x: Option<i64>,
    y: Option<i64>,
    s: Option<String>,
}

/// A row of `fz_b (id int PRIMARY KEY, k int, v double precision)` without its key.
#[derive(Clone, Debug, PartialEq)]
struct BRow {
    k: Option<i64>,
    v: Option<f64>,
}

/// The exact contents of the oracle tables after every acknowledged write.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    a: BTreeMap<i64, ARow>,
    b: BTreeMap<i64, BRow>,
}

const CREATE_A: &str = "CREATE TABLE fz_a (id int PRIMARY KEY, x int, y int, s varchar)";
const CREATE_B: &str = "CREATE TABLE fz_b (id int PRIMARY KEY, k int, v double precision)";
const SELECT_A: &str = "SELECT id, x, y, s FROM fz_a";
const SELECT_B: &str = "SELECT id, k, v FROM fz_b";

/// One row of either table, as expressions see it.
struct RowRef<'a> {
    id: i64,
    x: Option<i64>,
    y: Option<i64>,
    k: Option<i64>,
    s: Option<&'a str>,
    v: Option<f64>,
}

impl<'a> RowRef<'a> {
    fn of_a(id: i64, row: &'a ARow) -> Self {
        RowRef { id, x: row.x, y: row.y, k: None, s: row.s.as_deref(), v: None }
    }

    fn of_b(id: i64, row: &'a BRow) -> Self {
        RowRef { id, x: None, y: None, k: row.k, s: None, v: row.v }
    }

    fn int(&self, column: &str) -> Option<i64> {
        match column {
            "id" => Some(self.id),
            "x" => self.x,
            "y" => self.y,
            "k" => self.k,
            other => unreachable!("no int column {other}"),
        }
    }
}

const INT4_MIN: i64 = i32::MIN as i64;
const INT4_MAX: i64 = i32::MAX as i64;

fn is_int4(v: i64) -> bool {
    (INT4_MIN..=INT4_MAX).contains(&v)
}

/// Why Postgres rejects a write.
type Fail = &'static str;

/// An operand of integer arithmetic: an int column, or a literal (int4 when it fits, as in
/// Postgres, else int8).
#[derive(Clone, Debug)]
enum Operand {
    Col(&'static str),
    Lit(i64),
}

impl Operand {
    fn sql(&self) -> String {
        match self {
            Operand::Col(c) => (*c).to_owned(),
            Operand::Lit(v) if *v < 0 => format!("({v})"),
            Operand::Lit(v) => v.to_string(),
        }
    }

    fn eval(&self, row: &RowRef) -> Option<i64> {
        match self {
            Operand::Col(c) => row.int(c),
            Operand::Lit(v) => Some(*v),
        }
    }

    fn is_int8(&self) -> bool {
        matches!(self, Operand::Lit(v) if !is_int4(*v))
    }
}

#[derive(Clone, Copy, Debug)]
enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// An integer expression of Postgres semantics: one operator deep, so that the overflow of
/// an intermediate result never depends on the engine's choice of integer width.
#[derive(Clone, Debug)]
enum IntExpr {
    Lit(Option<i64>),
    /// The literal written as a quoted string (an unknown-typed literal in Postgres).
    Quoted(i64),
    /// The literal wrapped in a scalar subquery.
    Subquery(Option<i64>),
    Bin(Operand, IntOp, Operand),
    Neg(&'static str),
    Case(Box<Pred>, Operand, Operand),
    Coalesce(&'static str, i64),
    /// `length(s)`.
    Length,
}

impl IntExpr {
    fn sql(&self) -> String {
        match self {
            IntExpr::Lit(None) => "NULL".into(),
            IntExpr::Lit(Some(v)) => v.to_string(),
            IntExpr::Quoted(v) => format!("'{v}'"),
            IntExpr::Subquery(None) => "(SELECT NULL)".into(),
            IntExpr::Subquery(Some(v)) => format!("(SELECT {v})"),
            IntExpr::Bin(a, op, b) => {
                let op = match op {
                    IntOp::Add => "+",
                    IntOp::Sub => "-",
                    IntOp::Mul => "*",
                    IntOp::Div => "/",
                    IntOp::Mod => "%",
                };
                format!("{} {op} {}", a.sql(), b.sql())
            }
            IntExpr::Neg(c) => format!("-{c}"),
            IntExpr::Case(p, a, b) => {
                format!("CASE WHEN {} THEN {} ELSE {} END", p.sql(), a.sql(), b.sql())
            }
            IntExpr::Coalesce(c, v) => format!("coalesce({c}, {v})"),
            IntExpr::Length => "length(s)".into(),
        }
    }

    /// The value Postgres computes, or why it fails.
    fn eval(&self, row: &RowRef) -> Result<Option<i64>, Fail> {
        match self {
            IntExpr::Lit(v) | IntExpr::Subquery(v) => Ok(*v),
            IntExpr::Quoted(v) => Ok(Some(*v)),
            IntExpr::Bin(a, op, b) => {
                let (Some(x), Some(y)) = (a.eval(row), b.eval(row)) else {
                    return Ok(None);
                };
                let int8 = a.is_int8() || b.is_int8();
                let v = match op {
                    IntOp::Add => x.checked_add(y),
                    IntOp::Sub => x.checked_sub(y),
                    IntOp::Mul => x.checked_mul(y),
                    IntOp::Div if y == 0 => return Err("division by zero"),
                    IntOp::Div => x.checked_div(y),
                    IntOp::Mod if y == 0 => return Err("division by zero"),
                    // Postgres special-cases `% -1` (never an overflow).
                    IntOp::Mod if y == -1 => Some(0),
                    IntOp::Mod => x.checked_rem(y),
                };
                match v {
                    Some(v) if int8 || is_int4(v) => Ok(Some(v)),
                    _ => Err("integer out of range"),
                }
            }
            IntExpr::Neg(c) => match row.int(c) {
                None => Ok(None),
                Some(v) if is_int4(-v) => Ok(Some(-v)),
                Some(_) => Err("integer out of range"),
            },
            IntExpr::Case(p, a, b) => {
                Ok(if p.eval(row) == Some(true) { a.eval(row) } else { b.eval(row) })
            }
            IntExpr::Coalesce(c, v) => Ok(row.int(c).or(Some(*v))),
            IntExpr::Length => Ok(row.s.map(|s| s.chars().count() as i64)),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// A predicate of three-valued logic that never fails (no arithmetic), so that whether a
/// statement errors never depends on the order rows or conjuncts are evaluated in.
#[derive(Clone, Debug)]
enum Pred {
    Const(Option<bool>),
    Cmp(Operand, CmpOp, Operand),
    IsNull(&'static str, bool),
    Between(&'static str, i64, i64),
    In(&'static str, Vec<i64>),
    TextCmp(CmpOp, String),
    /// `s LIKE 'prefix%'`.
    Like(String),
    /// `v > literal` on `fz_b`.
    DoubleGt(&'static str, f64),
    Not(Box<Pred>),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
}

impl Pred {
    fn sql(&self) -> String {
        match self {
            Pred::Const(None) => "NULL".into(),
            Pred::Const(Some(b)) => b.to_string(),
            Pred::Cmp(a, op, b) => format!("{} {} {}", a.sql(), op.sql(), b.sql()),
            Pred::IsNull(c, true) => format!("{c} IS NULL"),
            Pred::IsNull(c, false) => format!("{c} IS NOT NULL"),
            Pred::Between(c, lo, hi) => format!("{c} BETWEEN {lo} AND {hi}"),
            Pred::In(c, list) => format!(
                "{c} IN ({})",
                list.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
            Pred::TextCmp(op, lit) => format!("s {} {}", op.sql(), quote(lit)),
            Pred::Like(prefix) => format!("s LIKE {}", quote(&format!("{prefix}%"))),
            Pred::DoubleGt(text, _) => format!("v > {text}"),
            Pred::Not(p) => format!("NOT ({})", p.sql()),
            Pred::And(a, b) => format!("({}) AND ({})", a.sql(), b.sql()),
            Pred::Or(a, b) => format!("({}) OR ({})", a.sql(), b.sql()),
        }
    }

    fn eval(&self, row: &RowRef) -> Option<bool> {
        match self {
            Pred::Const(b) => *b,
            Pred::Cmp(a, op, b) => Some(op.holds(a.eval(row)?, b.eval(row)?)),
            Pred::IsNull(c, is_null) => {
                let null = match *c {
                    "s" => row.s.is_none(),
                    "v" => row.v.is_none(),
                    c => row.int(c).is_none(),
                };
                Some(null == *is_null)
            }
            Pred::Between(c, lo, hi) => row.int(c).map(|v| *lo <= v && v <= *hi),
            Pred::In(c, list) => row.int(c).map(|v| list.contains(&v)),
            Pred::TextCmp(op, lit) => row.s.map(|s| op.holds(s, lit.as_str())),
            Pred::Like(prefix) => row.s.map(|s| s.starts_with(prefix.as_str())),
            Pred::DoubleGt(_, lit) => row.v.map(|v| v > *lit),
            Pred::Not(p) => p.eval(row).map(|b| !b),
            Pred::And(a, b) => match (a.eval(row), b.eval(row)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Pred::Or(a, b) => match (a.eval(row), b.eval(row)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        }
    }
}

/// A text expression for `s`.
#[derive(Clone, Debug)]
enum TextExpr {
    Lit(Option<String>),
    /// `s || 'lit'` (or `'lit' || s` when the flag is set).
    Concat(String, bool),
    Upper,
    Lower,
    /// `CAST(col AS varchar)` of an int column.
    FromInt(&'static str),
}

impl TextExpr {
    fn sql(&self) -> String {
        match self {
            TextExpr::Lit(None) => "NULL".into(),
            TextExpr::Lit(Some(s)) => quote(s),
            TextExpr::Concat(lit, false) => format!("s || {}", quote(lit)),
            TextExpr::Concat(lit, true) => format!("{} || s", quote(lit)),
            TextExpr::Upper => "upper(s)".into(),
            TextExpr::Lower => "lower(s)".into(),
            TextExpr::FromInt(c) => format!("CAST({c} AS varchar)"),
        }
    }

    fn eval(&self, row: &RowRef) -> Option<String> {
        match self {
            TextExpr::Lit(s) => s.clone(),
            TextExpr::Concat(lit, false) => row.s.map(|s| format!("{s}{lit}")),
            TextExpr::Concat(lit, true) => row.s.map(|s| format!("{lit}{s}")),
            TextExpr::Upper => row.s.map(str::to_uppercase),
            TextExpr::Lower => row.s.map(str::to_lowercase),
            TextExpr::FromInt(c) => row.int(c).map(|v| v.to_string()),
        }
    }
}

/// A double expression for `v`. Literals are short decimals, factors powers of two, so every
/// result is the same IEEE double however the engine types the literal.
#[derive(Clone, Debug)]
enum DoubleExpr {
    Lit(Option<(&'static str, f64)>),
    Add(&'static str, f64),
    Mul(&'static str, f64),
    Neg,
    /// `CAST(k AS double precision)`.
    FromK,
}

impl DoubleExpr {
    fn sql(&self) -> String {
        match self {
            DoubleExpr::Lit(None) => "NULL".into(),
            DoubleExpr::Lit(Some((text, _))) => (*text).to_owned(),
            DoubleExpr::Add(text, _) => format!("v + {text}"),
            DoubleExpr::Mul(text, _) => format!("v * {text}"),
            DoubleExpr::Neg => "-v".into(),
            DoubleExpr::FromK => "CAST(k AS double precision)".into(),
        }
    }

    fn eval(&self, row: &RowRef) -> Result<Option<f64>, Fail> {
        let v = match self {
            DoubleExpr::Lit(lit) => lit.map(|(_, v)| v),
            DoubleExpr::Add(_, c) => row.v.map(|v| v + c),
            DoubleExpr::Mul(_, c) => row.v.map(|v| v * c),
            DoubleExpr::Neg => row.v.map(|v| -v),
            DoubleExpr::FromK => row.k.map(|k| k as f64),
        };
        match v {
            Some(v) if !v.is_finite() => Err("value out of range: overflow"),
            v => Ok(v),
        }
    }
}

/// Short decimal literals for `v` and their values.
const DOUBLES: &[(&str, f64)] = &[
    ("0", 0.0),
    ("0.1", 0.1),
    ("-2.5", -2.5),
    ("3.375", 3.375),
    ("1024", 1024.0),
    ("1e10", 1e10),
    ("-7.75", -7.75),
    ("123456789.125", 123_456_789.125),
];

/// Strings for `s`: empty, quotes, a backslash, non-ASCII, LIKE metacharacters, long.
fn text_pool() -> Vec<String> {
    vec![
        "a".into(),
        "abc".into(),
        "b".into(),
        "Mixed Case".into(),
        String::new(),
        "it's".into(),
        "back\\slash".into(),
        "é日本🦀".into(),
        "100%_".into(),
        " padded ".into(),
        "12".into(),
        "NULL".into(),
        "x".repeat(5000),
    ]
}

/// What a write on the oracle tables must do.
enum Expect {
    /// It succeeds, reports `count` rows, and the tables become `next`.
    Ok { next: Model, count: u64 },
    /// It fails (any SQLSTATE but XX000) and changes nothing.
    Fail(Fail),
}

struct PlannedWrite {
    sql: String,
    expect: Expect,
}

/// Rows of a model table a predicate selects, in key order.
fn matching<'a, R>(
    rows: &'a BTreeMap<i64, R>,
    pred: Option<&Pred>,
    view: impl Fn(i64, &'a R) -> RowRef<'a>,
) -> Vec<i64> {
    rows.iter()
        .filter(|(id, row)| pred.is_none_or(|p| p.eval(&view(**id, row)) == Some(true)))
        .map(|(id, _)| *id)
        .collect()
}

/// Generators of oracle writes; every one computes its own expected outcome.
struct WriteGen<'a> {
    rng: &'a mut Rng,
    model: &'a Model,
    texts: &'a [String],
}

impl WriteGen<'_> {
    fn plan(&mut self) -> PlannedWrite {
        match self.rng.below(20) {
            0..=4 => self.insert_a(),
            5..=7 => self.insert_b(),
            8 => self.insert_a_from_b(),
            9..=11 => self.update_a(),
            12 => self.update_a_key(),
            13..=14 => self.update_b(),
            15..=16 => self.delete_a(),
            17 => self.delete_b(),
            18 => self.nulls_everywhere(),
            _ => self.insert_a(),
        }
    }

    /// A key: mostly from a small range (so duplicates happen), sometimes NULL or extreme.
    fn key(&mut self) -> Option<i64> {
        match self.rng.below(100) {
            0..=69 => Some(self.rng.range(0, KEY_SPACE)),
            70..=79 => match self.model.a.keys().nth(self.rng.below(self.model.a.len().max(1))) {
                Some(id) => Some(*id),
                None => Some(0),
            },
            80..=84 => None,
            85..=89 => Some(*self.rng.pick(&[INT4_MAX, INT4_MIN, -1])),
            90..=94 => Some(*self.rng.pick(&[INT4_MAX + 1, INT4_MIN - 1, 10_000_000_000])),
            _ => Some(self.rng.range(-5, 5)),
        }
    }

    fn int_value(&mut self) -> Option<i64> {
        match self.rng.below(100) {
            0..=19 => None,
            20..=69 => Some(self.rng.range(-10, 10)),
            70..=79 => Some(0),
            80..=89 => Some(*self.rng.pick(&[INT4_MAX, INT4_MIN, INT4_MAX - 1, -1])),
            90..=94 => Some(*self.rng.pick(&[INT4_MAX + 1, INT4_MIN - 1, 1 << 40])),
            _ => Some(self.rng.range(-100_000, 100_000)),
        }
    }

    fn text_value(&mut self) -> Option<String> {
        if self.rng.chance(20) { None } else { Some(self.rng.pick(self.texts).clone()) }
    }

    /// An int value as SQL: a literal, or (sometimes) quoted or in a scalar subquery.
    fn int_sql(&mut self, v: Option<i64>) -> String {
        let expr = match (v, self.rng.below(30)) {
            (Some(v), 0..=2) if v >= 0 => IntExpr::Quoted(v),
            (v, 3) => IntExpr::Subquery(v),
            (v, _) => IntExpr::Lit(v),
        };
        expr.sql()
    }

    fn text_sql(&mut self, s: &Option<String>) -> String {
        let lit = TextExpr::Lit(s.clone()).sql();
        if self.rng.chance(3) { format!("(SELECT {lit})") } else { lit }
    }

    fn insert_a(&mut self) -> PlannedWrite {
        let n = 1 + self.rng.below(4);
        let mut rows = Vec::new();
        for _ in 0..n {
            let id = if !rows.is_empty() && self.rng.chance(5) {
                let (id, _): &(Option<i64>, ARow) = &rows[0];
                *id
            } else {
                self.key()
            };
            let row = ARow { x: self.int_value(), y: self.int_value(), s: self.text_value() };
            rows.push((id, row));
        }
        // All four columns in a random order (or no column list).
        let mut columns = ["id", "x", "y", "s"];
        let listed = self.rng.chance(40);
        if listed {
            for i in (1..columns.len()).rev() {
                columns.swap(i, self.rng.below(i + 1));
            }
        }
        let values: Vec<String> = rows
            .iter()
            .map(|(id, row)| {
                let items: Vec<String> = columns
                    .iter()
                    .map(|c| match *c {
                        "id" => self.int_sql(*id),
                        "x" => self.int_sql(row.x),
                        "y" => self.int_sql(row.y),
                        _ => self.text_sql(&row.s),
                    })
                    .collect();
                format!("({})", items.join(", "))
            })
            .collect();
        let target = if listed { format!(" ({})", columns.join(", ")) } else { String::new() };
        let sql = format!("INSERT INTO fz_a{target} VALUES {}", values.join(", "));

        let mut next = self.model.clone();
        let expect = (|| {
            for (id, row) in &rows {
                let id = id.ok_or("null value in the primary key")?;
                let ints = [Some(id), row.x, row.y];
                if ints.iter().flatten().any(|v| !is_int4(*v)) {
                    return Err("integer out of range");
                }
                if next.a.insert(id, row.clone()).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, rows.len()) }
    }

    fn insert_b(&mut self) -> PlannedWrite {
        let n = 1 + self.rng.below(3);
        let mut rows = Vec::new();
        for _ in 0..n {
            let id = match self.model.b.keys().nth(self.rng.below(self.model.b.len().max(1))) {
                Some(id) if self.rng.chance(10) => Some(*id),
                _ => self.key(),
            };
            let v = if self.rng.chance(15) { None } else { Some(*self.rng.pick(DOUBLES)) };
            rows.push((id, self.int_value(), v));
        }
        let values: Vec<String> = rows
            .iter()
            .map(|(id, k, v)| {
                let v = DoubleExpr::Lit(*v).sql();
                format!("({}, {}, {v})", self.int_sql(*id), self.int_sql(*k))
            })
            .collect();
        let sql = format!("INSERT INTO fz_b VALUES {}", values.join(", "));
        let mut next = self.model.clone();
        let expect = (|| {
            for (id, k, v) in &rows {
                let id = id.ok_or("null value in the primary key")?;
                if !is_int4(id) || k.is_some_and(|k| !is_int4(k)) {
                    return Err("integer out of range");
                }
                if next.b.insert(id, BRow { k: *k, v: v.map(|(_, v)| v) }).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, rows.len()) }
    }

    /// `INSERT INTO fz_a (id, x, s) SELECT id + off, k, '..' FROM fz_b WHERE ..`.
    fn insert_a_from_b(&mut self) -> PlannedWrite {
        let offset = *self.rng.pick(&[0, 1, 7, 100, -3, INT4_MAX - 20]);
        let pred = self.pred_b();
        let tag = self.rng.pick(self.texts).clone();
        let sql = format!(
            "INSERT INTO fz_a (id, x, s) SELECT id + {}, k, {} FROM fz_b WHERE {}",
            Operand::Lit(offset).sql(),
            quote(&tag),
            pred.sql()
        );
        let ids = matching(&self.model.b, Some(&pred), RowRef::of_b);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let new_id = id + offset;
                if !is_int4(new_id) {
                    return Err("integer out of range");
                }
                let row = ARow { x: self.model.b[id].k, y: None, s: Some(tag.clone()) };
                if next.a.insert(new_id, row).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    fn operand(&mut self, columns: &[&'static str]) -> Operand {
        if self.rng.chance(50) {
            Operand::Col(self.rng.copy_of(columns))
        } else {
            Operand::Lit(match self.rng.below(10) {
                0 => 0,
                1 => *self.rng.pick(&[INT4_MAX, INT4_MIN, 3_000_000_000]),
                _ => self.rng.range(-10, 10),
            })
        }
    }

    /// An int expression over `columns` for a SET clause.
    fn int_expr(&mut self, columns: &[&'static str], with_s: bool) -> IntExpr {
        let ops = [IntOp::Add, IntOp::Sub, IntOp::Mul, IntOp::Div, IntOp::Mod];
        match self.rng.below(9) {
            0 => IntExpr::Lit(self.int_value()),
            1..=3 => {
                let a = Operand::Col(self.rng.copy_of(columns));
                let b = self.operand(columns);
                let op = *self.rng.pick(&ops);
                if self.rng.chance(30) { IntExpr::Bin(b, op, a) } else { IntExpr::Bin(a, op, b) }
            }
            4 => IntExpr::Neg(self.rng.copy_of(columns)),
            5 => {
                let p = self.pred(columns, with_s, 1);
                IntExpr::Case(Box::new(p), self.operand(columns), self.operand(columns))
            }
            6 => IntExpr::Coalesce(self.rng.copy_of(columns), self.rng.range(-5, 5)),
            7 if with_s => IntExpr::Length,
            _ => IntExpr::Subquery(self.int_value()),
        }
    }

    fn pred(&mut self, columns: &[&'static str], with_s: bool, depth: u32) -> Pred {
        if depth > 0 && self.rng.chance(30) {
            let a = Box::new(self.pred(columns, with_s, depth - 1));
            return match self.rng.below(3) {
                0 => Pred::Not(a),
                1 => Pred::And(a, Box::new(self.pred(columns, with_s, depth - 1))),
                _ => Pred::Or(a, Box::new(self.pred(columns, with_s, depth - 1))),
            };
        }
        let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
        let column = *self.rng.pick(columns);
        match self.rng.below(if with_s { 10 } else { 7 }) {
            0..=1 => Pred::Cmp(
                Operand::Col(column),
                *self.rng.pick(&ops),
                Operand::Lit(self.rng.range(-5, KEY_SPACE)),
            ),
            2 => Pred::Cmp(Operand::Col(column), *self.rng.pick(&ops), self.operand(columns)),
            3 => Pred::IsNull(column, self.rng.chance(50)),
            4 => {
                let lo = self.rng.range(-5, KEY_SPACE);
                Pred::Between(column, lo, lo + self.rng.range(0, 20))
            }
            5 => Pred::In(
                column,
                (0..1 + self.rng.below(5)).map(|_| self.rng.range(-3, 30)).collect(),
            ),
            6 => Pred::Const(*self.rng.pick(&[Some(true), Some(false), None])),
            7 => Pred::IsNull("s", self.rng.chance(50)),
            8 => Pred::Like(self.rng.pick(&["a", "ab", "M", "x", ""]).to_string()),
            _ => Pred::TextCmp(*self.rng.pick(&ops), self.rng.pick(self.texts).clone()),
        }
    }

    fn pred_b(&mut self) -> Pred {
        if self.rng.chance(20) {
            let (text, v) = *self.rng.pick(DOUBLES);
            return Pred::DoubleGt(text, v);
        }
        self.pred(&["id", "k"], false, 2)
    }

    fn text_expr(&mut self) -> TextExpr {
        match self.rng.below(6) {
            0 => TextExpr::Lit(self.text_value()),
            1 => TextExpr::Concat(
                self.rng.pick(&["!", "", "ü", "''"]).to_string(),
                self.rng.chance(50),
            ),
            2 => TextExpr::Upper,
            3 => TextExpr::Lower,
            4 => TextExpr::FromInt(self.rng.copy_of(&["id", "x", "y"])),
            _ => TextExpr::Lit(Some(self.rng.pick(self.texts).clone())),
        }
    }

    fn update_a(&mut self) -> PlannedWrite {
        let columns = ["id", "x", "y"];
        let mut sets: Vec<(&str, Result<IntExpr, TextExpr>)> = Vec::new();
        let mut targets = vec!["x", "y", "s"];
        for _ in 0..1 + self.rng.below(2) {
            let target = targets.remove(self.rng.below(targets.len()));
            let expr = match target {
                "s" => Err(self.text_expr()),
                _ => Ok(self.int_expr(&columns, true)),
            };
            sets.push((target, expr));
        }
        let pred = if self.rng.chance(8) { None } else { Some(self.pred(&columns, true, 2)) };
        let assignments: Vec<String> = sets
            .iter()
            .map(|(c, e)| match e {
                Ok(e) => format!("{c} = {}", e.sql()),
                Err(e) => format!("{c} = {}", e.sql()),
            })
            .collect();
        let mut sql = format!("UPDATE fz_a SET {}", assignments.join(", "));
        if let Some(p) = &pred {
            write!(sql, " WHERE {}", p.sql()).unwrap();
        }
        let ids = matching(&self.model.a, pred.as_ref(), RowRef::of_a);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let old = &self.model.a[id];
                let row = RowRef::of_a(*id, old);
                let mut new = old.clone();
                for (c, e) in &sets {
                    match (c, e) {
                        (_, Err(e)) => new.s = e.eval(&row),
                        (c, Ok(e)) => {
                            let v = e.eval(&row)?;
                            if v.is_some_and(|v| !is_int4(v)) {
                                return Err("integer out of range");
                            }
                            if *c == "x" { new.x = v } else { new.y = v }
                        }
                    }
                }
                next.a.insert(*id, new);
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    /// `UPDATE fz_a SET id = .. WHERE id = ..`: moves one row to another key.
    fn update_a_key(&mut self) -> PlannedWrite {
        let old = match self.model.a.keys().nth(self.rng.below(self.model.a.len().max(1))) {
            Some(id) if self.rng.chance(85) => *id,
            _ => self.rng.range(0, KEY_SPACE),
        };
        let (new_sql, new) = match self.rng.below(4) {
            0 => {
                let delta = *self.rng.pick(&[1, 100, -1, INT4_MAX]);
                (format!("id + {}", Operand::Lit(delta).sql()), Some(old + delta))
            }
            1 => ("NULL".to_owned(), None),
            _ => {
                let v = self.key();
                (IntExpr::Lit(v).sql(), v)
            }
        };
        let sql = format!("UPDATE fz_a SET id = {new_sql} WHERE id = {old}");
        let mut next = self.model.clone();
        let Some(row) = next.a.remove(&old) else {
            return PlannedWrite { sql, expect: Expect::Ok { next: self.model.clone(), count: 0 } };
        };
        let expect = match new {
            None => Err("null value in the primary key"),
            Some(new) if !is_int4(new) => Err("integer out of range"),
            Some(new) if next.a.contains_key(&new) => Err("duplicate key"),
            Some(new) => {
                next.a.insert(new, row);
                Ok(())
            }
        };
        PlannedWrite { sql, expect: outcome(expect, next, 1) }
    }

    fn update_b(&mut self) -> PlannedWrite {
        let columns = ["id", "k"];
        let set_k = self.rng.chance(50);
        let set_v = !set_k || self.rng.chance(40);
        let k_expr = self.int_expr(&columns, false);
        let v_expr = match self.rng.below(6) {
            0 => DoubleExpr::Lit(if self.rng.chance(15) {
                None
            } else {
                Some(*self.rng.pick(DOUBLES))
            }),
            1 => {
                let (text, c) = *self.rng.pick(&[("1.5", 1.5), ("-0.25", -0.25), ("100", 100.0)]);
                DoubleExpr::Add(text, c)
            }
            2 => {
                let (text, c) = *self.rng.pick(&[("2", 2.0), ("-1", -1.0), ("0.5", 0.5)]);
                DoubleExpr::Mul(text, c)
            }
            3 => DoubleExpr::Neg,
            _ => DoubleExpr::FromK,
        };
        let mut assignments = Vec::new();
        if set_k {
            assignments.push(format!("k = {}", k_expr.sql()));
        }
        if set_v {
            assignments.push(format!("v = {}", v_expr.sql()));
        }
        let pred = if self.rng.chance(8) { None } else { Some(self.pred_b()) };
        let mut sql = format!("UPDATE fz_b SET {}", assignments.join(", "));
        if let Some(p) = &pred {
            write!(sql, " WHERE {}", p.sql()).unwrap();
        }
        let ids = matching(&self.model.b, pred.as_ref(), RowRef::of_b);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let old = &self.model.b[id];
                let row = RowRef::of_b(*id, old);
                let mut new = old.clone();
                if set_k {
                    new.k = k_expr.eval(&row)?;
                    if new.k.is_some_and(|k| !is_int4(k)) {
                        return Err("integer out of range");
                    }
                }
                if set_v {
                    new.v = v_expr.eval(&row)?;
                }
                next.b.insert(*id, new);
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    fn delete_a(&mut self) -> PlannedWrite {
        let pred =
            if self.rng.chance(3) { None } else { Some(self.pred(&["id", "x", "y"], true, 2)) };
        let ids = matching(&self.model.a, pred.as_ref(), RowRef::of_a);
        let mut next = self.model.clone();
        for id in &ids {
            next.a.remove(id);
        }
        let sql = match &pred {
            Some(p) => format!("DELETE FROM fz_a WHERE {}", p.sql()),
            None => "DELETE FROM fz_a".to_owned(),
        };
        PlannedWrite { sql, expect: Expect::Ok { next, count: ids.len() as u64 } }
    }

    fn delete_b(&mut self) -> PlannedWrite {
        let pred = self.pred_b();
        let ids = matching(&self.model.b, Some(&pred), RowRef::of_b);
        let mut next = self.model.clone();
        for id in &ids {
            next.b.remove(id);
        }
        let sql = format!("DELETE FROM fz_b WHERE {}", pred.sql());
        PlannedWrite { sql, expect: Expect::Ok { next, count: ids.len() as u64 } }
    }

    /// NULL in every position Postgres allows one (and in the key, where it does not).
    fn nulls_everywhere(&mut self) -> PlannedWrite {
        match self.rng.below(4) {
            0 => PlannedWrite {
                sql: "INSERT INTO fz_a VALUES (NULL, NULL, NULL, NULL)".into(),
                expect: Expect::Fail("null value in the primary key"),
            },
            1 => PlannedWrite {
                sql: "UPDATE fz_a SET x = NULL, y = NULL, s = NULL WHERE NULL".into(),
                expect: Expect::Ok { next: self.model.clone(), count: 0 },
            },
            2 => {
                let id = self.rng.range(0, KEY_SPACE);
                let sql = format!(
                    "INSERT INTO fz_a (id, x, y, s) VALUES ({id}, (SELECT NULL), NULL, (SELECT NULL))"
                );
                let mut next = self.model.clone();
                let fresh = next.a.insert(id, ARow { x: None, y: None, s: None }).is_none();
                let expect = if fresh { Ok(()) } else { Err("duplicate key") };
                PlannedWrite { sql, expect: outcome(expect, next, 1) }
            }
            _ => {
                let id = self.rng.range(0, KEY_SPACE);
                let sql = format!("INSERT INTO fz_b (id) VALUES ({id})");
                let mut next = self.model.clone();
                let fresh = next.b.insert(id, BRow { k: None, v: None }).is_none();
                let expect = if fresh { Ok(()) } else { Err("duplicate key") };
                PlannedWrite { sql, expect: outcome(expect, next, 1) }
            }
        }
    }
}

fn outcome(result: Result<(), Fail>, next: Model, count: usize) -> Expect {
    match result {
        Ok(()) => Expect::Ok { next, count: count as u64 },
        Err(why) => Expect::Fail(why),
    }
}

/// A SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Reads the oracle tables' rows (as `SELECT_A` / `SELECT_B` return them) into a model.
fn parse_model(a: &[Vec<Option<String>>], b: &[Vec<Option<String>>]) -> anyhow::Result<Model> {
    let int = |v: &Option<String>| -> anyhow::Result<Option<i64>> {
        v.as_deref().map(|t| t.parse::<i64>().map_err(|e| anyhow!("{t:?}: {e}"))).transpose()
    };
    let mut model = Model::default();
    for row in a {
        ensure!(row.len() == 4, "fz_a row of {} columns", row.len());
        let id = int(&row[0])?.ok_or_else(|| anyhow!("NULL key in fz_a"))?;
        let new = ARow { x: int(&row[1])?, y: int(&row[2])?, s: row[3].clone() };
        ensure!(model.a.insert(id, new).is_none(), "fz_a returned key {id} twice");
    }
    for row in b {
        ensure!(row.len() == 3, "fz_b row of {} columns", row.len());
        let id = int(&row[0])?.ok_or_else(|| anyhow!("NULL key in fz_b"))?;
        let v = row[2]
            .as_deref()
            .map(|t| t.parse::<f64>().map_err(|e| anyhow!("{t:?}: {e}")))
            .transpose()?;
        ensure!(
            model.b.insert(id, BRow { k: int(&row[1])?, v }).is_none(),
            "fz_b returned key {id} twice"
        );
    }
    Ok(model)
}

/// How `found` differs from `expected`, briefly.
fn model_diff(expected: &Model, found: &Model) -> String {
    fn side<R: PartialEq + std::fmt::Debug>(
        name: &str,
        expected: &BTreeMap<i64, R>,
        found: &BTreeMap<i64, R>,
    ) -> Option<String> {
        let missing: Vec<String> = expected
            .iter()
            .filter(|(id, _)| !found.contains_key(id))
            .map(|(id, r)| format!("{id}: {r:?}"))
            .collect();
        let extra: Vec<String> = found
            .iter()
            .filter(|(id, _)| !expected.contains_key(id))
            .map(|(id, r)| format!("{id}: {r:?}"))
            .collect();
        let changed: Vec<String> = expected
            .iter()
            .filter_map(|(id, r)| match found.get(id) {
                Some(f) if f != r => Some(format!("{id}: expected {r:?}, found {f:?}")),
                _ => None,
            })
            .collect();
        if missing.is_empty() && extra.is_empty() && changed.is_empty() {
            return None;
        }
        let few = |v: &[String]| v.iter().take(3).map(|s| clip(s, 120)).collect::<Vec<_>>();
        Some(format!(
            "{name}: {} missing {:?}, {} unexpected {:?}, {} different {:?}",
            missing.len(),
            few(&missing),
            extra.len(),
            few(&extra),
            changed.len(),
            few(&changed)
        ))
    }
    [side("fz_a", &expected.a, &found.a), side("fz_b", &expected.b, &found.b)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

// ------------------------------------------------------------------------------------------
// Random expressions of every type

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    BigInt,
    Numeric,
    Double,
    Text,
    Date,
    Bool,
}

impl Ty {
    const ALL: [Ty; 7] =
        [Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text, Ty::Date, Ty::Bool];

    fn sql(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::BigInt => "bigint",
            Ty::Numeric => "numeric",
            Ty::Double => "double precision",
            Ty::Text => "varchar",
            Ty::Date => "date",
            Ty::Bool => "boolean",
        }
    }

    fn is_number(self) -> bool {
        matches!(self, Ty::Int | Ty::BigInt | Ty::Numeric | Ty::Double)
    }
}

/// A column an expression may use: its SQL name and type (`None` for types expressions do
/// not generate: timestamps, jsonb, bytea).
type Col = (String, Option<Ty>);

/// Random typed SQL expressions.
struct ExprGen<'a> {
    rng: &'a mut Rng,
    cols: &'a [Col],
    /// Whether scalar subqueries may appear (views do not support them).
    scalar_subqueries: bool,
}

impl ExprGen<'_> {
    fn any_ty(&mut self) -> Ty {
        *self.rng.pick(&Ty::ALL)
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        if depth == 0 || self.rng.chance(20) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Int | Ty::BigInt | Ty::Numeric | Ty::Double => match self.rng.below(12) {
                0..=3 => {
                    let op = *self.rng.pick(&["+", "-", "*", "/", "%"]);
                    format!("({} {op} {})", self.expr(ty, d), self.expr(ty, d))
                }
                4 => format!("(- {})", self.expr(ty, d)),
                5 | 6 => self.cast(ty, d),
                7 => self.case(ty, d),
                8 => {
                    let f = *self.rng.pick(&["coalesce", "nullif"]);
                    format!("{f}({}, {})", self.expr(ty, d), self.expr(ty, d))
                }
                9 => match ty {
                    Ty::Int | Ty::BigInt => {
                        let f = *self.rng.pick(&["length", "char_length", "octet_length"]);
                        format!("{f}({})", self.expr(Ty::Text, d))
                    }
                    Ty::Numeric => {
                        format!("round({}, {})", self.expr(ty, d), self.rng.range(-2, 4))
                    }
                    _ => {
                        let f = *self.rng.pick(&["abs", "sqrt", "ceil", "floor", "ln", "exp"]);
                        format!("{f}({})", self.expr(ty, d))
                    }
                },
                10 => format!("abs({})", self.expr(ty, d)),
                _ if self.scalar_subqueries => format!("(SELECT {})", self.expr(ty, d)),
                _ => self.leaf(ty),
            },
            Ty::Text => match self.rng.below(11) {
                0..=1 => format!("({} || {})", self.expr(Ty::Text, d), self.expr(Ty::Text, d)),
                2 => {
                    let f =
                        *self.rng.pick(&["upper", "lower", "trim", "reverse", "btrim", "initcap"]);
                    format!("{f}({})", self.expr(Ty::Text, d))
                }
                3 => format!(
                    "substr({}, {}, {})",
                    self.expr(Ty::Text, d),
                    self.expr(Ty::Int, d.min(1)),
                    self.expr(Ty::Int, d.min(1))
                ),
                4 | 5 => self.cast(ty, d),
                6 => self.case(ty, d),
                7 => format!("coalesce({}, {})", self.expr(Ty::Text, d), self.expr(Ty::Text, d)),
                8 => format!(
                    "replace({}, {}, {})",
                    self.expr(Ty::Text, d),
                    self.expr(Ty::Text, 0),
                    self.expr(Ty::Text, 0)
                ),
                9 => {
                    let f = *self.rng.pick(&["left", "right"]);
                    format!("{f}({}, {})", self.expr(Ty::Text, d), self.rng.range(-3, 5))
                }
                _ => {
                    let ty = self.any_ty_no_bool();
                    format!("concat({}, {})", self.expr(ty, d), self.expr(Ty::Text, d))
                }
            },
            Ty::Date => match self.rng.below(4) {
                0 => format!("({} + {})", self.expr(Ty::Date, d), self.expr(Ty::Int, d.min(1))),
                1 => self.cast(ty, d),
                2 => self.case(ty, d),
                _ => format!("coalesce({}, {})", self.expr(Ty::Date, d), self.expr(Ty::Date, d)),
            },
            Ty::Bool => match self.rng.below(12) {
                0..=3 => {
                    let (a, b) = self.comparable_pair();
                    let op = *self.rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
                    format!("({} {op} {})", self.expr(a, d), self.expr(b, d))
                }
                4 => {
                    let op = *self.rng.pick(&["AND", "OR"]);
                    format!("({} {op} {})", self.expr(Ty::Bool, d), self.expr(Ty::Bool, d))
                }
                5 => format!("(NOT {})", self.expr(Ty::Bool, d)),
                6 => {
                    let t = self.any_ty();
                    let not = if self.rng.chance(50) { " NOT" } else { "" };
                    format!("({} IS{not} NULL)", self.expr(t, d))
                }
                7 => {
                    let (a, b) = self.comparable_pair();
                    format!(
                        "({} BETWEEN {} AND {})",
                        self.expr(a, d),
                        self.expr(b, d.min(1)),
                        self.expr(b, d.min(1))
                    )
                }
                8 => {
                    let (a, b) = self.comparable_pair();
                    let items: Vec<String> =
                        (0..1 + self.rng.below(4)).map(|_| self.expr(b, 0)).collect();
                    format!("({} IN ({}))", self.expr(a, d), items.join(", "))
                }
                9 => {
                    let pattern = *self.rng.pick(&["'a%'", "'%b%'", "'_'", "'%'", "''", "'%\\%'"]);
                    let not = if self.rng.chance(30) { " NOT" } else { "" };
                    format!("({}{not} LIKE {pattern})", self.expr(Ty::Text, d))
                }
                10 => {
                    let (a, b) = self.comparable_pair();
                    format!("({} IS DISTINCT FROM {})", self.expr(a, d), self.expr(b, d))
                }
                _ => self.cast(ty, d),
            },
        }
    }

    fn any_ty_no_bool(&mut self) -> Ty {
        *self.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text, Ty::Date])
    }

    /// Two types to compare: mostly equal or both numbers, sometimes anything.
    fn comparable_pair(&mut self) -> (Ty, Ty) {
        let a = self.any_ty();
        let b = match self.rng.below(10) {
            0..=5 => a,
            6..=8 if a.is_number() => {
                *self.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double])
            }
            _ => self.any_ty(),
        };
        (a, b)
    }

    fn cast(&mut self, ty: Ty, depth: u32) -> String {
        let from = self.any_ty();
        let inner = self.expr(from, depth);
        if self.rng.chance(30) {
            format!("{inner}::{}", ty.sql())
        } else {
            format!("CAST({inner} AS {})", ty.sql())
        }
    }

    fn case(&mut self, ty: Ty, depth: u32) -> String {
        let when = self.expr(Ty::Bool, depth);
        let then = self.expr(ty, depth);
        if self.rng.chance(30) {
            return format!("CASE WHEN {when} THEN {then} END");
        }
        format!("CASE WHEN {when} THEN {then} ELSE {} END", self.expr(ty, depth))
    }

    fn leaf(&mut self, ty: Ty) -> String {
        let matching: Vec<&String> =
            self.cols.iter().filter(|(_, t)| *t == Some(ty)).map(|(n, _)| n).collect();
        if !matching.is_empty() && self.rng.chance(60) {
            return (*self.rng.pick(&matching)).clone();
        }
        literal(self.rng, ty)
    }
}

/// A literal of `ty`, with NULLs and extremes.
fn literal(rng: &mut Rng, ty: Ty) -> String {
    if rng.chance(10) {
        return if rng.chance(50) { "NULL".into() } else { format!("CAST(NULL AS {})", ty.sql()) };
    }
    let extreme = rng.chance(12);
    match ty {
        Ty::Int if extreme => rng.pick(&["2147483647", "(-2147483648)", "0"]).to_string(),
        Ty::Int => rng.range(-10, 100).to_string(),
        Ty::BigInt if extreme => rng
            .pick(&["9223372036854775807", "(-9223372036854775807)", "CAST(3000000000 AS bigint)"])
            .to_string(),
        Ty::BigInt => format!("CAST({} AS bigint)", rng.range(-1000, 1000)),
        Ty::Numeric if extreme => rng
            .pick(&["99999999999999999999999999999999999999", "0.000000000000000000001", "1e-30"])
            .to_string(),
        Ty::Numeric => rng.pick(&["1.5", "0.001", "-12345.678", "2.50", "0.0", "7"]).to_string(),
        Ty::Double if extreme => rng
            .pick(&[
                "CAST('1e308' AS double precision)",
                "CAST('NaN' AS double precision)",
                "CAST('-Infinity' AS double precision)",
                "CAST(5e-324 AS double precision)",
            ])
            .to_string(),
        Ty::Double => {
            format!("CAST({} AS double precision)", rng.pick(&["1.5", "0.25", "-3", "100.125"]))
        }
        Ty::Text if extreme => {
            rng.pick(&["repeat('ab', 300)", "'é日本🦀'", "'2147483648'", "''"]).to_string()
        }
        Ty::Text => rng
            .pick(&[
                "'abc'",
                "'A'",
                "'it''s'",
                "'12'",
                "' 42 '",
                "'2024-02-29'",
                "'true'",
                "'NaN'",
                "'1.5'",
            ])
            .to_string(),
        Ty::Date if extreme => rng
            .pick(&["DATE '0001-01-01'", "DATE '9999-12-31'", "CAST('4713-01-01 BC' AS date)"])
            .to_string(),
        Ty::Date => rng
            .pick(&["DATE '2024-02-29'", "DATE '1970-01-01'", "CAST('2000-01-01' AS date)"])
            .to_string(),
        Ty::Bool => rng.pick(&["true", "false"]).to_string(),
    }
}

// ------------------------------------------------------------------------------------------
// Hostile statements

/// What identifies a hostile statement's template and size: its length and start.
fn hostile_key(statements: &[String]) -> (usize, String) {
    let first = statements.first().map_or("", String::as_str);
    (first.len(), first.chars().take(40).collect())
}

/// A deliberately extreme statement (or a short sequence, run in order).
fn hostile(rng: &mut Rng) -> Vec<String> {
    let n = |rng: &mut Rng, sizes: &[usize]| *rng.pick(sizes);
    match rng.below(14) {
        0 => {
            let terms = n(rng, &[500, 3000, 10_000]);
            let ors: Vec<String> = (0..terms).map(|i| format!("x = {i}")).collect();
            vec![format!("SELECT count(*) FROM fz_a WHERE {}", ors.join(" OR "))]
        }
        1 => {
            let depth = n(rng, &[16, 48, 200]);
            let types = ["int", "bigint", "varchar", "numeric", "double precision", "int"];
            let mut e = "1".to_owned();
            for i in 0..depth {
                e = format!("CAST({e} AS {})", types[i % types.len()]);
            }
            vec![format!("SELECT {e}")]
        }
        2 => {
            let depth = n(rng, &[100, 1000, 5000]);
            vec![format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth))]
        }
        3 => {
            let terms = n(rng, &[1000, 10_000]);
            vec![format!("SELECT 1{}", " + 1".repeat(terms))]
        }
        4 => {
            let depth = n(rng, &[50, 300]);
            let mut e = "0".to_owned();
            for i in 0..depth {
                e = format!("CASE WHEN x > {i} THEN {e} ELSE {i} END");
            }
            vec![format!("SELECT {e} FROM fz_a")]
        }
        5 => {
            let digits = n(rng, &[40, 400, 5000]);
            let lit = "9".repeat(digits);
            vec![
                rng.pick(&[
                    format!("SELECT {lit}"),
                    format!("SELECT {lit} + 1"),
                    format!("SELECT CAST({lit} AS int)"),
                    format!("SELECT 1e{digits}"),
                    format!("SELECT x FROM fz_a WHERE x = {lit}"),
                ])
                .clone(),
            ]
        }
        6 => {
            let len = n(rng, &[100_000, 1_000_000]);
            vec![format!("SELECT length('{}')", "x".repeat(len))]
        }
        7 => vec![
            rng.pick(&[
                "SELECT NULL + NULL, NULL || NULL, NULL = NULL, CASE NULL WHEN NULL THEN NULL END, \
                 coalesce(NULL, NULL), NULL::int / NULL::int, nullif(NULL, NULL), NOT NULL, \
                 NULL AND NULL, - NULL::int",
                "SELECT max(NULL), min(NULL), count(NULL), sum(NULL::int), avg(NULL::int) FROM fz_a",
                "SELECT NULL FROM fz_a WHERE NULL GROUP BY NULL",
                "SELECT * FROM fz_a a JOIN fz_b b ON NULL",
                "SELECT NULL IN (NULL), NULL BETWEEN NULL AND NULL, NULL LIKE NULL, NULL IS DISTINCT FROM NULL",
                "SELECT CAST(NULL AS date) + NULL::int, upper(NULL), substr(NULL, NULL, NULL)",
                "SELECT x / NULL, NULL % x FROM fz_a",
            ])
            .to_string(),
        ],
        8 => {
            let items = n(rng, &[1000, 20_000]);
            let list: Vec<String> = (0..items).map(|i| i.to_string()).collect();
            vec![format!("SELECT count(*) FROM fz_a WHERE x IN ({})", list.join(", "))]
        }
        9 => {
            let cols = n(rng, &[1000, 5000]);
            let items: Vec<String> = (0..cols).map(|i| format!("{i} AS c{i}")).collect();
            vec![format!("SELECT {}", items.join(", "))]
        }
        10 => {
            let depth = n(rng, &[20, 100, 500]);
            vec![format!("SELECT {}1{}", "(SELECT ".repeat(depth), ")".repeat(depth))]
        }
        11 => {
            let depth = n(rng, &[100, 3000]);
            vec![
                rng.pick(&[
                    format!("SELECT {}true", "NOT ".repeat(depth)),
                    format!("SELECT {}1", "- ".repeat(depth)),
                ])
                .clone(),
            ]
        }
        12 => {
            let name = rng
                .pick(&[
                    format!("\"fz weird \"\"q\"\" {}\"", "名"),
                    format!("fz_{}", "l".repeat(100)),
                    "\"FZ_Upper\"".to_owned(),
                ])
                .clone();
            vec![
                format!("CREATE TABLE {name} (\"select\" int PRIMARY KEY, \"a b\" varchar)"),
                format!("INSERT INTO {name} VALUES (1, 'x'), (2, NULL)"),
                format!("SELECT \"a b\", count(*) FROM {name} GROUP BY \"a b\""),
                format!("DROP TABLE {name}"),
            ]
        }
        _ => {
            let depth = n(rng, &[30, 200, 2000]);
            let mut e = "x".to_owned();
            for i in 0..depth {
                e = format!("({e} + {})", i % 3);
            }
            vec![
                format!("CREATE MATERIALIZED VIEW fz_hostile AS SELECT id, {e} AS deep FROM fz_a"),
                "SELECT count(*) FROM fz_hostile".to_owned(),
                "DROP MATERIALIZED VIEW fz_hostile".to_owned(),
            ]
        }
    }
}

// ------------------------------------------------------------------------------------------
// Mutations of the `.slt` statements

/// Every statement of `sql_tests/**/*.slt`, in file order, except `WAIT` (which waits for
/// every creating job, and a mutated rate limit of 0 legitimately pauses one forever) and
/// `CANCEL` (which could cancel the fuzzer's own background views by id).
fn slt_corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql_tests");
    let mut files = Vec::new();
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read sql_tests") {
            let path: PathBuf = entry.expect("read a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "slt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut corpus = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read an .slt file");
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !(line.starts_with("statement ") || line.starts_with("query ")) {
                continue;
            }
            let sql: Vec<&str> =
                lines.by_ref().take_while(|l| !l.trim().is_empty() && *l != "----").collect();
            let sql = sql.join("\n");
            let first = sql.split_whitespace().next().unwrap_or("").to_uppercase();
            if !sql.is_empty() && first != "WAIT" && first != "CANCEL" {
                corpus.push(sql);
            }
        }
    }
    corpus
}

#[derive(Clone)]
struct Tok {
    text: String,
    /// Whether whitespace preceded it, so an unmutated statement is rebuilt unchanged.
    space: bool,
}

fn tokenize(sql: &str) -> Vec<Tok> {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut space = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            space = true;
            i += 1;
            continue;
        }
        let start = i;
        if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() {
                if chars[i] == c {
                    if chars.get(i + 1) == Some(&c) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if "<>=!|:".contains(c) {
            while i < chars.len() && "<>=!|:".contains(chars[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
        tokens.push(Tok { text: chars[start..i].iter().collect(), space });
        space = false;
    }
    tokens
}

fn untokenize(tokens: &[Tok]) -> String {
    let mut sql = String::new();
    for t in tokens {
        if t.space && !sql.is_empty() {
            sql.push(' ');
        }
        sql.push_str(&t.text);
    }
    sql
}

const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "JOIN",
    "LEFT",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "UNION",
    "ALL",
    "DISTINCT",
    "AS",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "int",
    "bigint",
    "varchar",
    "numeric",
    "date",
    "boolean",
    "true",
    "false",
    "IS",
    "IN",
    "BETWEEN",
    "LIKE",
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "coalesce",
    "VALUES",
    "INSERT",
    "INTO",
    "UPDATE",
    "SET",
    "DELETE",
    "TABLE",
    "MATERIALIZED",
    "VIEW",
    "CREATE",
    "DROP",
    "CASCADE",
    "PRIMARY",
    "KEY",
    "EXISTS",
    "WITH",
    "HAVING",
    "OFFSET",
    "FLUSH",
    "EXPLAIN",
];

const INSERTABLE: &[&str] = &[
    "NULL",
    "(",
    ")",
    ",",
    "*",
    "-",
    "+",
    "::int",
    "::varchar",
    "'x'",
    "0",
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "CASE",
    "END",
    "||",
    ";",
    "=",
    "IS",
    "DISTINCT",
    "ALL",
    "/",
];

const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e308",
    "1e-320",
    "1e400",
    "99999999999999999999999999999999999999.99",
    "0.0000000000000000000000000001",
    "NULL",
    "'NaN'",
    "-0",
];

/// Numbers for statements that generate rows (`generate_series`): an extreme bound there
/// would only ask for billions of rows.
const SMALL_NUMBERS: &[&str] = &["0", "1", "-1", "2", "7", "13", "NULL", "100"];

const HOSTILE_STRINGS: &[&str] = &[
    "''",
    "'NaN'",
    "'-Infinity'",
    "'2147483648'",
    "'1970-01-01'",
    "'99999-12-31'",
    "'é日本🦀'",
    "'{\"a\": [1, {\"b\": null}]}'",
    "'\\x00ff'",
    "'it''s'",
    "' 1 '",
];

fn mutate(rng: &mut Rng, sql: &str, words: &[String]) -> String {
    let mut toks = tokenize(sql);
    let rows_generator = sql.to_lowercase().contains("generate_series");
    let numbers = if rows_generator { SMALL_NUMBERS } else { EXTREME_NUMBERS };
    for _ in 0..1 + rng.below(3) {
        if toks.is_empty() {
            break;
        }
        let i = rng.below(toks.len());
        let of_kind = |toks: &[Tok], f: fn(&str) -> bool| -> Vec<usize> {
            (0..toks.len()).filter(|&j| f(&toks[j].text)).collect()
        };
        match rng.below(11) {
            0 => {
                toks.remove(i);
            }
            1 => {
                let mut t = toks[i].clone();
                t.space = true;
                toks.insert(i, t);
            }
            2 => {
                let j = rng.below(toks.len());
                let (a, b) = (toks[i].text.clone(), toks[j].text.clone());
                toks[i].text = b;
                toks[j].text = a;
            }
            3 => {
                let nums = of_kind(&toks, |t| t.starts_with(|c: char| c.is_ascii_digit()));
                let j = if nums.is_empty() { i } else { *rng.pick(&nums) };
                toks[j].text = rng.pick(numbers).to_string();
            }
            4 => {
                let strings = of_kind(&toks, |t| t.starts_with('\''));
                let j = if strings.is_empty() { i } else { *rng.pick(&strings) };
                toks[j].text = if rng.chance(10) {
                    format!("'{}'", "z".repeat(10_000))
                } else {
                    rng.pick(HOSTILE_STRINGS).to_string()
                };
            }
            5 => {
                let idents =
                    of_kind(&toks, |t| t.starts_with(|c: char| c.is_alphabetic() || c == '_'));
                let j = if idents.is_empty() { i } else { *rng.pick(&idents) };
                toks[j].text = if rng.chance(50) && !words.is_empty() {
                    rng.pick(words).clone()
                } else {
                    rng.pick(KEYWORDS).to_string()
                };
            }
            6 => toks.truncate(i.max(1)),
            7 => toks.insert(i, Tok { text: rng.pick(INSERTABLE).to_string(), space: true }),
            8 if !rows_generator => {
                let ty = *rng.pick(&Ty::ALL);
                let mut g = ExprGen { rng: &mut *rng, cols: &[], scalar_subqueries: true };
                toks[i].text = format!("({})", g.expr(ty, 2));
            }
            _ => {
                let ty = rng.pick(&Ty::ALL).sql();
                toks[i].text = format!("CAST({} AS {ty})", toks[i].text);
            }
        }
    }
    untokenize(&toks)
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

    fn client(&self, session: Session) -> &Client {
        match session {
            Session::Main => &self.main,
            Session::Scratch => &self.scratch,
        }
    }

    /// Runs one statement with a timeout, records its outcome, and recovers the session (or
    /// the server) when there is no reply. A statement that fails with 40001 (its changes were
    /// discarded by a recovery of the streaming jobs: "run it again") runs again once the
    /// recovery is over, up to [`ATTEMPTS`] times in all.
    async fn exec(&mut self, session: Session, source: Source, sql: &str) -> Reply {
        let mut attempt = 1;
        loop {
            let reply = self.exec_once(session, source, sql).await;
            match reply {
                Reply::Failed { ref code, ref message }
                    if code == "40001" && attempt < ATTEMPTS =>
                {
                    // The fuzzer runs one statement at a time, so only a recovery after an
                    // actor failure can discard a statement's changes.
                    let events = "SELECT count(*) FROM rw_catalog.rw_recovery_events";
                    if let Reply::Rows { rows, .. } =
                        self.exec_once(Session::Main, Source::Check, events).await
                        && rows.first().and_then(|r| r[0].as_deref()) == Some("0")
                    {
                        let message = format!(
                            "40001 (\"run it again\") although no recovery of the streaming jobs happened | {message}"
                        );
                        self.find(Kind::SpuriousRetry, source, sql, code, &message);
                    }
                    attempt += 1;
                    self.stats.retried += 1;
                    self.wait_recovered().await;
                }
                reply => return reply,
            }
        }
    }

    /// Waits until no recovery of the streaming jobs is in progress.
    async fn wait_recovered(&mut self) {
        let client = &self.main;
        let timeout = self.statement_timeout;
        let sql = "SELECT count(*) FROM rw_catalog.rw_recovery_events WHERE NOT recovered";
        let over = retry_until(RECOVERY_TIMEOUT, || async move {
            let rows = match tokio::time::timeout(timeout, harness::text_rows(client, sql)).await? {
                Ok(rows) => rows,
                // A build without recovery events has nothing to wait for.
                Err(e) if sqlstate(&e) == Some("42P01") => return Ok(()),
                Err(e) => return Err(e),
            };
            let pending = rows.first().and_then(|r| r[0].clone());
            ensure!(pending.as_deref() == Some("0"), "{pending:?} recoveries in progress");
            Ok(())
        })
        .await;
        if let Err(error) = over {
            let message = format!("a recovery of the streaming jobs never finished | {error:#}");
            self.find(Kind::Timeout, Source::Check, sql, "", &clip(&message, 300));
            let views = self.view_definitions();
            if let Some(finding) = self.findings.last_mut() {
                finding.reads = views;
            }
            // A job that fails again at every rebuild is most likely a view's: drop them all
            // before the next statement, or every write waits here.
            self.drop_views = true;
        }
    }

    /// Reports the actor failures (recoveries of the streaming jobs) not reported yet.
    async fn scan_recoveries(&mut self) {
        let sql = "SELECT failed_at, error FROM rw_catalog.rw_recovery_events";
        let window =
            format!("(one of statements #{}..#{})", self.scanned_at, self.stats.statements);
        if let Reply::Rows { rows, .. } = self.exec_once(Session::Main, Source::Check, sql).await {
            for row in rows {
                let event =
                    (row[0].clone().unwrap_or_default(), row[1].clone().unwrap_or_default());
                if self.recoveries_seen.insert(event.clone()) {
                    let message = format!("an actor failed: {}", event.1);
                    self.find(Kind::ActorFailure, Source::Check, &window, "", &message);
                    let views = self.view_definitions();
                    if let Some(finding) = self.findings.last_mut() {
                        finding.reads = views;
                    }
                }
            }
        }
    }

    /// [`Fuzzer::exec`] without running the statement again after 40001.
    async fn exec_once(&mut self, session: Session, source: Source, sql: &str) -> Reply {
        let reply = self.exec_untraced(session, source, sql).await;
        if let Some(trace) = self.trace.as_mut() {
            use std::io::Write as _;
            let outcome = match &reply {
                Reply::Rows { rows, count } => format!("ok: {} rows, count {count:?}", rows.len()),
                Reply::Failed { code, message } => format!("error {code}: {message}"),
                Reply::Lost => "no reply".to_owned(),
            };
            let _ = writeln!(
                trace,
                "#{} [{}] {}\n    -> {outcome}",
                self.stats.statements,
                source.name(),
                clip(sql, 2000)
            );
        }
        reply
    }

    async fn exec_untraced(&mut self, session: Session, source: Source, sql: &str) -> Reply {
        self.stats.statements += 1;
        *self.stats.by_source.entry(source).or_default() += 1;
        let client = self.client(session);
        let token = client.cancel_token();
        let sent = Instant::now();
        let outcome = tokio::time::timeout(self.statement_timeout, client.simple_query(sql)).await;
        let waited = sent.elapsed();
        if waited > Duration::from_secs(1) {
            self.stats.over_a_second += 1;
        }
        if waited > self.stats.slowest.0 {
            self.stats.slowest = (waited, clip(sql, 200));
        }
        match outcome {
            Ok(Ok(messages)) => {
                self.stats.ok += 1;
                self.check_alive(source, sql).await;
                reply_of(messages)
            }
            Ok(Err(error)) => match error.as_db_error() {
                Some(db) => {
                    let code = db.code().code().to_owned();
                    let message = db.message().to_owned();
                    if code == "XX000" {
                        self.stats.internal += 1;
                        self.find(Kind::InternalError, source, sql, &code, &message);
                    } else {
                        *self.stats.expected.entry(code.clone()).or_default() += 1;
                    }
                    self.check_alive(source, sql).await;
                    Reply::Failed { code, message }
                }
                None => {
                    self.connection_failed(session, source, sql, &error.to_string()).await;
                    Reply::Lost
                }
            },
            Err(_elapsed) => {
                self.timed_out(token, source, sql).await;
                Reply::Lost
            }
        }
    }

    /// The exit status of the server if it exits within `deadline`.
    async fn exited_within(&mut self, deadline: Duration) -> Option<String> {
        let server = &mut self.server;
        retry_until(deadline, || {
            let running = server.ensure_running();
            async move {
                match running {
                    Ok(()) => Err(anyhow!("still running")),
                    Err(exit) => Ok(exit.to_string()),
                }
            }
        })
        .await
        .ok()
    }

    /// Why the last run exited: its exit status and the panic or abort lines of its log.
    fn crash_reason(&self, exit: &str) -> String {
        let log = self.server.current_run_log();
        let lines: Vec<&str> = log.get(self.log_scanned..).unwrap_or("").lines().collect();
        let markers = [
            "panicked at",
            "overflowed its stack",
            "fatal runtime error",
            "memory allocation",
            "SIGSEGV",
            "Aborted",
        ];
        let mut reason = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if markers.iter().any(|m| line.contains(m)) {
                reason.push(line.trim().to_owned());
                if line.contains("panicked at")
                    && let Some(next) = lines.get(i + 1)
                {
                    reason.push(next.trim().to_owned());
                }
            }
        }
        let status = exit.lines().next().unwrap_or(exit);
        if reason.is_empty() {
            status.to_owned()
        } else {
            format!("{} | {status}", reason.join(" / "))
        }
    }

    /// Panic messages the current run logged since the last call.
    fn new_panics(&mut self) -> Vec<String> {
        let log = self.server.current_run_log();
        let fresh = log.get(self.log_scanned..).unwrap_or("");
        let lines: Vec<&str> = fresh.lines().collect();
        let mut panics = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("panicked at") {
                let what = lines.get(i + 1).map_or("", |l| l.trim());
                panics.push(format!("{} {what}", line.trim()));
            }
        }
        self.log_scanned = log.len();
        self.scanned_at = self.stats.statements;
        panics
    }

    /// Reports the panics the server survived since the last scan.
    fn scan_log(&mut self) {
        let since = self.scanned_at;
        for panic in self.new_panics() {
            let window = format!("(one of statements #{since}..#{})", self.stats.statements);
            self.find(Kind::ServerPanic, Source::Check, &window, "", &panic);
        }
    }

    async fn check_alive(&mut self, source: Source, sql: &str) {
        if let Err(exit) = self.server.ensure_running() {
            let reason = self.crash_reason(&exit.to_string());
            self.find(Kind::ProcessExit, source, &format!("(after its reply) {sql}"), "", &reason);
            self.recover().await;
        }
    }

    async fn connection_failed(
        &mut self,
        session: Session,
        source: Source,
        sql: &str,
        error: &str,
    ) {
        // An exit closes every connection at once; give the process a moment to be reaped.
        match self.exited_within(Duration::from_secs(5)).await {
            Some(exit) => {
                let reason = self.crash_reason(&exit);
                self.find(Kind::ProcessExit, source, sql, "", &reason);
                self.recover().await;
            }
            None => {
                let panics = self.new_panics();
                let message = match panics.first() {
                    Some(panic) => format!("{error}: {panic}"),
                    None => error.to_owned(),
                };
                self.find(Kind::ConnectionLost, source, sql, "", &message);
                self.reconnect(session).await;
            }
        }
    }

    async fn timed_out(&mut self, token: CancelToken, source: Source, sql: &str) {
        if let Some(exit) = self.exited_within(Duration::ZERO).await {
            let reason = self.crash_reason(&exit);
            self.find(Kind::ProcessExit, source, sql, "", &reason);
        } else {
            let message = format!("no reply within {:?}", self.statement_timeout);
            self.find(Kind::Timeout, source, sql, "", &message);
            let _ = tokio::time::timeout(Duration::from_secs(5), token.cancel_query(NoTls)).await;
            if matches!(source, Source::Oracle | Source::View) {
                // A write or DDL stalls when a view downstream stops the checkpoints: name them
                // all, and drop them once the server is back, or every later write stalls too.
                let views = self.view_definitions();
                if let Some(finding) = self.findings.last_mut() {
                    finding.reads = views;
                }
                self.drop_views = true;
            }
        }
        // A stalled statement may still hold a table's write lock or both cores: start afresh
        // on the same data (the model accepts the statement having happened or not).
        self.recover().await;
    }

    /// Restarts the server on its data and reconnects both sessions.
    async fn recover(&mut self) {
        self.stats.restarts += 1;
        self.log_scanned = 0;
        self.recoveries_seen.clear();
        if let Err(error) = self.server.restart().await {
            // Why the last start failed: its error and panic lines, not the backtrace.
            let log = self.server.current_run_log();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("rror") || l.contains("panicked") || l.contains("fatal"))
                .take(4)
                .collect();
            let status = format!("{error}");
            let status = status.lines().next().unwrap_or_default();
            let message = format!("{status}: {}", lines.join(" / "));
            self.find(Kind::RestartFailed, Source::Check, "(restart)", "", &clip(&message, 800));
            // The catalog it failed on: every view of the fuzzer, in creation order.
            let views = self.view_definitions();
            if let Some(finding) = self.findings.last_mut() {
                finding.reads = views;
            }
            // Go on with a new server on a new data directory, so the run finds more.
            self.new_server().await;
            return;
        }
        match (self.server.connect().await, self.server.connect().await) {
            (Ok(main), Ok(scratch)) => {
                self.main = main;
                self.scratch = scratch;
                self.background_ddl = false;
            }
            (Err(error), _) | (_, Err(error)) => {
                self.find(
                    Kind::ConnectionLost,
                    Source::Check,
                    "(connect after restart)",
                    "",
                    &error.to_string(),
                );
                self.dead = true;
            }
        }
    }

    /// Forgets everything the fuzzer created: the server is a new one on an empty data
    /// directory, and [`Fuzzer::setup`] runs again before the next statement.
    fn fresh_world(&mut self) {
        self.model = Model::default();
        self.views.clear();
        self.scratch_tables.clear();
        self.scratch_ddl.clear();
        self.history.clear();
        self.verified_restarts = self.stats.restarts;
        self.needs_setup = true;
    }

    async fn reconnect(&mut self, session: Session) {
        match self.server.connect().await {
            Ok(client) => match session {
                Session::Main => {
                    self.main = client;
                    self.background_ddl = false;
                }
                Session::Scratch => self.scratch = client,
            },
            Err(_) => self.recover().await,
        }
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

    fn fresh_name(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    async fn view_ddl(&mut self) {
        let r = self.rng.below(100);
        if self.views.len() >= MAX_VIEWS || (r < 15 && !self.views.is_empty()) {
            self.drop_view().await;
        } else if r < 25 && !self.views.is_empty() {
            let view = self.rng.pick(&self.views).name.clone();
            let n = self.rng.range(1, 4);
            let sql = format!("ALTER MATERIALIZED VIEW {view} SET PARALLELISM = {n}");
            self.exec(Session::Main, Source::View, &sql).await;
        } else if r < 30 {
            let (query, _, _) = self.plan_view();
            let sql = format!("EXPLAIN CREATE MATERIALIZED VIEW fz_explained AS {query}");
            self.exec(Session::Main, Source::View, &sql).await;
        } else {
            self.create_view().await;
        }
    }

    async fn create_view(&mut self) {
        let (query, cols, deps) = self.plan_view();
        let name = self.fresh_name("fz_v");
        let with = match self.rng.below(10) {
            0 => " WITH (backfill_rate_limit = 1000)",
            1 => " WITH (backfill_rate_limit = 100000)",
            _ => "",
        };
        let sql = format!("CREATE MATERIALIZED VIEW {name}{with} AS {query}");
        let restarts = self.stats.restarts;
        let background = self.background_ddl;
        let reply = self.exec(Session::Main, Source::View, &sql).await;
        let view = View { name: name.clone(), query, cols, deps, pending: background };
        match reply {
            Reply::Rows { .. } => {
                self.stats.views_created += 1;
                self.views.push(view);
            }
            Reply::Failed { .. } if self.stats.restarts == restarts => {
                // A failed CREATE leaves nothing behind.
                let check = format!(
                    "SELECT count(*) FROM rw_catalog.rw_materialized_views WHERE name = '{name}'"
                );
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, &check).await
                    && rows.first().and_then(|r| r[0].as_deref()) != Some("0")
                {
                    self.find(
                        Kind::DdlOutcome,
                        Source::View,
                        &sql,
                        "",
                        "a failed CREATE MATERIALIZED VIEW left the view behind",
                    );
                }
            }
            // No reply: it exists if the catalog says so.
            _ => {
                let check = format!(
                    "SELECT count(*) FROM rw_catalog.rw_materialized_views WHERE name = '{name}'"
                );
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, &check).await
                    && rows.first().and_then(|r| r[0].as_deref()) == Some("1")
                {
                    self.views.push(View { pending: true, ..view });
                }
            }
        }
    }

    /// Names of `name` and of every view depending on it, transitively.
    fn dependents(&self, name: &str) -> Vec<String> {
        let mut out = vec![name.to_owned()];
        let mut i = 0;
        while i < out.len() {
            for v in &self.views {
                if v.deps.contains(&out[i]) && !out.contains(&v.name) {
                    out.push(v.name.clone());
                }
            }
            i += 1;
        }
        out
    }

    async fn drop_view(&mut self) {
        // A view still creating in the background is canceled, not dropped.
        let created: Vec<String> =
            self.views.iter().filter(|v| !v.pending).map(|v| v.name.clone()).collect();
        if created.is_empty() {
            return;
        }
        let name = self.rng.pick(&created).clone();
        let doomed = self.dependents(&name);
        let cascade = self.rng.chance(50);
        let sql = format!("DROP MATERIALIZED VIEW {name}{}", if cascade { " CASCADE" } else { "" });
        let restarts = self.stats.restarts;
        let reply = self.exec(Session::Main, Source::View, &sql).await;
        if self.stats.restarts != restarts {
            self.sync_views().await;
            return;
        }
        match reply {
            Reply::Rows { .. } if doomed.len() > 1 && !cascade => {
                self.find(
                    Kind::DdlOutcome,
                    Source::View,
                    &sql,
                    "",
                    "DROP MATERIALIZED VIEW without CASCADE dropped a view other views read",
                );
                let readers: Vec<String> = self
                    .views
                    .iter()
                    .filter(|v| doomed[1..].contains(&v.name))
                    .map(|v| {
                        format!("(reads it) CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query)
                    })
                    .collect();
                if let Some(finding) = self.findings.last_mut() {
                    finding.reads.extend(readers);
                }
                self.sync_views().await;
            }
            Reply::Rows { .. } => {
                // Exactly the view and (with CASCADE) the views reading it are gone.
                let names = "SELECT name FROM rw_catalog.rw_materialized_views";
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, names).await
                {
                    let left: BTreeSet<String> =
                        rows.into_iter().filter_map(|r| r[0].clone()).collect();
                    let kept: Vec<&String> = doomed.iter().filter(|v| left.contains(*v)).collect();
                    let lost: Vec<&String> = self
                        .views
                        .iter()
                        .map(|v| &v.name)
                        .filter(|v| !doomed.contains(v) && !left.contains(*v))
                        .collect();
                    if !kept.is_empty() || !lost.is_empty() {
                        let message = format!(
                            "DROP MATERIALIZED VIEW left views reading it, or dropped others | still there: {kept:?}, gone: {lost:?}"
                        );
                        self.find(Kind::DdlOutcome, Source::View, &sql, "", &message);
                        let kept: Vec<String> = self
                            .views
                            .iter()
                            .filter(|v| kept.contains(&&v.name))
                            .map(|v| {
                                format!("(left) CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query)
                            })
                            .collect();
                        if let Some(finding) = self.findings.last_mut() {
                            finding.reads.extend(kept);
                        }
                    }
                }
                self.views.retain(|v| !doomed.contains(&v.name));
                self.sync_views().await;
            }
            Reply::Failed { code, message } if doomed.len() == 1 || cascade => {
                if code != "XX000" {
                    let message = format!("DROP MATERIALIZED VIEW failed | {message}");
                    self.find(Kind::DdlOutcome, Source::View, &sql, &code, &message);
                }
                self.sync_views().await;
            }
            _ => {}
        }
    }

    /// The CREATE statements of every view of the fuzzer, in creation order.
    fn view_definitions(&self) -> Vec<String> {
        self.views
            .iter()
            .map(|v| format!("CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query))
            .collect()
    }

    /// Drops every view of the fuzzer, readers first. If that stalls too, the server is
    /// wedged for good: the run goes on with a new server on a new data directory.
    async fn drop_all_views(&mut self) {
        let names: Vec<String> = self.views.iter().rev().map(|v| v.name.clone()).collect();
        for name in names {
            let sql = format!("DROP MATERIALIZED VIEW IF EXISTS {name} CASCADE");
            let views = self.view_definitions();
            if let Reply::Lost = self.exec(Session::Main, Source::Check, &sql).await {
                let message = "the server stays wedged: after a stall and a restart, dropping the views stalls too";
                self.find(Kind::Timeout, Source::Check, &sql, "", message);
                if let Some(finding) = self.findings.last_mut() {
                    finding.reads = views;
                }
                self.new_server().await;
                return;
            }
        }
        self.sync_views().await;
    }

    /// Replaces the server by a new one on a new data directory (the old directory is
    /// removed), for a run that cannot go on with the old one.
    async fn new_server(&mut self) {
        match Sluice::start().await {
            Ok(server) => {
                self.server = server;
                self.fresh_world();
                self.stats.new_servers += 1;
                self.log_scanned = 0;
                self.recoveries_seen.clear();
                match (self.server.connect().await, self.server.connect().await) {
                    (Ok(main), Ok(scratch)) => {
                        self.main = main;
                        self.scratch = scratch;
                        self.background_ddl = false;
                    }
                    _ => self.dead = true,
                }
            }
            Err(_) => self.dead = true,
        }
    }

    /// Forgets views the catalog no longer has.
    async fn sync_views(&mut self) {
        let sql = "SELECT name FROM rw_catalog.rw_materialized_views";
        if let Reply::Rows { rows, .. } = self.exec(Session::Main, Source::Check, sql).await {
            let names: BTreeSet<String> = rows.into_iter().filter_map(|r| r[0].clone()).collect();
            self.views.retain(|v| names.contains(&v.name));
        }
    }

    /// A view query over the available relations: its SQL, output columns and inputs.
    fn plan_view(&mut self) -> (String, Vec<Col>, Vec<String>) {
        let rels = self.relations();
        let rng = &mut self.rng;
        let rel = rng.pick(&rels).clone();
        let typed = |cols: &[Col], ty: Ty| -> Vec<String> {
            cols.iter().filter(|(_, t)| *t == Some(ty)).map(|(n, _)| n.clone()).collect()
        };
        // Two relations with int columns, and an int column of each to join on.
        let join_sides = |rng: &mut Rng| {
            let with_int: Vec<&Rel> =
                rels.iter().filter(|r| !typed(&r.cols, Ty::Int).is_empty()).collect();
            let l = (*rng.pick(&with_int)).clone();
            let r = (*rng.pick(&with_int)).clone();
            let lk = rng.pick(&typed(&l.cols, Ty::Int)).clone();
            let rk = rng.pick(&typed(&r.cols, Ty::Int)).clone();
            (l, r, lk, rk)
        };
        match rng.below(6) {
            // Filter and project, with expressions that can fail.
            0 | 1 => {
                let mut items = Vec::new();
                let mut cols = Vec::new();
                for (n, t) in rel.cols.iter() {
                    if rng.chance(60) {
                        items.push(n.clone());
                        cols.push((n.clone(), *t));
                    }
                }
                for i in 0..rng.below(3) {
                    let ty = *rng.pick(&Ty::ALL);
                    let depth = 1 + rng.below(3) as u32;
                    let e = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(ty, depth);
                    items.push(format!("{e} AS e{i}"));
                    cols.push((format!("e{i}"), Some(ty)));
                }
                if items.is_empty() {
                    let (n, t) = rel.cols[0].clone();
                    items.push(n.clone());
                    cols.push((n, t));
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if rng.chance(60) {
                    let depth = 1 + rng.below(3) as u32;
                    let p = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, depth);
                    write!(sql, " WHERE {p}").unwrap();
                }
                (sql, cols, vec![rel.name])
            }
            // Aggregates, grouped or not.
            2 => {
                let mut items = Vec::new();
                let mut cols = Vec::new();
                let mut group = None;
                if rng.chance(75) {
                    let g = match rng.below(3) {
                        0 => {
                            let ints = typed(&rel.cols, Ty::Int);
                            match ints.first() {
                                Some(_) => format!("{} % 3", rng.pick(&ints)),
                                None => rel.cols[0].0.clone(),
                            }
                        }
                        1 => {
                            let ty = *rng.pick(&Ty::ALL);
                            ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                                .expr(ty, 1)
                        }
                        _ => rng.pick(&rel.cols).0.clone(),
                    };
                    items.push(format!("{g} AS g"));
                    cols.push(("g".to_owned(), None));
                    group = Some(g);
                }
                items.push("count(*) AS n".to_owned());
                cols.push(("n".to_owned(), Some(Ty::BigInt)));
                for i in 0..1 + rng.below(3) {
                    let (c, t) = rng.pick(&rel.cols).clone();
                    let exact = matches!(t, Some(Ty::Int | Ty::BigInt | Ty::Numeric));
                    let f = if exact {
                        *rng.pick(&["count", "sum", "min", "max", "avg"])
                    } else {
                        *rng.pick(&["count", "min", "max"])
                    };
                    let arg = if rng.chance(25) && exact {
                        let cols = &rel.cols;
                        ExprGen { rng: &mut *rng, cols, scalar_subqueries: false }
                            .expr(t.unwrap_or(Ty::Int), 2)
                    } else {
                        c
                    };
                    items.push(format!("{f}({arg}) AS a{i}"));
                    cols.push((format!("a{i}"), if f == "count" { Some(Ty::BigInt) } else { t }));
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if rng.chance(40) {
                    let p = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, 2);
                    write!(sql, " WHERE {p}").unwrap();
                }
                if let Some(g) = group {
                    write!(sql, " GROUP BY {g}").unwrap();
                }
                (sql, cols, vec![rel.name])
            }
            // Inner and left equi-joins on int columns.
            3 => {
                let (l, r, lk, rk) = join_sides(rng);
                let mut items = Vec::new();
                let mut cols = Vec::new();
                for (alias, rel) in [("l", &l), ("r", &r)] {
                    for (n, t) in &rel.cols {
                        if rng.chance(50) || n == &lk {
                            items.push(format!("{alias}.{n} AS {alias}_{n}"));
                            cols.push((format!("{alias}_{n}"), *t));
                        }
                    }
                }
                let join = if rng.chance(40) { "LEFT JOIN" } else { "JOIN" };
                let mut sql = format!(
                    "SELECT {} FROM {} l {join} {} r ON l.{lk} = r.{rk}",
                    items.join(", "),
                    l.name,
                    r.name
                );
                if rng.chance(30) {
                    let prefixed: Vec<Col> =
                        l.cols.iter().map(|(n, t)| (format!("l.{n}"), *t)).collect();
                    let p = ExprGen { rng: &mut *rng, cols: &prefixed, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(sql, " WHERE {p}").unwrap();
                }
                (sql, cols, vec![l.name, r.name])
            }
            // Aggregates over an inner equi-join: eager aggregation pre-aggregates one side.
            4 => {
                let (l, r, lk, rk) = join_sides(rng);
                let group = format!("r.{}", rng.pick(&r.cols).0);
                let mut items = vec![format!("{group} AS g"), "count(*) AS n".to_owned()];
                let mut cols = vec![("g".to_owned(), None), ("n".to_owned(), Some(Ty::BigInt))];
                for i in 0..1 + rng.below(3) {
                    let (c, t) = rng.pick(&l.cols).clone();
                    let exact = matches!(t, Some(Ty::Int | Ty::BigInt | Ty::Numeric));
                    let f = match exact {
                        true => *rng.pick(&["count", "sum", "min", "max"]),
                        false => *rng.pick(&["count", "min", "max"]),
                    };
                    items.push(format!("{f}(l.{c}) AS a{i}"));
                    cols.push((format!("a{i}"), if f == "count" { Some(Ty::BigInt) } else { t }));
                }
                let sql = format!(
                    "SELECT {} FROM {} l JOIN {} r ON l.{lk} = r.{rk} GROUP BY {group}",
                    items.join(", "),
                    l.name,
                    r.name
                );
                (sql, cols, vec![l.name, r.name])
            }
            // UNION [ALL] of two relations' columns of one type.
            _ => {
                let ty = *rng.pick(&[Ty::Int, Ty::Int, Ty::Text]);
                let with_ty: Vec<&Rel> =
                    rels.iter().filter(|r| !typed(&r.cols, ty).is_empty()).collect();
                if with_ty.is_empty() {
                    return (
                        "SELECT id, x FROM fz_a UNION ALL SELECT id, k FROM fz_b".into(),
                        vec![("id".into(), Some(Ty::Int)), ("x".into(), Some(Ty::Int))],
                        vec!["fz_a".into(), "fz_b".into()],
                    );
                }
                let a = (*rng.pick(&with_ty)).clone();
                let b = (*rng.pick(&with_ty)).clone();
                let ac = rng.pick(&typed(&a.cols, ty)).clone();
                let bc = rng.pick(&typed(&b.cols, ty)).clone();
                let union = if rng.chance(25) { "UNION" } else { "UNION ALL" };
                let mut left = format!("SELECT {ac} AS u FROM {}", a.name);
                if rng.chance(50) {
                    let p = ExprGen { rng: &mut *rng, cols: &a.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(left, " WHERE {p}").unwrap();
                }
                let sql = format!("{left} {union} SELECT {bc} FROM {}", b.name);
                (sql, vec![("u".to_owned(), Some(ty))], vec![a.name, b.name])
            }
        }
    }

    /// Waits until a view created in the background is created; false if it never is.
    async fn wait_created(&mut self, name: &str) -> bool {
        let sql =
            format!("SELECT status FROM rw_catalog.rw_materialized_views WHERE name = '{name}'");
        let client = &self.main;
        let timeout = self.statement_timeout;
        let created = retry_until(BACKGROUND_VIEW_TIMEOUT, || {
            let sql = sql.clone();
            async move {
                let rows =
                    tokio::time::timeout(timeout, harness::text_rows(client, &sql)).await??;
                let status = rows.first().and_then(|r| r[0].clone());
                ensure!(status.as_deref() == Some("created"), "status {status:?}");
                Ok(())
            }
        })
        .await;
        match created {
            Ok(()) => true,
            Err(error) => {
                let message = format!("a background view never finished creating | {error:#}");
                self.find(Kind::Timeout, Source::Check, &sql, "", &clip(&message, 300));
                self.views.retain(|v| v.name != name);
                let drop = format!("DROP MATERIALIZED VIEW IF EXISTS {name}");
                self.exec(Session::Main, Source::View, &drop).await;
                false
            }
        }
    }

    /// Compares every view with its query run as a batch query.
    async fn check_views(&mut self) {
        let restarts = self.stats.restarts;
        let views = self.views.clone();
        for view in views {
            if self.dead || self.stats.restarts != restarts {
                return;
            }
            if view.pending {
                if !self.wait_created(&view.name).await {
                    continue;
                }
                if let Some(v) = self.views.iter_mut().find(|v| v.name == view.name) {
                    v.pending = false;
                }
            }
            let select = format!("SELECT * FROM {}", view.name);
            let found = self.exec(Session::Main, Source::Check, &select).await;
            let expected = self.exec(Session::Main, Source::Check, &view.query).await;
            let (found, expected) = match (found, expected) {
                (Reply::Rows { rows: f, .. }, Reply::Rows { rows: e, .. }) => (f, e),
                (Reply::Lost, _) | (_, Reply::Lost) => return,
                (_, Reply::Failed { .. }) => {
                    self.stats.view_skips += 1;
                    continue;
                }
                (Reply::Failed { code, message }, Reply::Rows { .. }) => {
                    if code != "XX000" {
                        let message = format!("a view of the fuzzer cannot be read | {message}");
                        self.find(Kind::DdlOutcome, Source::Check, &select, &code, &message);
                    }
                    continue;
                }
            };
            self.stats.view_checks += 1;
            let (found, expected) = (comparable(found), comparable(expected));
            if found == expected {
                continue;
            }
            // Stale (catching up later) or wrong (never)?
            let client = &self.main;
            let query = view.query.clone();
            let converged = retry_until(CONVERGE_TIMEOUT, || {
                let (select, query) = (select.clone(), query.clone());
                async move {
                    let f = comparable(harness::text_rows(client, &select).await?);
                    let e = comparable(harness::text_rows(client, &query).await?);
                    ensure!(f == e, "differs");
                    Ok(())
                }
            })
            .await
            .is_ok();
            let missing: Vec<_> = expected.iter().filter(|r| !found.contains(r)).take(3).collect();
            let extra: Vec<_> = found.iter().filter(|r| !expected.contains(r)).take(3).collect();
            let message = format!(
                "{} | {} rows vs {} from the batch query; missing {:?}, unexpected {:?}; query: {}",
                if converged {
                    "a view lagged behind its query (equal only later)"
                } else {
                    "a view differs from its query run as a batch query"
                },
                found.len(),
                expected.len(),
                missing,
                extra,
                clip(&view.query, 300)
            );
            let sql = format!("CREATE MATERIALIZED VIEW {} AS {}", view.name, view.query);
            self.find(Kind::ViewMismatch, Source::Check, &sql, "", &message);
        }
    }

    // ------------------------------------------------------------------------------- grammar

    fn random_select(&mut self) -> String {
        let rels = self.relations();
        let rng = &mut self.rng;
        let depth = 1 + rng.below(6) as u32;
        match rng.below(7) {
            0 | 1 => {
                let mut g = ExprGen { rng: &mut *rng, cols: &[], scalar_subqueries: true };
                let items: Vec<String> = (0..1 + g.rng.below(3))
                    .map(|_| {
                        let ty = g.any_ty();
                        g.expr(ty, depth)
                    })
                    .collect();
                format!("SELECT {}", items.join(", "))
            }
            2 | 3 => {
                let rel = rng.pick(&rels).clone();
                let mut g = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: true };
                let items: Vec<String> = (0..1 + g.rng.below(3))
                    .map(|_| {
                        let ty = g.any_ty();
                        g.expr(ty, depth)
                    })
                    .collect();
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if g.rng.chance(60) {
                    write!(sql, " WHERE {}", g.expr(Ty::Bool, depth.min(4))).unwrap();
                }
                if g.rng.chance(30) {
                    sql.push_str(" ORDER BY 1");
                }
                if g.rng.chance(20) {
                    write!(sql, " LIMIT {}", g.rng.range(0, 5)).unwrap();
                }
                sql
            }
            4 => {
                let rel = rng.pick(&rels).clone();
                let mut g = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false };
                let mut items = vec!["count(*)".to_owned()];
                for _ in 0..1 + g.rng.below(3) {
                    let f = *g.rng.pick(&["sum", "min", "max", "avg", "count", "count(DISTINCT"]);
                    let ty = *g.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text]);
                    let e = g.expr(ty, depth.min(3));
                    items.push(if f == "count(DISTINCT" {
                        format!("{f} {e})")
                    } else {
                        format!("{f}({e})")
                    });
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if g.rng.chance(50) {
                    let (c, _) = g.rng.pick(&rel.cols).clone();
                    sql = sql.replacen("SELECT ", &format!("SELECT {c}, "), 1);
                    write!(sql, " GROUP BY {c}").unwrap();
                    if g.rng.chance(30) {
                        write!(sql, " HAVING count(*) > {}", g.rng.range(0, 2)).unwrap();
                    }
                }
                sql
            }
            5 => {
                let cols: Vec<Col> =
                    [("a.x", Ty::Int), ("a.s", Ty::Text), ("b.k", Ty::Int), ("b.v", Ty::Double)]
                        .iter()
                        .map(|(n, t)| (n.to_string(), Some(*t)))
                        .collect();
                let join =
                    *rng.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]);
                let mut g = ExprGen { rng: &mut *rng, cols: &cols, scalar_subqueries: true };
                let ty = g.any_ty();
                let item = g.expr(ty, depth.min(4));
                let on =
                    if join == "CROSS JOIN" { String::new() } else { " ON a.x = b.k".to_owned() };
                format!("SELECT a.id, b.id, {item} FROM fz_a a {join} fz_b b{on}")
            }
            _ => {
                let a = rng.pick(&rels).clone();
                let col = rng.pick(&a.cols).0.clone();
                format!(
                    "SELECT {col}, count(*) FROM (SELECT * FROM {} UNION ALL SELECT * FROM {}) t GROUP BY {col} ORDER BY 2 DESC LIMIT 3",
                    a.name, a.name
                )
            }
        }
    }

    async fn scratch_table_statement(&mut self) {
        if self.scratch_tables.is_empty()
            || (self.scratch_tables.len() < MAX_SCRATCH_TABLES && self.rng.chance(15))
        {
            let name = self.fresh_name("fz_s");
            let pk = *self.rng.pick(&["int", "bigint", "varchar", "date"]);
            let pk_ty = match pk {
                "int" => Ty::Int,
                "bigint" => Ty::BigInt,
                "varchar" => Ty::Text,
                _ => Ty::Date,
            };
            let mut cols: Vec<Col> = vec![("c0".into(), Some(pk_ty))];
            let mut defs = vec![format!("c0 {pk}")];
            let mut types = vec![""];
            for i in 1..2 + self.rng.below(5) {
                let (sql, ty, lit) = *self.rng.pick(SCRATCH_TYPES);
                cols.push((format!("c{i}"), ty));
                defs.push(format!("c{i} {sql}"));
                types.push(lit);
            }
            match self.rng.below(4) {
                0 => {}
                1 => defs.push("PRIMARY KEY (c0, c1)".into()),
                _ => defs[0].push_str(" PRIMARY KEY"),
            }
            let sql = format!("CREATE TABLE {name} ({})", defs.join(", "));
            if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
                self.scratch_ddl.insert(name.clone(), sql);
                self.scratch_tables.push(Rel { name, cols });
            }
            return;
        }
        let table = self.rng.pick(&self.scratch_tables).clone();
        match self.rng.below(10) {
            0..=4 => {
                let rows: Vec<String> = (0..1 + self.rng.below(4))
                    .map(|_| {
                        let items: Vec<String> = table
                            .cols
                            .iter()
                            .map(|(c, ty)| match ty {
                                Some(_) if self.rng.chance(8) => {
                                    let other = *self.rng.pick(&Ty::ALL);
                                    literal(&mut self.rng, other)
                                }
                                Some(ty) if c == "c0" && self.rng.chance(80) => match ty {
                                    Ty::Text => format!("'k{}'", self.rng.range(0, 30)),
                                    Ty::Date => {
                                        format!("DATE '2024-01-01' + {}", self.rng.range(0, 30))
                                    }
                                    _ => self.rng.range(0, 30).to_string(),
                                },
                                Some(ty) => {
                                    let depth = self.rng.below(3) as u32;
                                    ExprGen {
                                        rng: &mut self.rng,
                                        cols: &[],
                                        scalar_subqueries: true,
                                    }
                                    .expr(*ty, depth)
                                }
                                None => {
                                    let lit = SCRATCH_TYPES
                                        .iter()
                                        .filter(|t| t.1.is_none())
                                        .map(|t| t.2)
                                        .collect::<Vec<_>>();
                                    if self.rng.chance(20) {
                                        "NULL".into()
                                    } else {
                                        self.rng.pick(&lit).to_string()
                                    }
                                }
                            })
                            .collect();
                        format!("({})", items.join(", "))
                    })
                    .collect();
                let sql = format!("INSERT INTO {} VALUES {}", table.name, rows.join(", "));
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            5..=6 => {
                let (c, ty) = self.rng.pick(&table.cols[1..]).clone();
                let mut g =
                    ExprGen { rng: &mut self.rng, cols: &table.cols, scalar_subqueries: false };
                let value = match ty {
                    Some(ty) => g.expr(ty, 2),
                    None => "NULL".into(),
                };
                let p = g.expr(Ty::Bool, 2);
                let sql = format!("UPDATE {} SET {c} = {value} WHERE {p}", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            7 => {
                let p = ExprGen { rng: &mut self.rng, cols: &table.cols, scalar_subqueries: false }
                    .expr(Ty::Bool, 2);
                let sql = format!("DELETE FROM {} WHERE {p}", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            8 => {
                let sql = format!("SELECT * FROM {} ORDER BY 1", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            _ => {
                // Views on it go first; the table must then drop. A view still creating in
                // the background is canceled, not dropped: wait for it.
                let doomed = self.dependents(&table.name);
                if self.views.iter().any(|v| v.pending && doomed.contains(&v.name)) {
                    return;
                }
                for view in doomed.iter().skip(1) {
                    if self.views.iter().any(|v| &v.name == view) {
                        let sql = format!("DROP MATERIALIZED VIEW IF EXISTS {view} CASCADE");
                        self.exec(Session::Main, Source::View, &sql).await;
                    }
                }
                self.sync_views().await;
                let sql = format!("DROP TABLE {}", table.name);
                let restarts = self.stats.restarts;
                match self.exec(Session::Main, Source::Grammar, &sql).await {
                    Reply::Rows { .. } => self.scratch_tables.retain(|t| t.name != table.name),
                    Reply::Failed { code, message }
                        if self.stats.restarts == restarts && code != "XX000" =>
                    {
                        let message = format!("DROP TABLE without dependents failed | {message}");
                        self.find(Kind::DdlOutcome, Source::Grammar, &sql, &code, &message);
                    }
                    _ => {}
                }
            }
        }
    }

    async fn session_statement(&mut self) {
        let sql = match self.rng.below(9) {
            0 | 1 => {
                let v = *self.rng.pick(&["1", "2", "3", "4", "DEFAULT", "0", "257", "'many'"]);
                format!("SET streaming_parallelism = {v}")
            }
            2 => {
                let on = self.rng.chance(40);
                let sql = format!("SET background_ddl = {on}");
                if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
                    self.background_ddl = on;
                }
                return;
            }
            3 if self.rng.chance(50) => {
                let v = *self.rng.pick(&["on", "off", "DEFAULT"]);
                format!("SET eager_aggregation = {v}")
            }
            3 => {
                let v = *self.rng.pick(&["DEFAULT", "100000", "-1", "-7"]);
                format!("SET backfill_rate_limit = {v}")
            }
            4 | 5 => "FLUSH".to_owned(),
            6 => {
                let n = self.rng.range(1, 4);
                let t = *self.rng.pick(&["fz_a", "fz_b"]);
                format!("ALTER TABLE {t} SET PARALLELISM = {n}")
            }
            _ => self
                .rng
                .pick(&[
                    "SHOW TABLES",
                    "SHOW MATERIALIZED VIEWS",
                    "SHOW INTERNAL TABLES",
                    "SHOW JOBS",
                    "DESCRIBE fz_a",
                    "SHOW streaming_parallelism",
                    "SELECT * FROM rw_catalog.rw_fragments",
                    "SELECT * FROM rw_catalog.rw_ddl_progress",
                    "SELECT * FROM rw_catalog.rw_materialized_views",
                    "SELECT * FROM rw_catalog.rw_internal_tables",
                    "SELECT relname FROM pg_catalog.pg_class",
                    "EXPLAIN SELECT * FROM fz_a a JOIN fz_b b ON a.x = b.k",
                ])
                .to_string(),
        };
        self.exec(Session::Main, Source::Grammar, &sql).await;
    }

    /// DDL on the oracle tables that must fail and change nothing.
    async fn table_ddl(&mut self) {
        let readers = self.views.iter().find(|v| v.deps.iter().any(|d| d == "fz_a" || d == "fz_b"));
        let (sql, why) = match readers {
            Some(view) if self.rng.chance(50) => {
                let table =
                    view.deps.iter().find(|d| *d == "fz_a" || *d == "fz_b").unwrap().clone();
                (format!("DROP TABLE {table}"), "DROP TABLE of a table views read succeeded")
            }
            _ => {
                let sql = *self.rng.pick(&[CREATE_A, CREATE_B]);
                (sql.to_owned(), "CREATE TABLE of an existing table succeeded")
            }
        };
        let restarts = self.stats.restarts;
        if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
            self.find(Kind::DdlOutcome, Source::Grammar, &sql, "", why);
            // Put the oracle back together.
            for sql in [CREATE_A, CREATE_B] {
                self.exec(Session::Main, Source::Grammar, sql).await;
            }
            self.sync_views().await;
            self.resync().await;
        } else if self.stats.restarts == restarts {
            self.check_tables(None, Kind::TableMismatch, &sql).await;
        }
    }

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
