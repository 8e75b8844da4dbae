//! Findings and statistics.

use super::*;

/// What a finding violates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
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
    pub(super) fn name(self) -> &'static str {
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
pub(super) enum Source {
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
    pub(super) fn name(self) -> &'static str {
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

pub(super) struct Finding {
    pub(super) kind: Kind,
    pub(super) source: Source,
    /// The statement (or the check) that showed it.
    pub(super) sql: String,
    /// The SQLSTATE, if the finding is an error reply.
    pub(super) code: String,
    /// What went wrong. Text after ` | ` is detail, left out of the deduplication shape.
    pub(super) message: String,
    /// The statement number (1-based, counting every statement sent).
    pub(super) at: u64,
    /// The definitions of the fuzzer's tables and views the statement reads, inputs first,
    /// so that the finding can be reproduced.
    pub(super) reads: Vec<String>,
}

#[derive(Default)]
pub(super) struct Stats {
    /// Every statement sent, checks included.
    pub(super) statements: u64,
    /// Statements of the run's budget (the loop's iterations).
    pub(super) generated: u64,
    pub(super) ok: u64,
    /// Error replies other than XX000, by SQLSTATE.
    pub(super) expected: BTreeMap<String, u64>,
    pub(super) internal: u64,
    pub(super) by_source: BTreeMap<Source, u64>,
    pub(super) restarts: u64,
    pub(super) table_checks: u64,
    pub(super) view_checks: u64,
    /// View comparisons skipped because the batch query failed.
    pub(super) view_skips: u64,
    pub(super) views_created: u64,
    /// Statements run again after failing with 40001 (changes discarded by a recovery).
    pub(super) retried: u64,
    /// Deliberate `kill -9` and restarts (also counted in `restarts`).
    pub(super) kills: u64,
    /// Servers started on a new data directory because the old one could not go on.
    pub(super) new_servers: u64,
    /// Statements that took longer than a second to answer.
    pub(super) over_a_second: u64,
    /// The longest wait for an answer, and its statement.
    pub(super) slowest: (Duration, String),
}

/// A reply to one statement.
pub(super) enum Reply {
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

pub(super) fn reply_of(messages: Vec<SimpleQueryMessage>) -> Reply {
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
pub(super) enum Session {
    /// The fuzzer's own session: oracle tables, views, grammar, hostile statements.
    Main,
    /// The session of the mutated `.slt` statements, whose settings must not leak into Main.
    Scratch,
}
