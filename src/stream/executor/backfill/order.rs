//! The gates that hold a stream scan back until the scans it waits for have read their
//! snapshots (the order itself: [`crate::stream::graph::order`]).
//!
//! One [`OrderGates`] per job counts, per scan, the actors still reading. Each scan actor
//! holds a [`StartGate`]: it reads nothing while a scan it waits for has an actor reading
//! (it still buffers and drops its upstream's changes as a scan that has not started does,
//! and passes barriers on), and it counts itself out once it has read its own vnodes. A gate
//! is an in-memory hint: after a restart the scans that had finished count themselves out as
//! they load their progress, so the order goes on where it was.

use std::sync::Arc;

use tokio::sync::watch;

/// Per scan (by progress slot) of one job, the actors still reading.
pub struct OrderGates {
    reading: watch::Sender<Vec<usize>>,
}

impl OrderGates {
    /// Gates for the scans with progress slots `slots`, each run by `actors` actors.
    pub fn new(slots: &[usize], actors: usize) -> Arc<Self> {
        let len = slots.iter().max().map_or(0, |m| m + 1);
        let mut reading = vec![0; len];
        for &slot in slots {
            reading[slot] += actors;
        }
        Arc::new(Self { reading: watch::Sender::new(reading) })
    }
}

/// One scan actor's gate: what it waits for, and its own count.
pub struct StartGate {
    gates: Arc<OrderGates>,
    reading: watch::Receiver<Vec<usize>>,
    own: usize,
    after: Vec<usize>,
    counted_out: bool,
}

impl StartGate {
    /// The gate of an actor of scan `own`, which waits for the scans `after`.
    pub fn new(gates: Arc<OrderGates>, own: usize, after: Vec<usize>) -> Self {
        let reading = gates.reading.subscribe();
        Self { gates, reading, own, after, counted_out: false }
    }

    /// True once every scan this one waits for has read its snapshot.
    pub fn is_open(&self) -> bool {
        let reading = self.reading.borrow();
        self.after.iter().all(|&slot| reading[slot] == 0)
    }

    /// Resolves once the gate is open.
    pub async fn opened(&mut self) {
        let after = &self.after;
        // The sender lives as long as any gate holds it: `self` does.
        let _ = self.reading.wait_for(|reading| after.iter().all(|&slot| reading[slot] == 0)).await;
    }

    /// This actor has read its vnodes; the scans waiting for its scan may go once its other
    /// actors have too. Counts once, however often called.
    pub fn count_out(&mut self) {
        if std::mem::replace(&mut self.counted_out, true) {
            return;
        }
        let own = self.own;
        self.gates.reading.send_modify(|reading| reading[own] -= 1);
    }
}

impl std::fmt::Debug for StartGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartGate").field("own", &self.own).field("after", &self.after).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_gate_opens_once_every_actor_of_every_scan_it_waits_for_has_counted_out() {
        // Scans at slots 0, 2 and 5, two actors each; scan 5 waits for 0 and 2.
        let gates = OrderGates::new(&[0, 2, 5], 2);
        let mut first: Vec<StartGate> =
            (0..2).map(|_| StartGate::new(gates.clone(), 0, vec![])).collect();
        let mut second: Vec<StartGate> =
            (0..2).map(|_| StartGate::new(gates.clone(), 2, vec![])).collect();
        let mut last = StartGate::new(gates.clone(), 5, vec![0, 2]);
        assert!(first[0].is_open() && second[1].is_open(), "waiting for nothing");
        assert!(!last.is_open());
        first[0].count_out();
        first[0].count_out(); // counted once
        first[1].count_out();
        second[0].count_out();
        assert!(!last.is_open(), "an actor of scan 2 still reads");
        let waiter = tokio::spawn(async move {
            last.opened().await;
            last
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        second[1].count_out();
        let last = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("opened")
            .unwrap();
        assert!(last.is_open());
    }
}
