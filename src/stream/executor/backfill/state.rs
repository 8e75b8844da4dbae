//! The progress state tables of the backfills: their columns, in one place.
//!
//! Both tables are internal tables a user can `SELECT` (as in RisingWave):
//! - a view's stream scan: `vnode | <upstream pk> | backfill_finished | row_count`, one row per
//!   vnode, the pk being the last key read in that vnode (NULL: none yet);
//! - a CDC table: `split_id | <table pk> | backfill_finished | row_count | cdc_offset`, one row
//!   per upstream table (split), the pk being the snapshot cursor and `cdc_offset` the JSON of a
//!   [`CdcOffset`](crate::connector::offset::CdcOffset).
//!
//! [`crate::engine::progress::persisted_progress`] reads either kind by the column names below.

use crate::catalog::ColumnCatalog;
use crate::types::DataType;

/// Whether the unit (vnode or split) has read all of its snapshot.
pub const FINISHED: &str = "backfill_finished";
/// Snapshot rows the unit has read.
pub const ROW_COUNT: &str = "row_count";
/// The upstream position of a CDC backfill's last page.
pub const CDC_OFFSET: &str = "cdc_offset";

fn column(name: &str, data_type: DataType) -> ColumnCatalog {
    ColumnCatalog { name: name.into(), data_type, hidden: false }
}

/// The columns of a stream scan's progress table, for an upstream keyed by `pk`.
pub fn arrangement_columns(pk: impl IntoIterator<Item = ColumnCatalog>) -> Vec<ColumnCatalog> {
    let mut columns = vec![column("vnode", DataType::Int32)];
    columns.extend(pk.into_iter().map(|c| ColumnCatalog { hidden: false, ..c }));
    columns.extend([column(FINISHED, DataType::Boolean), column(ROW_COUNT, DataType::Int64)]);
    columns
}

/// The columns of a CDC table's progress table, for a table keyed by `pk`.
pub fn cdc_columns(pk: impl IntoIterator<Item = ColumnCatalog>) -> Vec<ColumnCatalog> {
    let mut columns = vec![column("split_id", DataType::Varchar)];
    columns.extend(pk.into_iter().map(|c| ColumnCatalog { hidden: false, ..c }));
    columns.extend([
        column(FINISHED, DataType::Boolean),
        column(ROW_COUNT, DataType::Int64),
        column(CDC_OFFSET, DataType::Jsonb),
    ]);
    columns
}
