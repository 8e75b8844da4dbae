//! Memcomparable keys: `table id | vnode | primary key`.
//!
//! Keys compare bytewise in the same order as the values they encode, so a RocksDB range scan
//! over a table's prefix returns its rows in primary-key order within each vnode. The vnode is a
//! hash of the encoded primary key (the distribution key), so a row's vnode never changes.

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanArray, StringArray};
use arrow::datatypes::{
    DataType as ArrowType, Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use memcomparable::Serializer;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::ids::{TableId, VirtualNode};
use crate::types::DataType;

/// Bytes before the primary key: 4 for the table id, 2 for the vnode.
pub const KEY_PREFIX_LEN: usize = 6;

/// The first key of a table's key space.
pub fn table_prefix(table: TableId) -> [u8; 4] {
    table.0.to_be_bytes()
}

/// The first key of one vnode of a table.
pub fn vnode_prefix(table: TableId, vnode: VirtualNode) -> [u8; KEY_PREFIX_LEN] {
    let mut out = [0u8; KEY_PREFIX_LEN];
    out[..4].copy_from_slice(&table.0.to_be_bytes());
    out[4..].copy_from_slice(&vnode.0.to_be_bytes());
    out
}

/// The vnode a primary key (memcomparable-encoded) belongs to.
pub fn vnode_of(encoded_pk: &[u8]) -> VirtualNode {
    VirtualNode((crc32fast::hash(encoded_pk) % VirtualNode::COUNT as u32) as u16)
}

/// The vnode stored in a full key.
pub fn vnode_in_key(key: &[u8]) -> VirtualNode {
    VirtualNode(u16::from_be_bytes([key[4], key[5]]))
}

/// Encodes the storage key of every row of `columns` (the primary-key columns, in key order).
/// The first `dist_key_len` columns are the distribution key: they alone choose the vnode, so
/// rows sharing them are stored together and can be scanned by that prefix.
pub fn encode_keys(
    table: TableId,
    columns: &[ArrayRef],
    num_rows: usize,
    dist_key_len: usize,
) -> Result<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    encode_keys_into(table, columns, num_rows, dist_key_len, &mut keys)?;
    Ok(keys)
}

/// [`encode_keys`] into `keys`, whose buffers are reused: after the first chunks, encoding
/// allocates nothing.
pub fn encode_keys_into(
    table: TableId,
    columns: &[ArrayRef],
    num_rows: usize,
    dist_key_len: usize,
    keys: &mut Vec<Vec<u8>>,
) -> Result<()> {
    keys.truncate(num_rows);
    for key in keys.iter_mut() {
        key.clear();
    }
    keys.resize_with(num_rows, || Vec::with_capacity(KEY_PREFIX_LEN + 9 * columns.len()));
    for key in keys.iter_mut() {
        key.extend_from_slice(&vnode_prefix(table, VirtualNode(0)));
    }
    let keys = keys.as_mut_slice();
    let (dist, rest) = columns.split_at(dist_key_len.min(columns.len()));
    for column in dist {
        encode_column(column, keys)?;
    }
    for key in keys.iter_mut() {
        let vnode = vnode_of(&key[KEY_PREFIX_LEN..]);
        key[4..KEY_PREFIX_LEN].copy_from_slice(&vnode.0.to_be_bytes());
    }
    for column in rest {
        encode_column(column, keys)?;
    }
    Ok(())
}

