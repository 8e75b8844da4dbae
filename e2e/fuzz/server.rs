//! Running statements on the server: sessions, timeouts, retries, and surviving (and
//! reporting) crashes, actor failures and restarts.

use super::*;

impl Fuzzer {
    pub(super) fn client(&self, session: Session) -> &Client {
        match session {
            Session::Main => &self.main,
            Session::Scratch => &self.scratch,
        }
    }

    /// Runs one statement with a timeout, records its outcome, and recovers the session (or
    /// the server) when there is no reply. A statement that fails with 40001 (its changes were
    /// discarded by a recovery of the streaming jobs: "run it again") runs again once the
    /// recovery is over, up to [`ATTEMPTS`] times in all.
    pub(super) async fn exec(&mut self, session: Session, source: Source, sql: &str) -> Reply {
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
    pub(super) async fn wait_recovered(&mut self) {
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
    pub(super) async fn scan_recoveries(&mut self) {
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
    pub(super) async fn exec_once(&mut self, session: Session, source: Source, sql: &str) -> Reply {
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

    pub(super) async fn exec_untraced(
        &mut self,
        session: Session,
        source: Source,
        sql: &str,
    ) -> Reply {
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
    pub(super) async fn exited_within(&mut self, deadline: Duration) -> Option<String> {
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
    pub(super) fn crash_reason(&self, exit: &str) -> String {
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
    pub(super) fn new_panics(&mut self) -> Vec<String> {
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
    pub(super) fn scan_log(&mut self) {
        let since = self.scanned_at;
        for panic in self.new_panics() {
            let window = format!("(one of statements #{since}..#{})", self.stats.statements);
            self.find(Kind::ServerPanic, Source::Check, &window, "", &panic);
        }
    }

    pub(super) async fn check_alive(&mut self, source: Source, sql: &str) {
        if let Err(exit) = self.server.ensure_running() {
            let reason = self.crash_reason(&exit.to_string());
            self.find(Kind::ProcessExit, source, &format!("(after its reply) {sql}"), "", &reason);
            self.recover().await;
        }
    }

    pub(super) async fn connection_failed(
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

    pub(super) async fn timed_out(&mut self, token: CancelToken, source: Source, sql: &str) {
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
    pub(super) async fn recover(&mut self) {
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
    pub(super) fn fresh_world(&mut self) {
        self.model = Model::default();
        self.views.clear();
        self.scratch_tables.clear();
        self.scratch_ddl.clear();
        self.history.clear();
        self.verified_restarts = self.stats.restarts;
        self.needs_setup = true;
    }

    pub(super) async fn reconnect(&mut self, session: Session) {
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

    /// Replaces the server by a new one on a new data directory (the old directory is
    /// removed), for a run that cannot go on with the old one.
    pub(super) async fn new_server(&mut self) {
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
}
