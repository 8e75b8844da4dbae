//! An actor: one tokio task driving a chain of executors.
//!
//! The actor pulls from its root executor, sends every message to each of its outputs (the
//! input channels of downstream actors), and reports every checkpoint barrier that reaches the
//! root to the barrier manager. Everything below the root has committed its state for that
//! epoch by then, because executors commit before forwarding a barrier. A barrier that adds
//! outputs to this actor reaches the new outputs too: it is their first message.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::ActorId;
use crate::error::{Error, Result};
use crate::stream::barrier::Collect;
use crate::stream::eval::in_job;
use crate::stream::executor::BoxedExecutor;
use crate::stream::message::Message;
use crate::stream::message::Output;

/// A running chain of executors.
pub struct Actor {
    id: ActorId,
    /// The name of the job the actor belongs to, for what it reports.
    job: Arc<str>,
    root: BoxedExecutor,
    collector: mpsc::UnboundedSender<Collect>,
    outputs: Vec<Output>,
}

impl Actor {
    /// An actor of `job` that runs `root`, sends its output to `outputs`, and reports barriers
    /// to `collector`.
    pub fn new(
        id: ActorId,
        job: Arc<str>,
        root: BoxedExecutor,
        collector: mpsc::UnboundedSender<Collect>,
        outputs: Vec<Output>,
    ) -> Self {
        Self { id, job, root, collector, outputs }
    }

    /// Starts the actor on the tokio runtime.
    pub fn spawn(self) -> JoinHandle<()> {
        let (job, id, collector) = (self.job.clone(), self.id, self.collector.clone());
        tokio::spawn(in_job(job, async move {
            // A panic is a failure like any other: the barrier manager recovers the jobs.
            if let Err(panic) = AssertUnwindSafe(self.run()).catch_unwind().await {
                let error = panic_message(&panic);
                tracing::error!(actor = %id, %error, "actor panicked");
                let _ = collector.send(Collect::Failed { actor: id, error });
            }
        }))
    }

    async fn run(self) {
        let Self { id, job, root, collector, mut outputs } = self;
        let name = root.identity().to_owned();
        match drive(id, &job, root, &collector, &mut outputs).await {
            Ok(()) => tracing::debug!(actor = %id, "actor stopped"),
            Err(e) => {
                tracing::error!(actor = %id, %job, executor = %name, error = %e, "actor failed");
                let _ = collector.send(Collect::Failed { actor: id, error: e.to_string() });
            }
        }
    }
}

/// Pulls every message from `root` and sends it on, reporting checkpoint barriers; returns at
/// the end of the stream or at a barrier that stops the actor.
async fn drive(
    id: ActorId,
    job: &str,
    root: BoxedExecutor,
    collector: &mpsc::UnboundedSender<Collect>,
    outputs: &mut Vec<Output>,
) -> Result<()> {
    let mut stream = root.execute();
    while let Some(msg) = stream.next().await {
        match msg? {
            Message::Barrier(b) => {
                outputs.extend(b.added_outputs(id).iter().cloned());
                let (checkpoint, epoch, stop) = (b.is_checkpoint(), b.epoch.prev, b.stops(id));
                dispatch(outputs, Message::Barrier(b)).await?;
                if checkpoint {
                    let _ = collector.send(Collect::Done { actor: id, epoch });
                }
                if stop {
                    tracing::debug!(actor = %id, %epoch, "actor stopped by a barrier");
                    return Ok(());
                }
            }
            Message::Chunk(_) if crate::failpoint::fires(|| format!("actor:{job}")) => {
                return Err(Error::Stream(format!("failpoint actor:{job}")));
            }
            msg => dispatch(outputs, msg).await?,
        }
    }
    Ok(())
}

/// The text of a panic's payload.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => format!("panic: {s}"),
        (_, Some(s)) => format!("panic: {s}"),
        _ => "panic".to_owned(),
    }
}

/// Sends `msg` to every output; an output whose receivers are gone (its job was dropped) is
/// removed.
async fn dispatch(outputs: &mut Vec<Output>, msg: Message) -> Result<()> {
    let mut i = 0;
    while i < outputs.len() {
        if outputs[i].send(msg.clone()).await? {
            i += 1;
        } else {
            outputs.swap_remove(i);
        }
    }
    Ok(())
}
