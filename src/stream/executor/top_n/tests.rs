//! Chunk-in / chunk-out tests of the top-N.

use std::collections::BTreeMap;

use datafusion::physical_expr::expressions::Column;

use super::*;
use crate::catalog::{ColumnCatalog, RelationKind, TableId};
use crate::stream::test_utils::{
    Lcg, MockSource, barrier, chunk, dedent, initial, run, schema, views_at_barriers,
};
use crate::types::DataType;

/// Input rows `k g v`: a key (the stream key), a group, a sort value; all visible.
const INPUT: &str = "i i i";

/// A top-N over [`INPUT`] ordered by `c2` (then the key), grouped by `c1` when `grouped`, as the
/// planner builds it.
fn top_n(
    store: &Arc<Store>,
    spec: (bool, bool, bool, usize, usize, bool),
    messages: Vec<Message>,
) -> BoxedExecutor {
    top_n_of(store, spec, Box::new(MockSource::new(messages)))
}

/// [`top_n`] over any input.
fn top_n_of(
    store: &Arc<Store>,
    spec: (bool, bool, bool, usize, usize, bool),
    input_rows: BoxedExecutor,
) -> BoxedExecutor {
    let (grouped, descending, nulls_first, offset, limit, rank) = spec;
    let input = schema(INPUT);
    let col = |i: usize| Arc::new(Column::new(&format!("c{i}"), i)) as Arc<dyn PhysicalExpr>;
    let group = if grouped { vec![col(1)] } else { Vec::new() };
    let mut columns = Vec::new();
    if grouped {
        columns.push(ColumnCatalog::new("g0", DataType::Int32));
    }
    columns.push(ColumnCatalog::new("_order", DataType::Bytea));
    for f in input.fields() {
        columns.push(ColumnCatalog::new(
            f.name().clone(),
            DataType::from_arrow(f.data_type()).unwrap(),
        ));
    }
    let n_group = group.len();
    let pk = vec![0, n_group, n_group + 1].into_iter().skip(usize::from(!grouped)).collect();
    let mut table =
        TableCatalog::new_table(TableId(200), "t200".into(), columns, pk, String::new());
    table.kind = RelationKind::Internal;
    table.dist_key_len = n_group;
    let header = match (rank, grouped) {
        (true, true) => "i i i I i",
        (true, false) => "i i i I",
        (false, true) => "i i i i",
        (false, false) => INPUT,
    };
    let order = vec![SortKey { expr: col(2), descending, nulls_first }];
    let spec = TopNSpec { group, order, offset, limit, rank };
    Box::new(TopNExecutor::new(input_rows, spec, Arc::new(table), store.clone(), 3, schema(header)))
}

#[tokio::test]
async fn a_deleted_top_row_is_replaced_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let messages = vec![
        initial(0),
        chunk("i i i\n+ 1 0 30\n+ 2 0 10\n+ 3 0 20\n+ 4 0 40"),
        barrier(1),
        chunk("i i i\n- 2 0 10"),
        barrier(2),
        chunk("i i i\n+ 5 0 5\n+ 6 0 50"),
        barrier(3),
    ];
    let expected = "
        barrier 0

        i i i
        + 2 0 10
        + 3 0 20

        barrier 1

        i i i
        - 2 0 10
        + 1 0 30

        barrier 2

        i i i
        - 1 0 30
        + 5 0 5

        barrier 3";
    let out = run(top_n(&store, (false, false, false, 0, 2, false), messages)).await;
    // 3 stays in the top two, at another position: without ranks it is not emitted again.
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn an_offset_skips_rows_and_desc_puts_nulls_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let messages =
        vec![initial(0), chunk("i i i\n+ 1 0 30\n+ 2 0 .\n+ 3 0 20\n+ 4 0 40"), barrier(1)];
    // DESC NULLS FIRST: 2 (NULL), 4 (40), 1 (30), 3 (20); OFFSET 1 LIMIT 2.
    let expected = "
        barrier 0

        i i i
        + 4 0 40
        + 1 0 30

        barrier 1";
    let out = run(top_n(&store, (false, true, true, 1, 2, false), messages)).await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn group_ranks_move_when_a_row_goes_above_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let messages = vec![
        initial(0),
        chunk("i i i\n+ 1 7 30\n+ 2 7 10\n+ 3 8 20"),
        barrier(1),
        chunk("i i i\n+ 4 7 5"),
        barrier(2),
    ];
    let expected = "
        barrier 0

        i i i I i
        + 2 7 10 1 7
        + 1 7 30 2 7
        + 3 8 20 1 8

        barrier 1

        i i i I i
        - 2 7 10 1 7
        - 1 7 30 2 7
        + 4 7 5 1 7
        + 2 7 10 2 7

        barrier 2";
    let out = run(top_n(&store, (true, false, false, 0, 2, true), messages)).await;
    assert_eq!(out, dedent(expected));
}

