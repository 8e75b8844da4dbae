//! Fault injection for tests of the failure paths.
//!
//! `SLUICE_FAILPOINTS=name[,name..]` in the server's environment arms named points; an armed
//! point fires once, the first time the code passes it. Unarmed, a point costs one atomic
//! load. The points:
//! - `actor:<job>`: an actor of the job (table, view or source) fails on its first chunk.
//! - `flush:panic`: the first `FLUSH` statement panics (a bug while running a statement).
//! - `binlog:stall:<database>`: the mysql-cdc change stream of the database stops reading its
//!   connection once started, without an error (a stalled stream).
//! - `replication:stall:<slot>`: the Postgres change stream of the slot stops reading its
//!   connection once started, without an error (a stalled stream).
//! - `released:<view>`: the process aborts once the release of the view's held partial
//!   aggregates is committed, before the view is marked created (a crash between the two).

use std::collections::HashSet;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

static ARMED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| {
    let names = std::env::var("SLUICE_FAILPOINTS").unwrap_or_default();
    let armed: HashSet<String> =
        names.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).collect();
    ANY.store(!armed.is_empty(), Ordering::Release);
    Mutex::new(armed)
});

static ANY: AtomicBool = AtomicBool::new(true);

/// True (once) if the point `name` is armed.
pub fn fires(name: impl FnOnce() -> String) -> bool {
    if !ANY.load(Ordering::Acquire) {
        return false;
    }
    let mut armed = ARMED.lock();
    let fired = armed.remove(&name());
    if armed.is_empty() {
        ANY.store(false, Ordering::Release);
    }
    if fired {
        tracing::warn!("failpoint fired");
    }
    fired
}
