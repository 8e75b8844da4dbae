//! What backfill executors report about themselves while they run.
//!
//! Every backfill (of a view's stream scan or of a CDC table) owns a `watch` channel of
//! [`BackfillStatus`]. The executor updates it at each barrier; the engine's progress tracker
//! reads the latest value when a user asks (`rw_ddl_progress`, `SHOW JOBS`) and waits on it to
//! learn when a job has finished.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::catalog::{Epoch, TableId};

/// How long a window the read rate is averaged over.
const RATE_WINDOW: Duration = Duration::from_secs(3);

/// The shortest span a rate is computed over.
const MIN_RATE_SPAN: Duration = Duration::from_millis(500);

/// One backfill's latest state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackfillStatus {
    /// Snapshot rows read, over everything this executor backfills.
    pub rows: u64,
    /// Set once completion is persisted, to the epoch whose checkpoint recorded it.
    pub finished: Option<Epoch>,
    /// Snapshot rows read per second, averaged over the last few seconds.
    pub rows_per_second: f64,
    /// The rate limit in effect (rows per second); `None` for none.
    pub rate_limit: Option<u64>,
    /// Checkpoints in a row that read no snapshot row although the backfill is not done.
    pub idle_checkpoints: u32,
    /// Units (vnodes of a view's scan, splits of a CDC table) completed, and owned.
    pub units_done: u32,
    /// See `units_done`.
    pub units_total: u32,
    /// The last error of the upstream, while snapshot reads fail.
    pub upstream_error: Option<String>,
    /// The upstream position the backfill has reached, for CDC backfills (a Postgres LSN).
    pub upstream_offset: Option<String>,
    /// Why a CDC table stopped following its upstream, if it did.
    pub stopped: Option<String>,
}

/// Where the engine watches one backfill executor.
#[derive(Debug, Clone)]
pub struct BackfillWatch {
    /// The backfill's state table (one per scan of a job, shared by its actors).
    pub state_table: TableId,
    /// What it reads: the upstream relation's name, or the upstream table for CDC.
    pub upstream: String,
    /// The executor's latest status.
    pub status: watch::Receiver<BackfillStatus>,
}

/// Measures a read rate from the running row count, sampled at barriers.
#[derive(Debug, Default)]
pub struct RateMeter {
    samples: VecDeque<(Instant, u64)>,
    idle: u32,
    rate: f64,
}

impl RateMeter {
    /// Records the row count at a checkpoint; returns the rate over the window and how many
    /// checkpoints in a row saw no new row.
    pub fn sample(&mut self, rows: u64) -> (f64, u32) {
        self.sample_at(rows, Instant::now())
    }

    fn sample_at(&mut self, rows: u64, now: Instant) -> (f64, u32) {
        match self.samples.back() {
            Some(&(_, last)) if last == rows => self.idle = self.idle.saturating_add(1),
            _ => self.idle = 0,
        }
        self.samples.push_back((now, rows));
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= RATE_WINDOW {
            self.samples.pop_front();
        }
        let (start, first) = self.samples[0];
        let secs = now.duration_since(start).as_secs_f64();
        // Early checkpoints can come milliseconds apart: a shorter span says little.
        if secs >= MIN_RATE_SPAN.as_secs_f64() {
            self.rate = rows.saturating_sub(first) as f64 / secs;
        }
        (self.rate, self.idle)
    }
}

/// The rows a backfill may show: a count becomes visible once the checkpoint recording it is
/// committed, so what users see never goes back across a crash (the live count runs ahead of
/// the persisted one). A checkpoint commits beside the epochs after it, so several counts can
/// wait at once: each shows at the first barrier that finds its checkpoint committed.
#[derive(Debug, Default)]
pub struct CommittedRows {
    shown: u64,
    /// Counts recorded at checkpoints not committed yet, oldest first.
    pending: VecDeque<(Epoch, u64)>,
}

impl CommittedRows {
    /// Starts from a count restored from committed state.
    pub fn restored(rows: u64) -> Self {
        Self { shown: rows, pending: VecDeque::new() }
    }

    /// Notes that the checkpoint of `epoch` records `rows`; returns the count to show now that
    /// `committed` is the committed epoch.
    pub fn record(&mut self, epoch: Epoch, rows: u64, committed: Epoch) -> u64 {
        self.pending.push_back((epoch, rows));
        while let Some(&(e, r)) = self.pending.front()
            && e <= committed
        {
            self.shown = self.shown.max(r);
            self.pending.pop_front();
        }
        self.shown
    }
}

