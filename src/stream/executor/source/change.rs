//! The change rows a CDC source emits, the contract between a source's reader and the CDC
//! tables' backfills, shared by both upstreams.
//!
//! A change row is `table | delete | position | values | unchanged | replaces | truncate |
//! relation`: `values`
//! is the row as Postgres prints it, a list of text (one item per upstream column, NULL for
//! NULL or not sent), and `unchanged` the list of upstream column indices the change did not
//! send. An upstream `TRUNCATE` is a row of its own, with `truncate` set and no values, and so
//! is the description of a table's columns (`relation` set, their names as `values`, and
//! their types, where the stream names them, in `unchanged`: type oid and modifier of each
//! column in turn, see [`Changes::types_of`]). The
//! stream is shared by every CDC table of the source, tables of different columns and types,
//! so the values stay text here: each table's backfill picks its rows by `table` and casts them
//! to its own column types ([`Changes`] reads the columns back, typed).

use std::sync::Arc;

use arrow::array::{
    Array, AsArray, BooleanArray, Int64Array, ListArray, ListBuilder, RecordBatch, StringArray,
    StringBuilder, UInt32Builder,
};
use arrow::datatypes::{DataType as ArrowType, Field, Int64Type, Schema, SchemaRef};

use crate::connector::common::{RowChange, TypeId};
use crate::error::{Error, Result};
use crate::stream::message::StreamChunk;
use crate::stream::{index_list_type, indices_at};

/// The schema of the rows a source emits, one per change (see the module docs): `table`
/// (`schema.table`), `delete`, `position` (the end of the change's transaction), `values` (text per
/// upstream column), `unchanged` (upstream column indices not sent; NULL or empty: none),
/// `replaces` (see [`RowChange::replaces`]), `truncate` (see [`RowChange::truncate`]),
/// `relation` (see [`RowChange::relation`]) and `xid` (see [`RowChange::xid`]).
pub fn change_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("table", ArrowType::Utf8, false),
        Field::new("delete", ArrowType::Boolean, false),
        Field::new("position", ArrowType::Int64, false),
        Field::new("values", ArrowType::new_list(ArrowType::Utf8, true), false),
        Field::new("unchanged", index_list_type(), true),
        Field::new("replaces", ArrowType::Boolean, false),
        Field::new("truncate", ArrowType::Boolean, false),
        Field::new("relation", ArrowType::Boolean, false),
        Field::new("xid", ArrowType::Int64, false),
    ]))
}

/// The columns of a chunk of changes (see [`change_schema`]), typed.
pub struct Changes<'a> {
    /// `schema.table` of each change.
    pub table: &'a StringArray,
    /// Whether each change is a delete (its values then only need the key columns).
    pub delete: &'a BooleanArray,
    /// The upstream position of the end of each change's transaction.
    pub position: &'a Int64Array,
    /// Whether each change replaces its row (see [`RowChange::replaces`]).
    pub replaces: &'a BooleanArray,
    /// Whether each change is a truncate of its table (it has no values).
    pub truncate: &'a BooleanArray,
    /// Whether each row describes its table's columns (their names are its values).
    pub relation: &'a BooleanArray,
    /// The id of each change's transaction (see [`RowChange::xid`]).
    pub xid: &'a Int64Array,
    values: &'a ListArray,
    unchanged: &'a ListArray,
}

impl<'a> Changes<'a> {
    /// The columns of `chunk`, which must have the types of [`change_schema`].
    pub fn of(chunk: &'a StreamChunk) -> Result<Self> {
        let schema = chunk.schema();
        let types = schema.fields().iter().map(|f| f.data_type());
        if !types.eq(change_schema().fields().iter().map(|f| f.data_type())) {
            return Err(Error::Stream(format!("not a chunk of CDC changes: {schema}")));
        }
        let columns = chunk.columns();
        Ok(Self {
            table: columns[0].as_string(),
            delete: columns[1].as_boolean(),
            position: columns[2].as_primitive::<Int64Type>(),
            values: columns[3].as_list(),
            unchanged: columns[4].as_list(),
            replaces: columns[5].as_boolean(),
            truncate: columns[6].as_boolean(),
            relation: columns[7].as_boolean(),
            xid: columns[8].as_primitive::<Int64Type>(),
        })
    }

