//! The barrier manager: cuts time into epochs and commits checkpoints.
//!
//! Every interval (or sooner, when a statement asks) it injects a checkpoint barrier into every
//! source actor, waits until every actor has collected it, then commits the epoch the barrier
//! ends: all state-table writes of that epoch and the epoch number go to RocksDB in one atomic
//! write. One barrier is in flight at a time, so actors are added and removed only between
//! checkpoints.
//!
//! The commit of a collected epoch runs on a blocking thread while the next barrier is injected
//! and collected ([`Committing`]): a backfill whose epoch fills while the one before commits
//! does not wait for it. Commits still happen one at a time and in epoch order (the next one
//! starts once the one before has ended), and a statement waiting for an epoch is answered once
//! that epoch is committed. Membership changes and recoveries wait for the commit in flight, so
//! they start from a committed epoch right before the current one, as without the overlap.
//!
//! While a backfill runs (an executor holds a [`BackfillTicket`]), timed checkpoints come at most
//! once per backfill interval (1 s unless configured): every checkpoint of a backfill commits its
//! state, and an aggregate that holds its groups rewrites all of them at each one, so four
//! checkpoints a second cost a backfill a third of its time where one a second does not. Asked
//! checkpoints still come at once: a backfill whose epoch fills up, and a source whose changes pile
//! up, end their epochs as before, so memory stays bounded and busy change streams stay fresh.
//!
//! An actor that fails (an error or a panic) does not stop the server: the checkpoint in
//! flight is given up, everything staged after the committed epoch is discarded (those epochs
//! are *lost*: never committed, and statements waiting for them fail with 40001), and the
//! engine rebuilds every job from the committed state, as after a restart. Only a failure to
//! write to RocksDB ends the manager.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::catalog::{ActorId, Epoch, TableId};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::storage::store::{Committed, Store};
use crate::stream::message::Output;
use crate::stream::message::{Barrier, Mutation};

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
    Register {
        sources: Vec<(ActorId, mpsc::UnboundedSender<Barrier>)>,
        actors: Vec<ActorId>,
        outputs: HashMap<ActorId, Vec<Output>>,
        done: oneshot::Sender<Result<Epoch>>,
    },
    Unregister {
        actors: Vec<ActorId>,
        tasks: Vec<JoinHandle<()>>,
        done: oneshot::Sender<()>,
    },
    Checkpoint {
        done: Option<oneshot::Sender<Result<Epoch>>>,
    },
    Throttle {
        job: TableId,
        limit: Option<u64>,
        done: oneshot::Sender<Result<Epoch>>,
    },
    Release {
        job: TableId,
        done: oneshot::Sender<Result<Epoch>>,
    },
    Replace(Replacement, oneshot::Sender<Result<Epoch>>),
    /// Rebuild every job from the committed state, as after a failure.
    Rebuild {
        reason: String,
    },
}

/// Actors replaced by others at one checkpoint barrier (see [`BarrierHandle::replace`]).
pub struct Replacement {
    /// Actors that collect the barrier and stop after it.
    pub stop: Vec<ActorId>,
    /// Actors that start with the barrier: their upstreams send it to them first.
    pub start: Vec<ActorId>,
    /// Outputs the barrier adds to running actors, towards the new ones.
    pub outputs: HashMap<ActorId, Vec<Output>>,
}

/// A cheap handle to talk to the barrier manager.
#[derive(Clone)]
pub struct BarrierHandle {
    commands: mpsc::UnboundedSender<Command>,
    collect: mpsc::UnboundedSender<Collect>,
    /// The backfills running now (see [`BackfillTicket`]).
    backfills: Arc<AtomicUsize>,
}

/// Held by an executor while it backfills: timed checkpoints then come at most once per backfill
/// interval. Dropping it ends the backfill's claim.
#[derive(Debug)]
pub struct BackfillTicket(Arc<AtomicUsize>);

