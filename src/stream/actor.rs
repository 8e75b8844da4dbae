//! An actor: one tokio task driving a chain of executors.
//!
//! The actor pulls from its root executor, sends every message to each of its outputs (the
//! input channels of downstream actors), and reports every checkpoint barrier that reaches the
//! root to the barrier manager. Everything below the root has committed its state for that
//! epoch by then, because executors commit before forwarding a barrier. A barrier that adds
//! outputs to this actor reaches the new outputs too: it is their first message.

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::ActorId;
use crate::stream::barrier::Collect;
use crate::stream::dispatch::Output;
use crate::stream::executor::BoxedExecutor;
use crate::stream::message::Message;

/// A running chain of executors.
pub struct Actor {
    id: ActorId,
    root: BoxedExecutor,
    collector: mpsc::UnboundedSender<Collect>,
    outputs: Vec<Output>,
}

impl Actor {
    /// An actor that runs `root`, sends its output to `outputs`, and reports barriers to
    /// `collector`.
    pub fn new(
        id: ActorId,
        root: BoxedExecutor,
        collector: mpsc::UnboundedSender<Collect>,
        outputs: Vec<Output>,
    ) -> Self {
        Self { id, root, collector, outputs }
    }

    /// Starts the actor on the tokio runtime.
    pub fn spawn(self) -> JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        let Self { id, root, collector, mut outputs } = self;
        let name = root.identity().to_owned();
        let mut stream = root.execute();
        while let Some(msg) = stream.next().await {
            match msg {
                Ok(Message::Barrier(b)) => {
                    outputs.extend(b.added_outputs(id).iter().cloned());
                    let (checkpoint, epoch, stop) = (b.is_checkpoint(), b.epoch.prev, b.stops(id));
                    dispatch(&mut outputs, Message::Barrier(b)).await;
                    if checkpoint {
                        let _ = collector.send(Collect::Done { actor: id, epoch });
                    }
                    if stop {
                        tracing::debug!(actor = %id, %epoch, "actor stopped by a barrier");
                        return;
                    }
                }
                Ok(msg) => dispatch(&mut outputs, msg).await,
                Err(e) => {
                    tracing::error!(actor = %id, executor = %name, error = %e, "actor failed");
                    let _ = collector.send(Collect::Failed { actor: id, error: e.to_string() });
                    return;
                }
            }
        }
        tracing::debug!(actor = %id, "actor stopped");
    }
}

/// Sends `msg` to every output; an output whose receivers are gone (its job was dropped) is
/// removed.
async fn dispatch(outputs: &mut Vec<Output>, msg: Message) {
    let mut i = 0;
    while i < outputs.len() {
        if outputs[i].send(msg.clone()).await {
            i += 1;
        } else {
            outputs.swap_remove(i);
        }
    }
}
