//! Recovery: rebuilding every streaming job from the committed state after an actor failed.
//!
//! The barrier manager gives up the checkpoint in flight and discards what was staged after the
//! committed epoch (see `stream::barrier`); this module then stops every actor and builds and
//! starts the jobs again exactly as at start-up, so sources rewind to their committed offsets
//! and backfills resume from their committed progress. The server keeps serving meanwhile;
//! statements whose changes were discarded fail with 40001 and can be run again. A job that
//! keeps failing is rebuilt with a growing pause, so it cannot spin.

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::error::Result;

/// The first pause before rebuilding after a failure that follows the last recovery closely.
const MIN_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause.
const MAX_PAUSE: Duration = Duration::from_secs(30);
/// Failures further apart than this do not lengthen the pause.
const CALM: Duration = Duration::from_secs(60);

/// Serves recovery requests of the barrier manager until the engine is gone.
pub(crate) async fn run(engine: Weak<Engine>, mut requests: mpsc::UnboundedReceiver<String>) {
    let mut pause = MIN_PAUSE;
    let mut last: Option<Instant> = None;
    while let Some(error) = requests.recv().await {
        // Failures reported together are recovered together.
        while requests.try_recv().is_ok() {}
        let Some(engine) = engine.upgrade() else { return };
        engine.graph.recoveries.push(error);
        if last.is_some_and(|at| at.elapsed() < CALM) {
            // Backoff, not a wait for a condition: a job failing at once must not spin.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        } else {
            pause = MIN_PAUSE;
        }
        loop {
            match engine.recover().await {
                Ok(()) => break,
                Err(e) => {
                    tracing::error!(error = %e, retry_in = ?pause, "rebuilding the streaming jobs failed");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
        engine.graph.recoveries.mark_recovered();
        tracing::info!("every streaming job runs again");
        last = Some(Instant::now());
    }
}

impl Engine {
    /// Stops every actor and starts every job again from the committed state.
    async fn recover(&self) -> Result<()> {
        let _ddl = self.ddl_lock.lock().await;
        self.graph.abort_all().await;
        self.apply_cdc_rebuilds().await;
        self.start_jobs().await?;
        self.graph.cdc_rebuilds.jobs_run_again();
        Ok(())
    }
}
