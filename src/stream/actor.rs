//! An actor: one tokio task driving a chain of executors.
//!
//! The actor pulls from its root executor and reports every checkpoint barrier that reaches the
//! root to the barrier manager. Everything below the root has committed its state for that
//! epoch by then, because executors commit before forwarding a barrier.

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::ActorId;
use crate::stream::barrier::Collect;
use crate::stream::executor::BoxedExecutor;
use crate::stream::message::Message;

/// A running chain of executors.
pub struct Actor {
    id: ActorId,
    root: BoxedExecutor,
    collector: mpsc::UnboundedSender<Collect>,
}

impl Actor {
    /// An actor that runs `root` and reports barriers to `collector`.
    pub fn new(
        id: ActorId,
        root: BoxedExecutor,
        collector: mpsc::UnboundedSender<Collect>,
    ) -> Self {
        Self {
            id,
            root,
            collector,
        }
    }

    /// Starts the actor on the tokio runtime.
    pub fn spawn(self) -> JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        let Self {
            id,
            root,
            collector,
        } = self;
        let name = root.identity().to_owned();
        let mut stream = root.execute();
        while let Some(msg) = stream.next().await {
            match msg {
                Ok(Message::Barrier(b)) if b.is_checkpoint() => {
                    let _ = collector.send(Collect::Done {
                        actor: id,
                        epoch: b.epoch.prev,
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(actor = %id, executor = %name, error = %e, "actor failed");
                    let _ = collector.send(Collect::Failed {
                        actor: id,
                        error: e.to_string(),
                    });
                    return;
                }
            }
        }
        tracing::debug!(actor = %id, "actor stopped");
    }
}