/// Appends the memcomparable encoding of each value of `column` to the matching buffer.
pub fn encode_column(column: &ArrayRef, out: &mut [Vec<u8>]) -> Result<()> {
    match column.data_type() {
        ArrowType::Boolean => {
            encode_with(column.as_boolean(), out, |a: &BooleanArray, i| a.value(i))
        }
        ArrowType::Int16 => encode_with(column.as_primitive::<Int16Type>(), out, |a, i| a.value(i)),
        ArrowType::Int32 => encode_with(column.as_primitive::<Int32Type>(), out, |a, i| a.value(i)),
        ArrowType::Int64 => encode_with(column.as_primitive::<Int64Type>(), out, |a, i| a.value(i)),
        ArrowType::Float32 => {
            encode_with(column.as_primitive::<Float32Type>(), out, |a, i| a.value(i))
        }
        ArrowType::Float64 => {
            encode_with(column.as_primitive::<Float64Type>(), out, |a, i| a.value(i))
        }
        // All values of a column share its scale, so mantissas order like the values.
        ArrowType::Decimal128(_, _) => {
            encode_with(column.as_primitive::<Decimal128Type>(), out, |a, i| a.value(i))
        }
        // Big-endian two's complement with the sign bit flipped, as memcomparable writes i128.
        ArrowType::Decimal256(_, _) => {
            encode_with(column.as_primitive::<Decimal256Type>(), out, |a, i| {
                let mut bytes = a.value(i).to_be_bytes();
                bytes[0] ^= 0x80;
                bytes
            })
        }
        ArrowType::Date32 => {
            encode_with(column.as_primitive::<Date32Type>(), out, |a, i| a.value(i))
        }
        ArrowType::Timestamp(_, _) => {
            encode_with(column.as_primitive::<TimestampMicrosecondType>(), out, |a, i| a.value(i))
        }
        ArrowType::Time64(_) => encode_with(
            column.as_primitive::<arrow::datatypes::Time64MicrosecondType>(),
            out,
            |a, i| a.value(i),
        ),
        // Months, then days, then nanoseconds: one order that keeps equal intervals together.
        ArrowType::Interval(_) => encode_with(
            column.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>(),
            out,
            |a, i| {
                let v = a.value(i);
                (v.months, v.days, v.nanoseconds)
            },
        ),
        ArrowType::Utf8 => {
            encode_with(column.as_string::<i32>(), out, |a: &StringArray, i| a.value(i))
        }
        ArrowType::Binary => encode_with(column.as_binary::<i32>(), out, |a: &BinaryArray, i| {
            serde_bytes_ref(a.value(i))
        }),
        // An unsigned count (a window's `row_number()`) is stored as `numeric(20)`: its key
        // bytes are that numeric's, wherever it is encoded (a vnode computed from either is
        // the same).
        ArrowType::UInt64 => {
            let numeric = arrow::compute::cast(column, &ArrowType::Decimal128(20, 0))?;
            encode_column(&numeric, out)
        }
        other => Err(Error::Storage(format!("cannot encode key column of type {other}"))),
    }
}

/// Whether a key column of type `ty` need not be stored in the row's value as well: its key
/// encoding keeps every bit of the value. Floats do not (the encoding makes `-0` and `0`, and
/// every NaN, one key), so a float key column stays in the value too.
pub fn key_holds_value(ty: DataType) -> bool {
    !matches!(ty, DataType::Float32 | DataType::Float64 | DataType::Array(_))
}

/// Reads the primary-key values of a stored key back, in key order: the inverse of
/// [`encode_column`] for the types [`key_holds_value`] accepts.
///
/// Written here rather than with `memcomparable::Deserializer`, which panics on a key cut
/// short and allocates a `String` per text value: a stored key read back is checked like a
/// stored value, and each value goes straight into the caller's buffer.
pub struct KeyValues<'a> {
    rest: &'a [u8],
}

