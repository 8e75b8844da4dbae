//! The barrier manager: cuts time into epochs and commits checkpoints.
//!
//! Every interval (or sooner, when a statement asks) it injects a checkpoint barrier into every
//! source actor, waits until every actor has collected it, then commits the epoch the barrier
//! ends: all state-table writes of that epoch and the epoch number go to RocksDB in one atomic
//! write. One barrier is in flight at a time, so actors are added and removed only between
//! checkpoints.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::MissedTickBehavior;

use crate::catalog::{ActorId, Epoch};
use crate::error::{Error, Result};
use crate::storage::store::Store;
use crate::stream::message::Barrier;

/// What an actor reports back to the barrier manager.
#[derive(Debug)]
pub enum Collect {
    /// The actor has passed the checkpoint barrier that ends `epoch`.
    Done {
        /// Which actor.
        actor: ActorId,
        /// The epoch the barrier ended.
        epoch: Epoch,
    },
    /// The actor failed; the streaming graph can no longer make progress.
    Failed {
        /// Which actor.
        actor: ActorId,
        /// Why.
        error: String,
    },
}

enum Command {
    AddActor {
        actor: ActorId,
        barriers: mpsc::UnboundedSender<Barrier>,
        done: oneshot::Sender<()>,
    },
    RemoveActor {
        actor: ActorId,
        done: oneshot::Sender<()>,
    },
    Checkpoint {
        done: Option<oneshot::Sender<Epoch>>,
    },
}

/// A cheap handle to talk to the barrier manager.
#[derive(Clone)]
pub struct BarrierHandle {
    commands: mpsc::UnboundedSender<Command>,
    collect: mpsc::UnboundedSender<Collect>,
}

impl BarrierHandle {
    /// Registers a source actor; it receives its initial barrier right away.
    pub async fn add_actor(
        &self,
        actor: ActorId,
        barriers: mpsc::UnboundedSender<Barrier>,
    ) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.send(Command::AddActor {
            actor,
            barriers,
            done,
        })?;
        wait.await.map_err(|_| Error::Shutdown)
    }

    /// Unregisters a source actor between two checkpoints; its barrier channel is closed, which
    /// ends the actor.
    pub async fn remove_actor(&self, actor: ActorId) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.send(Command::RemoveActor { actor, done })?;
        wait.await.map_err(|_| Error::Shutdown)
    }

    /// Asks for a checkpoint as soon as possible, without waiting for it.
    pub fn request_checkpoint(&self) {
        let _ = self.commands.send(Command::Checkpoint { done: None });
    }

    /// Forces a checkpoint and returns the epoch it committed.
    pub async fn flush(&self) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Checkpoint { done: Some(done) })?;
        wait.await.map_err(|_| Error::Shutdown)
    }

    /// The channel actors report collection on.
    pub fn collector(&self) -> mpsc::UnboundedSender<Collect> {
        self.collect.clone()
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands.send(command).map_err(|_| Error::Shutdown)
    }
}

/// Injects barriers and commits checkpoints.
pub struct BarrierManager {
    store: Arc<Store>,
    interval: Duration,
    /// The epoch currently open: chunks emitted now belong to it.
    curr: Epoch,
    actors: HashMap<ActorId, mpsc::UnboundedSender<Barrier>>,
    commands: mpsc::UnboundedReceiver<Command>,
    collect: mpsc::UnboundedReceiver<Collect>,
}

impl BarrierManager {
    /// A manager that resumes after the store's committed epoch.
    pub fn new(store: Arc<Store>, interval: Duration) -> (Self, BarrierHandle) {
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (collect_tx, collect) = mpsc::unbounded_channel();
        let curr = store.committed_epoch().next();
        let manager = Self {
            store,
            interval,
            curr,
            actors: HashMap::new(),
            commands,
            collect,
        };
        (
            manager,
            BarrierHandle {
                commands: commands_tx,
                collect: collect_tx,
            },
        )
    }

    /// Runs until every handle is dropped; returns an error if a checkpoint cannot complete.
    pub async fn run(mut self) -> Result<()> {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let mut waiters = Vec::new();
            tokio::select! {
                _ = ticker.tick() => {}
                command = self.commands.recv() => {
                    let Some(command) = command else { return Ok(()) };
                    if !self.apply(command, &mut waiters) {
                        continue;
                    }
                }
            }
            // Commands that queued meanwhile: membership changes happen before the barrier,
            // checkpoint requests are served by it.
            while let Ok(command) = self.commands.try_recv() {
                self.apply(command, &mut waiters);
            }
            let epoch = self.checkpoint().await?;
            for waiter in waiters {
                let _ = waiter.send(epoch);
            }
        }
    }

    /// Applies a command; returns true if it asks for a checkpoint.
    fn apply(&mut self, command: Command, waiters: &mut Vec<oneshot::Sender<Epoch>>) -> bool {
        match command {
            Command::AddActor {
                actor,
                barriers,
                done,
            } => {
                // A closed channel means the actor already ended; its failure is reported on
                // the collect channel.
                let _ = barriers.send(Barrier::initial(self.curr));
                self.actors.insert(actor, barriers);
                let _ = done.send(());
                false
            }
            Command::RemoveActor { actor, done } => {
                self.actors.remove(&actor);
                let _ = done.send(());
                false
            }
            Command::Checkpoint { done } => {
                waiters.extend(done);
                true
            }
        }
    }

    /// Injects one checkpoint barrier, waits for every actor, and commits the epoch it ends.
    async fn checkpoint(&mut self) -> Result<Epoch> {
        let barrier = Barrier::checkpoint(self.curr);
        let prev = barrier.epoch.prev;
        for (actor, tx) in &self.actors {
            tx.send(barrier.clone())
                .map_err(|_| Error::Stream(format!("actor {actor} stopped unexpectedly")))?;
        }
        let mut pending: HashSet<ActorId> = self.actors.keys().copied().collect();
        while !pending.is_empty() {
            match self.collect.recv().await.ok_or(Error::Shutdown)? {
                Collect::Done { actor, epoch } if epoch == prev => {
                    pending.remove(&actor);
                }
                Collect::Done { actor, epoch } => {
                    return Err(Error::Stream(format!(
                        "actor {actor} collected epoch {epoch} while {prev} was in flight"
                    )));
                }
                Collect::Failed { actor, error } => {
                    return Err(Error::Stream(format!("actor {actor} failed: {error}")));
                }
            }
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.commit(prev))
            .await
            .map_err(|e| Error::Stream(format!("commit task failed: {e}")))??;
        self.curr = barrier.epoch.curr;
        Ok(prev)
    }
}