impl Drop for BackfillTicket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BarrierHandle {
    /// Registers the actors of a job. Each source actor gets its initial barrier right away.
    ///
    /// With no `outputs`, the actors start with the next barrier their upstreams send (this is
    /// how jobs are wired at start-up). With `outputs`, the next checkpoint barrier carries them
    /// to the upstream actors, which attach the new job's input channels at that barrier; the
    /// call returns the epoch that barrier ends, which is committed once the call returns.
    pub async fn register(
        &self,
        sources: Vec<(ActorId, mpsc::UnboundedSender<Barrier>)>,
        actors: Vec<ActorId>,
        outputs: HashMap<ActorId, Vec<Output>>,
    ) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Register { sources, actors, outputs, done })?;
        wait.await.map_err(|_| Error::Shutdown)?
    }

    /// Stops actors between two checkpoints: they leave the collect set, their tasks are
    /// aborted and awaited, and source actors' barrier channels close.
    pub async fn unregister(&self, actors: Vec<ActorId>, tasks: Vec<JoinHandle<()>>) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Unregister { actors, tasks, done })?;
        wait.await.map_err(|_| Error::Shutdown)
    }

    /// Sets the backfill rate limit of `job`'s running backfills at the next checkpoint
    /// barrier; returns the epoch that barrier ended, once it is committed.
    pub async fn throttle(&self, job: TableId, limit: Option<u64>) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Throttle { job, limit, done })?;
        wait.await.map_err(|_| Error::Shutdown)?
    }

    /// Releases the held output of `job`'s partial aggregates at the next checkpoint barrier;
    /// returns the epoch that barrier ended, once it is committed.
    pub async fn release(&self, job: TableId) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Release { job, done })?;
        wait.await.map_err(|_| Error::Shutdown)?
    }

    /// Replaces actors at the next checkpoint barrier: the old ones commit their state for the
    /// epoch it ends and stop; the new ones, already spawned, receive that barrier as their
    /// first message through `outputs` (added to running upstream actors) or from each other.
    /// Returns the epoch the barrier ended, once it is committed.
    pub async fn replace(&self, replacement: Replacement) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Replace(replacement, done))?;
        wait.await.map_err(|_| Error::Shutdown)?
    }

    /// Has every job rebuilt from the committed state, as after an actor's failure (the engine
    /// changes what it rebuilds first, e.g. `ALTER TABLE .. RESNAPSHOT`). What was not
    /// committed is discarded: call [`Self::flush`] first to keep it.
    pub fn rebuild(&self, reason: String) -> Result<()> {
        self.send(Command::Rebuild { reason })
    }

    /// Says a backfill runs until the ticket is dropped.
    pub fn backfilling(&self) -> BackfillTicket {
        self.backfills.fetch_add(1, Ordering::Relaxed);
        BackfillTicket(self.backfills.clone())
    }

    /// Asks for a checkpoint as soon as possible, without waiting for it.
    pub fn request_checkpoint(&self) {
        let _ = self.commands.send(Command::Checkpoint { done: None });
    }

    /// Forces a checkpoint and returns the epoch it committed.
    pub async fn flush(&self) -> Result<Epoch> {
        let (done, wait) = oneshot::channel();
        self.send(Command::Checkpoint { done: Some(done) })?;
        wait.await.map_err(|_| Error::Shutdown)?
    }

    /// The channel actors report collection on.
    pub fn collector(&self) -> mpsc::UnboundedSender<Collect> {
        self.collect.clone()
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands.send(command).map_err(|_| Error::Shutdown)
    }
}

/// Why a checkpoint did not complete.
enum Failure {
    /// An actor failed or stopped: the jobs recover from the committed state.
    Actor(String),
    /// Committing failed or the runtime is shutting down: the server cannot go on.
    Fatal(Error),
}

/// Someone waiting for a checkpoint: answered with the epoch once it is committed.
type Waiter = oneshot::Sender<Result<Epoch>>;

/// A collected epoch being committed on a blocking thread.
struct Committing {
    epoch: Epoch,
    /// When its barrier was injected, for the barrier latency.
    injected: Instant,
    /// When its commit started, for the commit's own time.
    started: Instant,
    task: JoinHandle<Result<Committed>>,
    waiters: Vec<Waiter>,
}

