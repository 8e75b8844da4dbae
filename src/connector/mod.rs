//! Upstream connectors: the systems Sluice ingests changes from.
//!
//! [`source`](crate::connector::source) is the interface both upstreams implement and
//! [`common`](crate::connector::common) what they share; each upstream has its own folder
//! ([`postgres`](crate::connector::postgres), [`mysql`](crate::connector::mysql)).

/// What both upstreams share: upstream table descriptions and change rows.
pub mod common;
/// A MySQL / MariaDB CDC source: options, connection, validation; its snapshot and binlog.
pub mod mysql;
/// Upstream positions (`CdcOffset`) and how progress tables store them.
pub mod offset;
/// A Postgres CDC source: options, connection, slot and publication; its snapshot pages and
/// change stream.
pub mod postgres;
/// The interface both upstreams implement: `SourceConfig` and `UpstreamSession`.
pub mod source;
