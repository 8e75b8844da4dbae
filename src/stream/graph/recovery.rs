//! The log of recoveries: each time every job was rebuilt from the committed state after an
//! actor failed (`rw_catalog.rw_recovery_events`). The engine runs the recovery itself.

use parking_lot::Mutex;

use crate::stream::graph::creating::now_ms;

/// One recovery, as `rw_catalog.rw_recovery_events` lists it.
#[derive(Debug, Clone)]
pub struct RecoveryEvent {
    /// When the failure was noticed, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The failure.
    pub error: String,
    /// Whether the jobs run again.
    pub recovered: bool,
}

/// The recoveries since the server started, newest last (the last 100).
#[derive(Debug, Default)]
pub struct RecoveryLog(Mutex<Vec<RecoveryEvent>>);

impl RecoveryLog {
    /// The recorded recoveries.
    pub fn events(&self) -> Vec<RecoveryEvent> {
        self.0.lock().clone()
    }

    /// Records a failure whose recovery begins.
    pub fn push(&self, error: String) {
        let mut events = self.0.lock();
        if events.len() == 100 {
            events.remove(0);
        }
        events.push(RecoveryEvent { at_ms: now_ms(), error, recovered: false });
    }

    /// Marks the last recovery done: the jobs run again.
    pub fn mark_recovered(&self) {
        if let Some(last) = self.0.lock().last_mut() {
            last.recovered = true;
        }
    }
}
