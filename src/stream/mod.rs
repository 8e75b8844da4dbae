//! The streaming runtime: messages between executors, executors, actors and the barrier
//! manager that cuts epochs and commits checkpoints.

pub mod actor;
pub mod barrier;
pub mod executor;
pub mod message;