/// What a top-N of `spec` outputs for `rows` (key, group, value): per group the rows in order
/// (value by the spec's direction and NULL placement, then key), positions `offset ..
/// offset + limit`, printed as the executor prints them.
fn expected(
    rows: &BTreeMap<i32, (i32, Option<i32>)>,
    spec: (bool, bool, bool, usize, usize, bool),
) -> BTreeMap<String, i64> {
    let (grouped, descending, nulls_first, offset, limit, rank) = spec;
    let mut groups: BTreeMap<i32, Vec<(i32, i32, Option<i32>)>> = BTreeMap::new();
    for (&k, &(g, v)) in rows {
        groups.entry(if grouped { g } else { 0 }).or_default().push((k, g, v));
    }
    let mut out = BTreeMap::new();
    for (_, mut members) in groups {
        members.sort_by(|a, b| {
            let by_value = match (a.2, b.2) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => {
                    if nulls_first {
                        std::cmp::Ordering::Less
                    } else {
                        std::cmp::Ordering::Greater
                    }
                }
                (Some(_), None) => {
                    if nulls_first {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Less
                    }
                }
                (Some(x), Some(y)) => {
                    if descending {
                        y.cmp(&x)
                    } else {
                        x.cmp(&y)
                    }
                }
            };
            by_value.then(a.0.cmp(&b.0))
        });
        for (i, (k, g, v)) in members.into_iter().enumerate().skip(offset).take(limit) {
            let v = v.map_or(".".to_owned(), |v| v.to_string());
            let mut row = match rank {
                true => format!("{k} {g} {v} {}", i + 1),
                false => format!("{k} {g} {v}"),
            };
            if grouped {
                row.push_str(&format!(" {g}"));
            }
            *out.entry(row).or_insert(0) += 1;
        }
    }
    out
}

/// Random inserts, deletes and updates (values colliding, NULLs among them) for top-Ns of every
/// shape: after every chunk, the output so far equals the top-N of the current rows.
#[tokio::test]
async fn every_shape_equals_the_top_n_of_the_rows_after_every_chunk() {
    let shapes = [
        (false, false, false, 0, 3, false),
        (false, true, true, 2, 2, false),
        (true, false, true, 0, 2, true),
        (true, true, false, 1, 3, true),
        (true, false, false, 0, 1, false),
    ];
    for (s, shape) in shapes.into_iter().enumerate() {
        for seed in 0..4u64 {
            let mut rng = Lcg::new(seed * 31 + s as u64);
            let mut rows: BTreeMap<i32, (i32, Option<i32>)> = BTreeMap::new();
            let mut messages = vec![initial(0)];
            let mut states = Vec::new();
            let mut next_key = 0;
            for epoch in 1..=30u64 {
                let mut lines = vec!["i i i".to_owned()];
                for _ in 0..1 + rng.below(4) {
                    let value = |rng: &mut Lcg| match rng.below(6) {
                        0 => None,
                        v => Some(v as i32 * 10),
                    };
                    let show = |v: Option<i32>| v.map_or(".".to_owned(), |v| v.to_string());
                    if !rows.is_empty() && rng.below(3) == 0 {
                        let keys: Vec<i32> = rows.keys().copied().collect();
                        let k = keys[rng.below(keys.len() as u64) as usize];
                        let (g, v) = rows.remove(&k).unwrap();
                        lines.push(format!("- {k} {g} {}", show(v)));
                        if rng.below(2) == 0 {
                            let nv = value(&mut rng);
                            lines.push(format!("+ {k} {g} {}", show(nv)));
                            rows.insert(k, (g, nv));
                        }
                    } else {
                        next_key += 1;
                        let (g, v) = (rng.below(3) as i32, value(&mut rng));
                        lines.push(format!("+ {next_key} {g} {}", show(v)));
                        rows.insert(next_key, (g, v));
                    }
                }
                messages.push(chunk(&lines.join("\n")));
                messages.push(barrier(epoch));
                states.push(expected(&rows, shape));
            }
            // Fed one message at a time, each checkpoint committed as the barrier manager
            // commits it, so reads meet committed rows under newer writes.
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let views = views_at_barriers(&store, |input| top_n_of(&store, shape, input), messages);
            let views = views.await;
            assert_eq!(views.len(), 30);
            for (n, (view, state)) in views.iter().zip(&states).enumerate() {
                assert_eq!(view, state, "shape {shape:?}, seed {seed}, epoch {}", n + 1);
            }
        }
    }
}
