//! Upstream connectors: the systems Sluice ingests changes from.

pub mod postgres_cdc;
