//! Upstream connectors: the systems Sluice ingests changes from.

pub mod offset;
pub mod pg_reader;
pub mod postgres_cdc;
