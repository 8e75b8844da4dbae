//! Persistent state: the RocksDB store, the codecs of keys and rows, and state tables.

/// Storage keys: `table id | vnode | memcomparable primary key`, ordered like the keys.
pub mod keycodec;
/// Files RocksDB writes stay in the page cache: its advice to drop them is not passed on.
#[cfg(target_os = "linux")]
pub mod page_cache;
/// Row values: compact per-column encoding, Arrow columns in and out.
pub mod row_codec;
/// A relation's rows as a table: staged writes per epoch, reads of committed state.
pub mod state_table;
/// RocksDB: the `meta` and `state` column families, epochs staged and committed atomically.
pub mod store;
/// One epoch's writes to a state table: an arena, a hash index, key order built lazily.
pub mod write_buffer;
