//! Persistent state: the RocksDB store, the codecs of keys and rows, and state tables.

pub mod keycodec;
pub mod row_codec;
pub mod state_table;
pub mod store;