/// A token bucket of snapshot rows: refilled at each barrier with the rows earned since the
/// last refill, holding at most one second's worth.
#[derive(Debug)]
pub struct RateLimiter {
    limit: Option<u64>,
    tokens: f64,
    last_refill: Instant,
}

impl RateLimiter {
    /// A limiter of `limit` rows per second (`None`: unlimited), starting empty.
    pub fn new(limit: Option<u64>) -> Self {
        Self { limit, tokens: 0.0, last_refill: Instant::now() }
    }

    /// The limit in effect.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Switches to a new limit, starting empty.
    pub fn set_limit(&mut self, limit: Option<u64>) {
        *self = Self::new(limit);
    }

    /// Adds the rows earned since the last refill.
    pub fn refill(&mut self) {
        let Some(rate) = self.limit else { return };
        let elapsed = self.last_refill.elapsed().as_secs_f64();
        self.last_refill = Instant::now();
        self.tokens = (self.tokens + rate as f64 * elapsed).min(rate.max(1) as f64);
    }

    /// How many rows may be read now, at most `max`.
    pub fn budget(&self, max: usize) -> usize {
        match self.limit {
            None => max,
            Some(_) => (self.tokens as usize).min(max),
        }
    }

    /// Takes `rows` from the bucket; a read of no row still costs one.
    pub fn consume(&mut self, rows: usize) {
        if self.limit.is_some() {
            self.tokens -= rows.max(1) as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_idle_checkpoints_and_measures_a_rate() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut meter = RateMeter::default();
        assert_eq!(meter.sample_at(0, at(0)), (0.0, 0));
        // Too short a span for a rate.
        assert_eq!(meter.sample_at(10, at(10)), (0.0, 0));
        assert_eq!(meter.sample_at(1000, at(1000)), (1000.0, 0));
        assert_eq!(meter.sample_at(1000, at(2000)), (500.0, 1));
        assert_eq!(meter.sample_at(1000, at(3000)).1, 2);
        assert_eq!(meter.sample_at(4000, at(4000)), (1000.0, 0));
        // Old samples leave the window.
        assert_eq!(meter.sample_at(7000, at(7000)), (1000.0, 0));
        assert_eq!(meter.sample_at(7000, at(8000)).0, 3000.0 / 4.0);
    }

    #[test]
    fn committed_rows_show_once_their_checkpoint_commits() {
        let mut rows = CommittedRows::restored(100);
        // Epoch 5 records 150 while 4 is committed: not yet.
        assert_eq!(rows.record(Epoch(5), 150, Epoch(4)), 100);
        // At the next barrier, 5 is committed.
        assert_eq!(rows.record(Epoch(6), 200, Epoch(5)), 150);
        // A count already committed shows at once; it never goes back.
        assert_eq!(rows.record(Epoch(6), 90, Epoch(6)), 200);
        // Commits lagging two checkpoints behind (a large epoch being ingested beside the next
        // ones): each count still shows once its own checkpoint commits.
        assert_eq!(rows.record(Epoch(7), 300, Epoch(6)), 200);
        assert_eq!(rows.record(Epoch(8), 400, Epoch(6)), 200);
        assert_eq!(rows.record(Epoch(9), 500, Epoch(7)), 300);
        assert_eq!(rows.record(Epoch(10), 600, Epoch(9)), 500);
    }

    #[test]
    fn a_limiter_hands_out_what_was_earned() {
        let mut unlimited = RateLimiter::new(None);
        assert_eq!(unlimited.budget(100), 100);
        let mut paused = RateLimiter::new(Some(0));
        paused.refill();
        assert_eq!(paused.budget(100), 0);
        let mut limited = RateLimiter::new(Some(1_000_000));
        assert_eq!(limited.budget(100), 0);
        limited.last_refill -= Duration::from_secs(2);
        limited.refill();
        // At most one second's worth.
        assert_eq!(limited.budget(usize::MAX), 1_000_000);
        limited.consume(999_999);
        assert_eq!(limited.budget(100), 1);
        unlimited.consume(5);
        limited.set_limit(None);
        assert_eq!(limited.budget(7), 7);
    }
}