    /// Every value of change `row`, in upstream column order.
    pub fn values_of(&self, row: usize) -> Vec<Option<&'a str>> {
        let offsets = self.values.value_offsets();
        let texts = self.texts();
        (offsets[row] as usize..offsets[row + 1] as usize)
            .map(|i| texts.is_valid(i).then(|| texts.value(i)))
            .collect()
    }

    /// The text values of every change, one change after the other: see [`Self::value_index`].
    pub fn texts(&self) -> &'a StringArray {
        self.values.values().as_string()
    }

    /// Where the value of upstream column `column` of change `row` is in [`Self::texts`].
    pub fn value_index(&self, row: usize, column: usize) -> Result<usize> {
        let offsets = self.values.value_offsets();
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        if start + column >= end {
            return Err(Error::Stream(format!(
                "a change of {} has {} values; upstream column {column} is missing",
                self.table.value(row),
                end - start,
            )));
        }
        Ok(start + column)
    }

    /// The text of upstream column `column` of change `row`; `None` for NULL or not sent.
    pub fn text(&self, row: usize, column: usize) -> Result<Option<&'a str>> {
        let texts = self.texts();
        let at = self.value_index(row, column)?;
        Ok(texts.is_valid(at).then(|| texts.value(at)))
    }

    /// The upstream columns change `row` did not send (TOASTed values an update left alone).
    pub fn unchanged(&self, row: usize) -> &'a [u32] {
        indices_at(self.unchanged, row)
    }

    /// The column types a description (`relation` row) carries; empty when it names none.
    pub fn types_of(&self, row: usize) -> Vec<TypeId> {
        indices_at(self.unchanged, row).chunks_exact(2).map(|t| (t[0], t[1] as i32)).collect()
    }
}