/// The least time between timed checkpoints while a backfill runs, unless configured.
pub const DEFAULT_BACKFILL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a checkpoint waits for its actors before it logs which it still waits for (and
/// again each time as long).
const STALL_REPORT: Duration = Duration::from_secs(20);

/// Injects barriers and commits checkpoints.
pub struct BarrierManager {
    store: Arc<Store>,
    interval: Duration,
    /// The least time between timed checkpoints while a backfill runs.
    backfill_interval: Duration,
    /// The backfills running now (see [`BackfillTicket`]).
    backfills: Arc<AtomicUsize>,
    /// When the last checkpoint barrier was injected.
    last_injected: Instant,
    /// The epoch currently open: chunks emitted now belong to it.
    curr: Epoch,
    /// Source actors, which barriers are injected into.
    sources: HashMap<ActorId, mpsc::UnboundedSender<Barrier>>,
    /// Every actor, which must collect each checkpoint barrier.
    actors: HashSet<ActorId>,
    /// What the next checkpoint barrier changes.
    pending: Mutation,
    /// Actors that leave the collect set once the next checkpoint is committed.
    stopping: Vec<ActorId>,
    commands: mpsc::UnboundedReceiver<Command>,
    collect: mpsc::UnboundedReceiver<Collect>,
    /// Where recoveries are asked for, with the failure that caused each.
    recoveries: mpsc::UnboundedSender<String>,
    /// Where checkpoint latency and size are counted.
    metrics: Arc<Metrics>,
    /// The commit in flight, if any.
    committing: Option<Committing>,
}

impl BarrierManager {
    /// A manager that resumes after the store's committed epoch. The receiver gets a message
    /// each time the streaming jobs must be rebuilt after an actor failed (see `recover`).
    pub fn new(
        store: Arc<Store>,
        interval: Duration,
    ) -> (Self, BarrierHandle, mpsc::UnboundedReceiver<String>) {
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let (collect_tx, collect) = mpsc::unbounded_channel();
        let (recoveries, recovery_rx) = mpsc::unbounded_channel();
        let curr = store.committed_epoch().next();
        let backfills = Arc::new(AtomicUsize::new(0));
        let manager = Self {
            store,
            interval,
            backfill_interval: DEFAULT_BACKFILL_INTERVAL,
            backfills: backfills.clone(),
            last_injected: Instant::now(),
            curr,
            sources: HashMap::new(),
            actors: HashSet::new(),
            pending: Mutation::default(),
            stopping: Vec::new(),
            commands,
            collect,
            recoveries,
            metrics: Arc::default(),
            committing: None,
        };
        let handle = BarrierHandle { commands: commands_tx, collect: collect_tx, backfills };
        (manager, handle, recovery_rx)
    }

    /// Spaces timed checkpoints at least `interval` apart while a backfill runs.
    pub fn with_backfill_interval(mut self, interval: Duration) -> Self {
        self.backfill_interval = interval;
        self
    }

    /// Counts checkpoints in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs until every handle is dropped; returns an error if a checkpoint cannot complete.
    pub async fn run(mut self) -> Result<()> {
        // The first checkpoint comes one interval after the start, as every later one.
        let first = tokio::time::Instant::now().checked_add(self.interval);
        let mut ticker = match first {
            Some(first) => tokio::time::interval_at(first, self.interval),
            None => tokio::time::interval(self.interval),
        };
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let mut waiters = Vec::new();
            tokio::select! {
                _ = ticker.tick() => {
                    let backfilling = self.backfills.load(Ordering::Relaxed) > 0;
                    // Half a tick of slack: ticks come `interval` apart, not exactly on time.
                    let since = self.last_injected.elapsed() + self.interval / 2;
                    if backfilling && since < self.backfill_interval {
                        continue;
                    }
                }
                committed = async { (&mut self.committing.as_mut().expect("checked").task).await },
                    if self.committing.is_some() =>
                {
                    let committing = self.committing.take().expect("checked");
                    self.committed(committing, committed)?;
                    continue;
                }
                command = self.commands.recv() => {
                    let Some(command) = command else {
                        self.finish_commit().await?;
                        return Ok(());
                    };
                    if !self.apply(command, &mut waiters).await? {
                        continue;
                    }
                }
            }
            // Commands that queued meanwhile: membership changes happen before the barrier,
            // checkpoint requests are served by it.
            while let Ok(command) = self.commands.try_recv() {
                self.apply(command, &mut waiters).await?;
            }
            match self.inject_and_collect().await {
                Ok((injected, barrier)) => self.start_commit(injected, barrier, waiters).await?,
                Err(Failure::Actor(error)) => {
                    // The epoch before was collected: it commits.
                    self.finish_commit().await?;
                    let lost = self.recover(&error);
                    for waiter in waiters {
                        let _ = waiter.send(Err(Error::Recovered(lost.clone())));
                    }
                }
                Err(Failure::Fatal(e)) => return Err(e),
            }
        }
    }

    /// Waits for the commit in flight, if any, and answers its waiters.
    async fn finish_commit(&mut self) -> Result<()> {
        match self.committing.take() {
            Some(mut committing) => {
                let committed = (&mut committing.task).await;
                self.committed(committing, committed)
            }
            None => Ok(()),
        }
    }

    /// Records a finished commit and answers its waiters; a failed commit ends the manager.
    fn committed(
        &mut self,
        committing: Committing,
        result: std::result::Result<Result<Committed>, tokio::task::JoinError>,
    ) -> Result<()> {
        let committed = result
            .map_err(|e| Error::Stream(format!("commit task failed: {e}")))
            .and_then(|r| r)?;
        let Committing { epoch, injected, started, waiters, .. } = committing;
        self.metrics.checkpoint(injected.elapsed(), started.elapsed(), committed);
        for waiter in waiters {
            let _ = waiter.send(Ok(epoch));
        }
        Ok(())
    }

    /// Gives up the checkpoint in flight after an actor failed: everything after the committed
    /// epoch is discarded, the manager forgets every actor, and the engine is asked to rebuild
    /// every job from the committed state (it registers the new actors as at start-up). Epochs
    /// go on above the discarded ones. Returns why, for those waiting on the checkpoint.
    fn recover(&mut self, error: &str) -> String {
        let lost = self.curr.next();
        tracing::error!(%error, committed = %self.store.committed_epoch(), discarded_upto = %lost,
            "an actor failed; recovering every streaming job from the last checkpoint");
        self.store.discard_uncommitted(lost);
        self.curr = lost.next();
        self.sources.clear();
        self.actors.clear();
        self.stopping.clear();
        self.pending = Mutation::default();
        while self.collect.try_recv().is_ok() {}
        let _ = self.recoveries.send(error.to_owned());
        format!("an actor failed ({error})")
    }

    /// Applies a command; returns true if it needs a checkpoint. Membership changes wait for
    /// the commit in flight first.
    async fn apply(&mut self, command: Command, waiters: &mut Vec<Waiter>) -> Result<bool> {
        if matches!(
            command,
            Command::Register { .. }
                | Command::Unregister { .. }
                | Command::Replace(..)
                | Command::Rebuild { .. }
        ) {
            self.finish_commit().await?;
        }
        Ok(match command {
            Command::Register { sources, actors, outputs, done } => {
                for (actor, barriers) in sources {
                    // A closed channel means the actor already ended; its failure is reported
                    // on the collect channel.
                    let _ =
                        barriers.send(Barrier::initial(self.store.committed_epoch(), self.curr));
                    self.sources.insert(actor, barriers);
                }
                self.actors.extend(actors);
                if outputs.is_empty() {
                    let _ = done.send(Ok(self.store.committed_epoch()));
                    return Ok(false);
                }
                for (actor, senders) in outputs {
                    self.pending.add_outputs.entry(actor).or_default().extend(senders);
                }
                waiters.push(done);
                true
            }
            Command::Unregister { actors, tasks, done } => {
                for actor in &actors {
                    self.sources.remove(actor);
                    self.actors.remove(actor);
                }
                for task in tasks {
                    task.abort();
                    let _ = task.await;
                }
                let _ = done.send(());
                false
            }
            Command::Checkpoint { done } => {
                waiters.extend(done);
                true
            }
            Command::Rebuild { reason } => {
                self.recover(&reason);
                false
            }
            Command::Throttle { job, limit, done } => {
                self.pending.throttle.insert(job, limit);
                waiters.push(done);
                true
            }
            Command::Release { job, done } => {
                self.pending.release.insert(job);
                waiters.push(done);
                true
            }
            Command::Replace(Replacement { stop, start, outputs }, done) => {
                self.actors.extend(start);
                for (actor, senders) in outputs {
                    self.pending.add_outputs.entry(actor).or_default().extend(senders);
                }
                self.pending.stop.extend(stop.iter().copied());
                self.stopping.extend(stop);
                waiters.push(done);
                true
            }
        })
    }

    /// Why a source actor stopped: the failure an actor reported, if one did.
    fn reported_failure(&mut self, stopped: ActorId) -> String {
        while let Ok(collect) = self.collect.try_recv() {
            if let Collect::Failed { actor, error } = collect
                && self.actors.contains(&actor)
            {
                return format!("actor {actor} failed: {error}");
            }
        }
        format!("actor {stopped} stopped unexpectedly")
    }

    /// Starts the commit of the epoch `barrier` ended (collected by every actor) once the
    /// commit before has ended; `waiters` are answered after it.
    async fn start_commit(
        &mut self,
        injected: Instant,
        barrier: Barrier,
        waiters: Vec<Waiter>,
    ) -> Result<()> {
        self.finish_commit().await?;
        let epoch = barrier.epoch.prev;
        let store = self.store.clone();
        let task = tokio::task::spawn_blocking(move || store.commit(epoch));
        let started = Instant::now();
        self.committing = Some(Committing { epoch, injected, started, task, waiters });
        self.curr = barrier.epoch.curr;
        for actor in self.stopping.drain(..) {
            self.actors.remove(&actor);
            self.sources.remove(&actor);
        }
        Ok(())
    }

    /// Injects one checkpoint barrier and waits until every actor has collected it; returns
    /// when it was injected and the barrier.
    async fn inject_and_collect(&mut self) -> Result<(Instant, Barrier), Failure> {
        let injected = Instant::now();
        self.last_injected = injected;
        let mut barrier = Barrier::checkpoint(self.curr);
        if !self.pending.is_empty() {
            barrier = barrier.with_mutation(std::mem::take(&mut self.pending));
        }
        let prev = barrier.epoch.prev;
        let closed = self
            .sources
            .iter()
            .find_map(|(actor, tx)| tx.send(barrier.clone()).is_err().then_some(*actor));
        if let Some(actor) = closed {
            return Err(Failure::Actor(self.reported_failure(actor)));
        }
        drop(barrier.mutation.take());
        let mut pending = self.actors.clone();
        let mut waited = Duration::ZERO;
        while !pending.is_empty() {
            // A checkpoint that waits long for some actors says which: a stuck actor stalls
            // every job it shares a source or an input with, and nothing else would tell.
            let report = match tokio::time::timeout(STALL_REPORT, self.collect.recv()).await {
                Ok(report) => report,
                Err(_) => {
                    waited += STALL_REPORT;
                    let mut actors: Vec<ActorId> = pending.iter().copied().collect();
                    actors.sort_unstable();
                    tracing::error!(epoch = %prev, waited_secs = waited.as_secs(), ?actors, "a checkpoint is still waiting for actors to collect its barrier");
                    continue;
                }
            };
            match report.ok_or(Failure::Fatal(Error::Shutdown))? {
                // Reports of actors of before a recovery, which are being stopped.
                Collect::Done { actor, .. } | Collect::Failed { actor, .. }
                    if !self.actors.contains(&actor) => {}
                Collect::Done { actor, epoch } if epoch == prev => {
                    pending.remove(&actor);
                }
                Collect::Done { actor, epoch } => {
                    return Err(Failure::Actor(format!(
                        "actor {actor} collected epoch {epoch} while {prev} was in flight"
                    )));
                }
                Collect::Failed { actor, error } => {
                    return Err(Failure::Actor(format!("actor {actor} failed: {error}")));
                }
            }
        }
        Ok((injected, barrier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::write_buffer::WriteBuffer;
    use crate::stream::message::BarrierKind;

    const ACTOR: ActorId = ActorId(1);

    fn key(epoch: Epoch) -> Vec<u8> {
        [&[0, 0, 0, 1][..], &epoch.0.to_be_bytes()].concat()
    }

    /// An actor that writes one row per checkpoint. Once `armed`, it asks for the next
    /// checkpoint right after collecting one (as a backfill whose epoch is full), and fails on
    /// that next checkpoint's barrier.
    fn actor(
        store: Arc<Store>,
        mut barriers: mpsc::UnboundedReceiver<Barrier>,
        handle: BarrierHandle,
        armed: Arc<std::sync::atomic::AtomicBool>,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut requested = false;
            while let Some(barrier) = barriers.recv().await {
                if barrier.kind != BarrierKind::Checkpoint {
                    continue;
                }
                let epoch = barrier.epoch.prev;
                if requested {
                    let failed = Collect::Failed { actor: ACTOR, error: "boom".into() };
                    let _ = handle.collector().send(failed);
                    return;
                }
                let mut writes = WriteBuffer::new();
                writes.insert(&key(epoch), Some(b"v"));
                store.stage(epoch, Arc::new(writes));
                let _ = handle.collector().send(Collect::Done { actor: ACTOR, epoch });
                if armed.load(std::sync::atomic::Ordering::SeqCst) {
                    handle.request_checkpoint();
                    requested = true;
                }
            }
        })
    }

    #[tokio::test]
    async fn a_failure_while_the_epoch_before_commits_loses_only_the_epochs_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (manager, handle, mut recoveries) =
            BarrierManager::new(store.clone(), Duration::from_secs(3600));
        let manager = tokio::spawn(manager.run());
        let (tx, rx) = mpsc::unbounded_channel();
        handle.register(vec![(ACTOR, tx)], vec![ACTOR], HashMap::new()).await.unwrap();
        let armed = Arc::default();
        let _actor = actor(store.clone(), rx, handle.clone(), Arc::clone(&armed));
        let first = handle.flush().await.unwrap();
        armed.store(true, std::sync::atomic::Ordering::SeqCst);
        // The second checkpoint's epoch may still be committing when the actor fails on the
        // third barrier: the second is committed all the same, the third is lost.
        let second = handle.flush().await.unwrap();
        assert!(second > first);
        assert_eq!(recoveries.recv().await.as_deref(), Some("actor 1 failed: boom"));
        assert!(store.committed_epoch() >= second);
        assert!(
            !store.is_lost(second) && store.is_lost(second.next()),
            "{first} {second} {}",
            store.committed_epoch()
        );
        for epoch in [first, second] {
            assert_eq!(store.get(&key(epoch)).unwrap(), Some(b"v".to_vec()), "epoch {epoch}");
        }
        drop(handle);
        manager.await.unwrap().unwrap();
    }

    /// An actor that collects every checkpoint barrier and says so on `seen`.
    fn collecting_actor(
        mut barriers: mpsc::UnboundedReceiver<Barrier>,
        handle: BarrierHandle,
        seen: mpsc::UnboundedSender<Epoch>,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(barrier) = barriers.recv().await {
                if barrier.kind == BarrierKind::Checkpoint {
                    let epoch = barrier.epoch.prev;
                    let _ = handle.collector().send(Collect::Done { actor: ACTOR, epoch });
                    let _ = seen.send(epoch);
                }
            }
        })
    }

    /// The time the next `n` checkpoint barriers take to arrive.
    async fn time_of(seen: &mut mpsc::UnboundedReceiver<Epoch>, n: usize) -> Duration {
        while seen.try_recv().is_ok() {}
        let start = Instant::now();
        for _ in 0..n {
            seen.recv().await.expect("the actor runs");
        }
        start.elapsed()
    }

    #[tokio::test]
    async fn timed_checkpoints_thin_out_while_a_backfill_runs_and_asked_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (manager, handle, _recoveries) =
            BarrierManager::new(store.clone(), Duration::from_millis(10));
        let manager = tokio::spawn(manager.with_backfill_interval(Duration::from_secs(1)).run());
        let (tx, rx) = mpsc::unbounded_channel();
        handle.register(vec![(ACTOR, tx)], vec![ACTOR], HashMap::new()).await.unwrap();
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let actor = collecting_actor(rx, handle.clone(), seen_tx);
        // No backfill: a checkpoint every 10 ms.
        let alone = time_of(&mut seen, 10).await;
        assert!(alone < Duration::from_millis(900), "10 checkpoints took {alone:?}");
        // A backfill: a second apart.
        let ticket = handle.backfilling();
        let backfilling = time_of(&mut seen, 3).await;
        assert!(backfilling > Duration::from_millis(2500), "3 checkpoints took {backfilling:?}");
        // A checkpoint asked for comes at once all the same.
        let asked = tokio::time::timeout(Duration::from_millis(500), handle.flush()).await;
        asked.expect("an asked checkpoint comes at once").unwrap();
        // The backfill ends: checkpoints come every 10 ms again.
        drop(ticket);
        let after = time_of(&mut seen, 10).await;
        assert!(after < Duration::from_millis(1900), "10 checkpoints took {after:?}");
        actor.abort();
        let _ = actor.await;
        drop(handle);
        // A barrier may be in flight to the aborted actor: the manager then stops with it.
        let end = manager.await.unwrap();
        assert!(matches!(end, Ok(()) | Err(Error::Shutdown)), "{end:?}");
    }
}