impl<'a> KeyValues<'a> {
    /// The primary-key values of the full storage key `key`.
    pub fn new(key: &'a [u8]) -> Result<Self> {
        let rest = key.get(KEY_PREFIX_LEN..).ok_or_else(bad_key)?;
        Ok(Self { rest })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n).ok_or_else(bad_key)?;
        self.rest = rest;
        Ok(head)
    }

    /// Reads the next value, of type `ty`, into `out` as the row encoding's payload of a
    /// present value (little-endian for numbers, the bytes of a text); `false` for NULL.
    pub fn next_into(&mut self, ty: DataType, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        match self.take(1)?[0] {
            0 => return Ok(false),
            1 => {}
            _ => return Err(bad_key()),
        }
        let be = |bytes: &[u8]| -> u128 { bytes.iter().fold(0, |n, &b| n << 8 | u128::from(b)) };
        match ty {
            DataType::Boolean => out.push(self.take(1)?[0]),
            DataType::Int16 => {
                let u = be(self.take(2)?) as u16 ^ (1 << 15);
                out.extend_from_slice(&u.to_le_bytes());
            }
            DataType::Int32 | DataType::Date => {
                let u = be(self.take(4)?) as u32 ^ (1 << 31);
                out.extend_from_slice(&u.to_le_bytes());
            }
            DataType::Int64 | DataType::Timestamp | DataType::Timestamptz | DataType::Time => {
                let u = be(self.take(8)?) as u64 ^ (1 << 63);
                out.extend_from_slice(&u.to_le_bytes());
            }
            // Months, days, nanoseconds: the row encoding's payload is each little-endian.
            DataType::Interval => {
                let months = be(self.take(4)?) as u32 ^ (1 << 31);
                let days = be(self.take(4)?) as u32 ^ (1 << 31);
                let nanos = be(self.take(8)?) as u64 ^ (1 << 63);
                out.extend_from_slice(&months.to_le_bytes());
                out.extend_from_slice(&days.to_le_bytes());
                out.extend_from_slice(&nanos.to_le_bytes());
            }
            DataType::Decimal { precision, .. } if precision > 38 => {
                let mut bytes: Vec<u8> = self.take(32)?.to_vec();
                bytes[0] ^= 0x80;
                bytes.reverse();
                out.extend_from_slice(&bytes);
            }
            DataType::Decimal { .. } => {
                let u = be(self.take(16)?) ^ (1 << 127);
                out.extend_from_slice(&u.to_le_bytes());
            }
            DataType::Varchar | DataType::Jsonb | DataType::Bytea => self.bytes_into(out)?,
            DataType::Float32 | DataType::Float64 | DataType::Array(_) => {
                return Err(Error::Storage(format!("a {ty:?} key value is read from the row")));
            }
        }
        Ok(true)
    }

    /// Steps over the next value, of type `ty`.
    pub fn skip(&mut self, ty: DataType) -> Result<()> {
        let width = match ty {
            DataType::Float32 => 4,
            DataType::Float64 => 8,
            _ => return self.next_into(ty, &mut Vec::new()).map(drop),
        };
        if self.take(1)?[0] == 1 {
            self.take(width)?;
        }
        Ok(())
    }

    /// A byte string: empty (`0`), or `1` and groups of 8 bytes each followed by how many of
    /// them count (9: all 8, and more follow).
    fn bytes_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        match self.take(1)?[0] {
            0 => return Ok(()),
            1 => {}
            _ => return Err(bad_key()),
        }
        loop {
            let group = self.take(9)?;
            match group[8] {
                n @ 1..=8 => {
                    out.extend_from_slice(&group[..n as usize]);
                    return Ok(());
                }
                9 => out.extend_from_slice(&group[..8]),
                _ => return Err(bad_key()),
            }
        }
    }
}

fn bad_key() -> Error {
    Error::Storage("stored key is truncated or corrupt".into())
}

/// Wraps a byte slice so serde serialises it as bytes, not as a sequence.
fn serde_bytes_ref(bytes: &[u8]) -> BytesRef<'_> {
    BytesRef(bytes)
}

struct BytesRef<'a>(&'a [u8]);

impl Serialize for BytesRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

fn encode_with<'a, A, T, F>(array: &'a A, out: &mut [Vec<u8>], value: F) -> Result<()>
where
    A: Array,
    T: Serialize + 'a,
    F: Fn(&'a A, usize) -> T,
{
    for (i, buf) in out.iter_mut().enumerate() {
        let mut ser = Serializer::new(buf);
        let v = (!array.is_null(i)).then(|| value(array, i));
        v.serialize(&mut ser).map_err(|e| Error::Storage(format!("key encoding failed: {e}")))?;
    }
    Ok(())
}

/// Where the release markers of a held aggregate's result table `table` start: in the key space
/// of table 0 (which holds no relation), so no scan of the table itself meets them.
pub fn release_marker_prefix(table: TableId) -> Vec<u8> {
    let mut key = table_prefix(TableId(0)).to_vec();
    key.extend_from_slice(b"released/");
    key.extend_from_slice(&table.0.to_be_bytes());
    key
}

/// The key whose presence says vnode `vnode` of a held aggregate's result table `table` has
/// emitted its groups (see [`crate::stream::executor::hash_agg::Hold`]).
pub fn release_marker(table: TableId, vnode: VirtualNode) -> Vec<u8> {
    let mut key = release_marker_prefix(table);
    key.extend_from_slice(&vnode.0.to_be_bytes());
    key
}

/// The smallest key greater than every key that starts with `prefix` (`None`: no such key).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// An exclusive end for a scan of every key starting with `prefix`: its
/// [`prefix_successor`], or, for a prefix of only `0xff` bytes, a key of `0xff` bytes longer
/// than the prefix.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    prefix_successor(prefix).unwrap_or_else(|| vec![u8::MAX; prefix.len() + 1])
}

#[cfg(test)]
mod tests;