/// A chunk of [`change_schema`] rows, one per change.
pub fn changes_chunk(changes: &[RowChange]) -> Result<StreamChunk> {
    let mut values = ListBuilder::new(StringBuilder::new());
    let mut unchanged = ListBuilder::new(UInt32Builder::new());
    for change in changes {
        values.append_value(change.values.iter().map(Option::as_deref));
        if change.relation && !change.types.is_empty() {
            let types = change.types.iter().flat_map(|&(oid, modifier)| [oid, modifier as u32]);
            unchanged.append_value(types.map(Some));
        } else if change.unchanged.is_empty() {
            unchanged.append_null();
        } else {
            unchanged.append_value(change.unchanged.iter().map(|&i| Some(i as u32)));
        }
    }
    let columns = vec![
        Arc::new(StringArray::from_iter_values(changes.iter().map(|c| c.table.as_str()))) as _,
        Arc::new(BooleanArray::from_iter(changes.iter().map(|c| Some(c.delete)))) as _,
        Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| c.position as i64))) as _,
        Arc::new(values.finish()) as _,
        Arc::new(unchanged.finish()) as _,
        Arc::new(BooleanArray::from_iter(changes.iter().map(|c| Some(c.replaces)))) as _,
        Arc::new(BooleanArray::from_iter(changes.iter().map(|c| Some(c.truncate)))) as _,
        Arc::new(BooleanArray::from_iter(changes.iter().map(|c| Some(c.relation)))) as _,
        Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| i64::from(c.xid)))) as _,
    ];
    Ok(StreamChunk::inserts(RecordBatch::try_new(change_schema(), columns)?))
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::stream::test_utils::dedent;

    use super::*;

    /// An insert into `table` of the transaction ending at `position` (the readers' tests use it too).
    pub(crate) fn insert(table: &str, position: u64, values: &[Option<&str>]) -> RowChange {
        RowChange {
            table: table.into(),
            values: values.iter().map(|v| v.map(String::from)).collect(),
            position,
            ..RowChange::default()
        }
    }

    #[test]
    fn changes_become_insert_rows_of_the_change_schema() {
        let changes = [
            insert("public.t", 100, &[Some("1"), Some("a")]),
            RowChange { delete: true, ..insert("public.t", 100, &[Some("2"), None]) },
            insert("public.u", 130, &[Some("3")]),
            RowChange { position: 140, ..RowChange::truncation("public.t".into()) },
        ];
        let chunk = changes_chunk(&changes).unwrap();
        assert_eq!(chunk.schema(), change_schema());
        let expected = "T B I [T] [u] B B B I
                        + public.t false 100 [1, a] . false false false 0
                        + public.t true 100 [2, .] . false false false 0
                        + public.u false 130 [3] . false false false 0
                        + public.t true 140 [] . false true false 0";
        assert_eq!(chunk.to_pretty(), dedent(expected));
    }

    #[test]
    fn unchanged_columns_are_listed_and_replacing_updates_flagged() {
        let changes = [
            RowChange {
                unchanged: vec![2],
                ..insert("public.t", 100, &[Some("1"), Some("a"), None])
            },
            RowChange {
                unchanged: vec![1, 2],
                ..insert("public.t", 100, &[Some("2"), None, None])
            },
            RowChange { replaces: true, ..insert("public.t", 100, &[Some("4"), Some("d"), None]) },
        ];
        let expected = "T B I [T] [u] B B B I
                        + public.t false 100 [1, a, .] [2] false false false 0
                        + public.t false 100 [2, ., .] [1, 2] false false false 0
                        + public.t false 100 [4, d, .] . true false false 0";
        assert_eq!(changes_chunk(&changes).unwrap().to_pretty(), dedent(expected));
    }

    #[test]
    fn values_are_text_as_sent_and_read_back_by_column() {
        let changes = [
            insert("public.t", 7, &[Some(r#"a"b\c"#), Some("null"), None, Some("")]),
            RowChange {
                unchanged: vec![1],
                xid: u32::MAX,
                ..insert("public.u", 8, &[Some("x, y"), None])
            },
        ];
        let chunk = changes_chunk(&changes).unwrap();
        let read = Changes::of(&chunk).unwrap();
        assert_eq!((read.xid.value(0), read.xid.value(1)), (0, i64::from(u32::MAX)));
        let row = |r: usize, n: usize| (0..n).map(|c| read.text(r, c).unwrap()).collect::<Vec<_>>();
        // No quoting or escaping: NULL is not the text 'null', nor the empty text.
        assert_eq!(row(0, 4), [Some(r#"a"b\c"#), Some("null"), None, Some("")]);
        assert_eq!(row(1, 2), [Some("x, y"), None]);
        assert_eq!((read.unchanged(0), read.unchanged(1)), (&[][..], &[1][..]));
        assert_eq!(
            (read.table.value(1), read.position.value(1), read.delete.value(1)),
            ("public.u", 8, false)
        );
        assert!(read.text(1, 2).is_err(), "public.u sent two columns");
    }

    #[test]
    fn a_description_carries_its_column_names_and_types() {
        let names = vec!["id".to_owned(), "b".to_owned()];
        let changes = [
            RowChange::relation("public.t".into(), names.clone(), vec![(23, -1), (1700, 655366)]),
            RowChange::relation("db.t".into(), names, Vec::new()),
        ];
        let chunk = changes_chunk(&changes).unwrap();
        let read = Changes::of(&chunk).unwrap();
        assert!(read.relation.value(0) && read.relation.value(1));
        assert_eq!(read.values_of(0), [Some("id"), Some("b")]);
        assert_eq!(read.types_of(0), [(23, -1), (1700, 655366)]);
        assert_eq!(read.types_of(1), []);
    }

    #[test]
    fn a_chunk_of_other_columns_is_not_read_as_changes() {
        let chunk = StreamChunk::from_pretty("T B I T T B\n+ public.t f 1 [1] . f");
        assert!(Changes::of(&chunk).is_err());
    }
}
