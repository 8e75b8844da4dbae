//! Property tests: memcomparable order equals value order for every key type.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int16Array,
    Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use proptest::prelude::*;

use super::*;

fn encode_one(column: ArrayRef) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new(); column.len()];
    encode_column(&column, &mut out).unwrap();
    out
}

/// Asserts that the encodings of `values` sort exactly like `values` (None first).
fn assert_order_preserved<T: PartialOrd + std::fmt::Debug>(values: &[Option<T>], column: ArrayRef) {
    let encoded = encode_one(column);
    for i in 0..values.len() {
        for j in 0..values.len() {
            let by_value = values[i].partial_cmp(&values[j]).unwrap();
            let by_key = encoded[i].cmp(&encoded[j]);
            assert_eq!(by_value, by_key, "{:?} vs {:?}", values[i], values[j]);
        }
    }
}

proptest! {
    #[test]
    fn int16_order(v in prop::collection::vec(prop::option::of(any::<i16>()), 1..20)) {
        assert_order_preserved(&v, Arc::new(Int16Array::from(v.clone())));
    }

    #[test]
    fn int32_order(v in prop::collection::vec(prop::option::of(any::<i32>()), 1..20)) {
        assert_order_preserved(&v, Arc::new(Int32Array::from(v.clone())));
        assert_order_preserved(&v, Arc::new(Date32Array::from(v.clone())));
    }

    #[test]
    fn int64_order(v in prop::collection::vec(prop::option::of(any::<i64>()), 1..20)) {
        assert_order_preserved(&v, Arc::new(Int64Array::from(v.clone())));
        assert_order_preserved(&v, Arc::new(TimestampMicrosecondArray::from(v.clone())));
    }

    #[test]
    fn float64_order(v in prop::collection::vec(prop::option::of(-1e300f64..1e300), 1..20)) {
        assert_order_preserved(&v, Arc::new(Float64Array::from(v.clone())));
    }

    #[test]
    fn decimal_order(v in prop::collection::vec(prop::option::of(-10_i128.pow(30)..10_i128.pow(30)), 1..20)) {
        let array = Decimal128Array::from(v.clone()).with_precision_and_scale(38, 4).unwrap();
        assert_order_preserved(&v, Arc::new(array));
    }

    #[test]
    fn bool_order(v in prop::collection::vec(prop::option::of(any::<bool>()), 1..20)) {
        assert_order_preserved(&v, Arc::new(BooleanArray::from(v.clone())));
    }

    #[test]
    fn string_order(v in prop::collection::vec(prop::option::of(".{0,12}"), 1..20)) {
        let array = StringArray::from(v.iter().map(|s| s.as_deref()).collect::<Vec<_>>());
        assert_order_preserved(&v, Arc::new(array));
    }

    #[test]
    fn bytes_order(v in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..12)), 1..20)) {
        let array = BinaryArray::from(v.iter().map(|b| b.as_deref()).collect::<Vec<_>>());
        assert_order_preserved(&v, Arc::new(array));
    }

    #[test]
    fn composite_keys_order(v in prop::collection::vec((any::<i32>(), ".{0,6}"), 1..20)) {
        let ints: ArrayRef = Arc::new(Int32Array::from(v.iter().map(|x| x.0).collect::<Vec<_>>()));
        let strs: ArrayRef = Arc::new(StringArray::from(v.iter().map(|x| x.1.as_str()).collect::<Vec<_>>()));
        let mut out = vec![Vec::new(); v.len()];
        encode_column(&ints, &mut out).unwrap();
        encode_column(&strs, &mut out).unwrap();
        for i in 0..v.len() {
            for j in 0..v.len() {
                prop_assert_eq!(v[i].cmp(&v[j]), out[i].cmp(&out[j]));
            }
        }
    }
}

#[test]
fn keys_carry_table_and_vnode() {
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
    let keys = encode_keys(TableId(7), &[ids], 3, 1).unwrap();
    for key in &keys {
        assert_eq!(&key[..4], &7u32.to_be_bytes());
        assert_eq!(vnode_in_key(key), vnode_of(&key[KEY_PREFIX_LEN..]));
        assert!((vnode_in_key(key).0 as usize) < VirtualNode::COUNT);
    }
}

#[test]
fn distribution_key_prefix_chooses_the_vnode() {
    let group: ArrayRef = Arc::new(Int64Array::from(vec![5, 5, 5]));
    let value: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
    let keys = encode_keys(TableId(7), &[group.clone(), value], 3, 1).unwrap();
    let alone = encode_keys(TableId(7), &[group], 3, 1).unwrap();
    for key in &keys {
        assert_eq!(vnode_in_key(key), vnode_in_key(&alone[0]), "same group, same vnode");
        assert!(key.starts_with(&alone[0]), "the group's key is a prefix of its rows' keys");
    }
}
