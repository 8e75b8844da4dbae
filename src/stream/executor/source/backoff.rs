//! The wait before a source's reader tries its upstream again after a failure: it doubles with
//! each failure, up to a most, and is back at its least after a success.

use std::time::{Duration, Instant};

/// A reader's backoff (see the module docs).
#[derive(Debug, Clone)]
pub struct Backoff {
    least: Duration,
    most: Duration,
    /// The wait after the next failure.
    next: Duration,
    /// When the reader may try again, after a failure.
    retry_at: Option<Instant>,
}

impl Backoff {
    /// A backoff that waits `least` after a first failure, at most `most`.
    pub fn new(least: Duration, most: Duration) -> Self {
        Self { least, most, next: least, retry_at: None }
    }

    /// Notes a failure at `now`; returns how long the reader waits before it tries again.
    pub fn failed(&mut self, now: Instant) -> Duration {
        let wait = self.next;
        self.retry_at = Some(now + wait);
        self.next = (self.next * 2).min(self.most);
        wait
    }

    /// Notes a success; returns whether failures came before it (the error shown can go).
    pub fn succeeded(&mut self) -> bool {
        let failed = self.next > self.least || self.retry_at.is_some();
        self.next = self.least;
        self.retry_at = None;
        failed
    }

    /// The wait is over: the reader tries again (the next failure waits longer).
    pub fn retried(&mut self) {
        self.retry_at = None;
    }

    /// Makes the reader wait until `at` before it tries again.
    pub fn wait_until(&mut self, at: Instant) {
        self.retry_at = Some(at);
    }

    /// The wait after the next failure.
    pub fn next_wait(&self) -> Duration {
        self.next
    }

    /// When the reader may try again, if a failure made it wait.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether the reader may try at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.retry_at.is_none_or(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_most_and_a_success_resets_them() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let now = Instant::now();
        assert!(backoff.ready(now));
        let waits: Vec<u128> = (0..5).map(|_| backoff.failed(now).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 500, 500]);
        assert!(!backoff.ready(now));
        assert!(backoff.ready(now + Duration::from_millis(500)));
        assert!(backoff.succeeded());
        assert!(backoff.ready(now));
        assert_eq!(backoff.next_wait(), Duration::from_millis(100));
        assert!(!backoff.succeeded(), "no failure came before");
    }
}
