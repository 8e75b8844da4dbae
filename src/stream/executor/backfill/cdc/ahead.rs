//! Changes to rows beyond a split's cursor, applied ahead of the snapshot and overwritten by the
//! page that reads them (`docs/cdc.md`, "Rows ahead of the cursor").

use super::*;

impl CdcBackfill {
    /// Whether a change to the row with `key`, beyond the cursor of split `index`, is applied
    /// at once rather than left to the page that will read the row; records the row as
    /// applied ahead. The table materializes upserts and the page overwrites what it finds (see
    /// [`CdcBackfill::overwrite_ahead`]), so only the order of changes to one key matters, and
    /// changes arrive in commit order. A delete is applied when the table holds the row; an
    /// insert or update when it carries every column or the table holds the row to keep the
    /// unsent ones from, and the table holds fewer than [`AHEAD_ROWS`] rows ahead.
    pub(super) fn apply_ahead(
        &mut self,
        index: usize,
        key: &[u8],
        op: Op,
        all_sent: bool,
        data: &RecordBatch,
        row: usize,
    ) -> Result<bool> {
        if op == Op::Delete {
            // Reading the snapshot again over stored rows, the table may hold the row although
            // no change applied it ahead; the materialize drops a delete of a row it lacks.
            let applied_ahead = self.splits[index].ahead.remove(key).is_some();
            return Ok(applied_ahead || self.config.overwrite);
        }
        if self.splits[index].ahead.contains_key(key) {
            return Ok(true);
        }
        if !all_sent || self.splits.iter().map(|s| s.ahead.len()).sum::<usize>() >= AHEAD_ROWS {
            return Ok(false);
        }
        let pk = &self.config.table.pk;
        let values = pk.iter().map(|&c| ScalarValue::try_from_array(data.column(c), row));
        let values = values.collect::<Result<_, _>>()?;
        self.splits[index].ahead.insert(key.to_vec(), values);
        Ok(true)
    }

    /// A page's rows when the table already holds some rows of its range (`covered`, applied
    /// ahead, or stored before a snapshot read again): those rows of the page go as upserts,
    /// which replace the stored version (all of them when the snapshot is read again: the
    /// materialize finds which it holds); rows of `covered` the page does not have were
    /// deleted upstream before its snapshot, and go as deletes; the other rows go as plain
    /// inserts.
    pub(super) fn overwrite_ahead(
        &self,
        rows: RecordBatch,
        mut covered: BTreeMap<Vec<u8>, Vec<ScalarValue>>,
    ) -> Result<Vec<StreamChunk>> {
        let keys = self.keys(&rows)?;
        let overwrite = self.config.overwrite;
        let stored: Vec<bool> =
            keys.iter().map(|k| covered.remove(k).is_some() || overwrite).collect();
        let mut out = Vec::new();
        let fresh =
            filter_record_batch(&rows, &BooleanArray::from_iter(stored.iter().map(|s| Some(!s))))?;
        if fresh.num_rows() > 0 {
            out.push(StreamChunk::inserts(fresh));
        }
        let upserts = filter_record_batch(&rows, &BooleanArray::from(stored))?;
        if upserts.num_rows() > 0 {
            let m = upserts.num_rows();
            let data = with_unchanged(upserts, all_sent_list(m))?;
            out.push(StreamChunk::new(vec![Op::Insert; m], data));
        }
        if !covered.is_empty() {
            let m = covered.len();
            let table = &self.config.table;
            let schema = nullable(&table.full_schema());
            let columns = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(c, field)| match table.pk.iter().position(|&p| p == c) {
                    Some(at) => {
                        let values = covered.values().map(|v| v[at].clone());
                        Ok(ScalarValue::iter_to_array(values)?)
                    }
                    None => Ok(arrow::array::new_null_array(field.data_type(), m)),
                })
                .collect::<Result<Vec<_>>>()?;
            let data = with_unchanged(RecordBatch::try_new(schema, columns)?, all_sent_list(m))?;
            out.push(StreamChunk::new(vec![Op::Delete; m], data));
        }
        Ok(out)
    }

    /// Finds the rows that changes applied ahead of the snapshot left in the table beyond each
    /// unfinished split's persisted cursor, after a restart.
    pub(super) fn restore_ahead(&mut self) -> Result<()> {
        for index in 0..self.splits.len() {
            let split = &self.splits[index];
            if split.finished {
                continue;
            }
            let from = match &split.cursor {
                Some((_, cursor)) => after(cursor),
                None => self.bound_key(split.range.start.as_deref())?.unwrap_or_default(),
            };
            let found = self.stored_keys(&from, split.end_key.as_deref())?;
            let split = &mut self.splits[index];
            split.ahead.extend(found);
            if !split.ahead.is_empty() {
                tracing::info!(split = %split.id, rows = split.ahead.len(), "rows applied ahead of the snapshot before the restart");
            }
        }
        Ok(())
    }

    /// The keys (without prefix) and key values of the committed rows of the table from `from`
    /// up to `to` (excluded; `None`: the end), in every vnode.
    pub(super) fn stored_keys(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> Result<BTreeMap<Vec<u8>, Vec<ScalarValue>>> {
        use crate::ids::VirtualNode;
        use crate::storage::keycodec::vnode_prefix;
        use crate::storage::row_codec::RowDecoder;
        let table = &self.config.table;
        let types: Vec<_> = table.columns.iter().map(|c| c.data_type).collect();
        let snapshot = self.store.snapshot();
        let mut found = Vec::new();
        let mut decoder = RowDecoder::widened(&types, &table.pk, &table.pk, 16, &table.widened);
        for vnode in 0..VirtualNode::COUNT {
            let prefix = vnode_prefix(table.id, VirtualNode(vnode as u16));
            let start = [&prefix[..], from].concat();
            let end = match to {
                Some(to) => [&prefix[..], to].concat(),
                None => crate::storage::keycodec::prefix_successor(&prefix)
                    .expect("a table id below the greatest"),
            };
            snapshot.scan(&start, &end, usize::MAX, |k, v| {
                found.push(k[KEY_PREFIX_LEN..].to_vec());
                decoder.push(k, v)
            })?;
        }
        let pk = decoder.finish();
        let mut keys = BTreeMap::new();
        for (row, key) in found.into_iter().enumerate() {
            let values = pk.iter().map(|c| ScalarValue::try_from_array(c, row));
            keys.insert(key, values.collect::<Result<_, _>>()?);
        }
        Ok(keys)
    }
}

/// The smallest key after `key`.
pub(super) fn after(key: &[u8]) -> Vec<u8> {
    let mut after = key.to_vec();
    after.push(0);
    after
}
