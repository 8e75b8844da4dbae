//! Chunk-in / chunk-out tests of the hash aggregate.

use arrow::datatypes::{Field, Schema};
use datafusion::physical_expr::expressions::{Column, Literal};

use super::*;
use crate::catalog::{ColumnCatalog, RelationKind, TableId};
use crate::stream::message::{Barrier, Mutation};
use crate::stream::test_utils::{
    MockSource, barrier, chunk, committing, committing_until, dedent, initial, run, schema,
};
use crate::types::DataType;

/// An internal state table of `types`, keyed by its first `pk_len` columns, of which the
/// first `dist_key_len` choose the vnode (as the planner makes them).
fn state_table(
    id: u32,
    types: &[ArrowType],
    pk_len: usize,
    dist_key_len: usize,
) -> Arc<TableCatalog> {
    let columns = types
        .iter()
        .enumerate()
        .map(|(i, t)| ColumnCatalog::new(format!("s{i}"), DataType::from_arrow(t).unwrap()))
        .collect();
    let pk = (0..pk_len).collect();
    let mut table =
        TableCatalog::new_table(TableId(id), format!("t{id}"), columns, pk, String::new());
    table.kind = RelationKind::Internal;
    table.dist_key_len = dist_key_len;
    Arc::new(table)
}

/// [`state_table`] with named columns (`s{i}` where the name is empty): a sum's layout is
/// told by its column names.
fn named_table(
    id: u32,
    columns: &[(String, ArrowType)],
    pk_len: usize,
    dist_key_len: usize,
) -> Arc<TableCatalog> {
    let types: Vec<ArrowType> = columns.iter().map(|(_, t)| t.clone()).collect();
    let mut table = Arc::unwrap_or_clone(state_table(id, &types, pk_len, dist_key_len));
    for (column, (name, _)) in table.columns.iter_mut().zip(columns) {
        if !name.is_empty() {
            column.name = name.clone();
        }
    }
    Arc::new(table)
}

/// The output type of an aggregate over `arg`, as DataFusion types it.
fn output_type(kind: AggKind, arg: &ArrowType) -> ArrowType {
    match (kind, arg) {
        (AggKind::Count, _) => ArrowType::Int64,
        (AggKind::Avg, &ArrowType::Decimal128(p, s)) => {
            ArrowType::Decimal128((p + 4).min(38), (s + 4).min(38))
        }
        (AggKind::Avg, _) => ArrowType::Float64,
        (AggKind::StringAgg, _) => ArrowType::Utf8,
        (kind, _) if kind.spreads() => ArrowType::Float64,
        (AggKind::Sum, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64) => ArrowType::Int64,
        (AggKind::Sum, ArrowType::Float32) => ArrowType::Float64,
        _ => arg.clone(),
    }
}

/// A hash aggregation over `input` (rows of the column types `header`) grouped by the
/// input columns `group_by`, computing `calls` (e.g. `"count(*) sum(c1) min(c1)"`), with its
/// state tables (ids 100, 101, ..) in `store`, as the planner builds it.
fn hash_agg(
    store: &Arc<Store>,
    header: &str,
    group_by: &[usize],
    calls: &str,
    input: BoxedExecutor,
) -> BoxedExecutor {
    Box::new(hash_agg_executor(store, header, group_by, calls, input))
}

/// [`hash_agg`], unboxed.
fn hash_agg_executor(
    store: &Arc<Store>,
    header: &str,
    group_by: &[usize],
    calls: &str,
    input: BoxedExecutor,
) -> HashAggExecutor {
    let in_schema = schema(header);
    let mut group_exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    let mut group_types = Vec::new();
    for &i in group_by {
        group_exprs.push(Arc::new(Column::new(&format!("c{i}"), i)));
        group_types.push(in_schema.field(i).data_type().clone());
    }
    let n_groups = group_types.len();
    let mut result_types: Vec<(String, ArrowType)> =
        group_types.iter().map(|t| (String::new(), t.clone())).collect();
    result_types.push((String::new(), ArrowType::Int64));
    let mut agg_calls = Vec::new();
    for (i, call) in calls.split_whitespace().enumerate() {
        let (name, arg) = call.strip_suffix(')').and_then(|c| c.split_once('(')).unwrap();
        // `count(distinct:c1)`: over the distinct values.
        let (distinct, arg) = match arg.strip_prefix("distinct:") {
            Some(arg) => (true, arg),
            None => (false, arg),
        };
        let kind = match name {
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "avg" => AggKind::Avg,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            // `string_agg(c1)`: separated by commas, in the order of the values.
            "string_agg" => AggKind::StringAgg,
            "var_samp" => AggKind::VarSamp,
            "var_pop" => AggKind::VarPop,
            "stddev_samp" => AggKind::StddevSamp,
            "stddev_pop" => AggKind::StddevPop,
            other => panic!("unknown aggregate {other}"),
        };
        let (arg, arg_type): (Arc<dyn PhysicalExpr>, _) = match arg {
            "*" => (Arc::new(Literal::new(ScalarValue::Int64(Some(1)))), ArrowType::Int64),
            column => {
                let index: usize = column.strip_prefix('c').unwrap().parse().unwrap();
                let ty = in_schema.field(index).data_type().clone();
                (Arc::new(Column::new(column, index)), ty)
            }
        };
        let output_type = output_type(kind, &arg_type);
        let mut multiset = None;
        let mut listing = None;
        match kind {
            AggKind::StringAgg => {
                result_types.push((String::new(), output_type.clone()));
                let mut types = group_types.clone();
                types.extend([ArrowType::Binary, arg_type.clone(), ArrowType::Int64]);
                multiset = Some(state_table(101 + i as u32, &types, n_groups + 2, n_groups));
                listing = Some(Listing { separator: ",".into(), order: Vec::new() });
            }
            AggKind::Count => result_types.push((String::new(), ArrowType::Int64)),
            AggKind::Sum | AggKind::Avg => {
                let layout = super::sum::SumLayout::new(kind, &output_type, &arg_type);
                result_types.extend(layout.columns(i));
            }
            AggKind::Min | AggKind::Max => {
                result_types.push((String::new(), output_type.clone()));
                let mut types = group_types.clone();
                types.extend([output_type.clone(), ArrowType::Int64]);
                multiset = Some(state_table(101 + i as u32, &types, n_groups + 1, n_groups));
            }
            _ => {
                result_types.push((String::new(), output_type.clone()));
                let mut types = group_types.clone();
                types.extend([ArrowType::Float64, ArrowType::Int64]);
                multiset = Some(state_table(101 + i as u32, &types, n_groups + 1, n_groups));
            }
        }
        if distinct {
            let mut types = group_types.clone();
            types.extend([arg_type.clone(), ArrowType::Int64]);
            multiset = Some(state_table(101 + i as u32, &types, n_groups + 1, n_groups));
        }
        agg_calls.push(AggCall { kind, arg, output_type, multiset, distinct, listing });
    }
    let fields: Vec<Field> = group_types
        .iter()
        .chain(agg_calls.iter().map(|c| &c.output_type))
        .enumerate()
        .map(|(i, t)| Field::new(format!("o{i}"), t.clone(), true))
        .collect();
    HashAggExecutor::new(
        input,
        store.clone(),
        group_exprs,
        agg_calls,
        named_table(100, &result_types, n_groups, n_groups),
        Arc::new(Schema::new(fields)),
    )
}

/// Everything `executor` emits, with the rows of each chunk sorted by their cells (an
/// update pair kept together): the executor emits changed groups in hash-map order.
async fn run_sorted(executor: BoxedExecutor) -> String {
    let out = run(executor).await;
    let blocks = out.split("\n\n").map(|block| {
        let mut lines = block.lines();
        let header = lines.next().unwrap_or_default();
        if header.starts_with("barrier") || header.starts_with("error") {
            return block.to_owned();
        }
        let mut units: Vec<Vec<&str>> = Vec::new();
        for line in lines {
            match units.last_mut() {
                Some(u) if u.len() == 1 && u[0].starts_with("U-") && line.starts_with("U+") => {
                    u.push(line)
                }
                _ => units.push(vec![line]),
            }
        }
        units.sort_by_key(|u| (u[0].split_once(' ').unwrap().1.to_owned(), u.clone()));
        std::iter::once(header).chain(units.concat()).collect::<Vec<_>>().join("\n")
    });
    blocks.collect::<Vec<_>>().join("\n\n")
}

/// Runs a hash aggregation (see [`hash_agg`]) over a fresh store.
async fn aggregate(
    header: &str,
    group_by: &[usize],
    calls: &str,
    input: impl IntoIterator<Item = Message>,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    run_sorted(hash_agg(&store, header, group_by, calls, committing(&store, input))).await
}

#[tokio::test]
async fn touched_groups_count_as_the_epochs_memory_until_the_flush_stages_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let HashAggExecutor { group_exprs, calls, result_table, output_schema, .. } =
        hash_agg_executor(&store, "i I", &[0], "count(*) min(c1)", MockSource::boxed([]));
    let mut agg = Aggregation::new(store.clone(), group_exprs, calls, result_table, output_schema);
    let rows: String = (0..1000).map(|g| format!("\n+ {g} {g}")).collect();
    agg.apply(&StreamChunk::from_pretty(&format!("i I{rows}"))).unwrap();
    let held = store.uncommitted_bytes();
    assert!(held >= 1000 * size_of::<Group>(), "1000 groups hold {held} bytes");
    // The same groups and values again: nothing more is held.
    agg.apply(&StreamChunk::from_pretty(&format!("i I{rows}"))).unwrap();
    assert_eq!(store.uncommitted_bytes(), held);
    // The flush turns them into staged rows, far smaller than the groups were.
    agg.flush().unwrap();
    assert_eq!(agg.memory.bytes(), 0);
    let staged = store.uncommitted_bytes();
    assert!(staged > 0 && staged < held / 2, "staged {staged} of {held}");
    // An actor that stops mid-epoch gives back what its groups held.
    let more: String = (1000..1100).map(|g| format!("\n+ {g} {g}")).collect();
    agg.apply(&StreamChunk::from_pretty(&format!("i I{more}"))).unwrap();
    assert!(store.uncommitted_bytes() > staged);
    drop(agg);
    assert_eq!(store.uncommitted_bytes(), 0);
}

#[tokio::test]
async fn groups_past_the_memory_bound_are_flushed_mid_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 2 5"),
        chunk("i I\n+ 1 1"),
        chunk("i I\n+ 3 7"),
        barrier(1),
    ];
    // Two groups pass the bound: the first chunk's groups go out before the next chunk,
    // and group 1, touched again in the same epoch, changes as an update pair.
    let bound = 2 * footprint(&[0; 9], &[ScalarValue::Int32(Some(0))], &[]);
    let agg = hash_agg_executor(&store, "i I", &[0], "count(*) sum(c1)", committing(&store, input))
        .with_flush_bytes(bound);
    let expected = "barrier 0

                    i I I
                    + 1 1 10
                    + 2 1 5

                    i I I
                    U- 1 1 10
                    U+ 1 2 11
                    + 3 1 7

                    barrier 1";
    assert_eq!(run_sorted(Box::new(agg)).await, dedent(expected));
}

/// A new aggregate knows every stored group from its cache and reads none; once its cache was
/// emptied (more groups than it keeps), groups not in it are read from storage again: group 1,
/// stored in epoch 1, dropped from the cache in epoch 2 and touched in epoch 3, changes as an
/// update pair, not as a new group.
#[tokio::test]
async fn groups_the_cache_dropped_are_read_from_storage() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 2 5\n+ 3 7"),
        barrier(1),
        chunk("i I\n+ 4 2"),
        barrier(2),
        chunk("i I\n+ 1 1"),
        barrier(3),
    ];
    let agg = hash_agg_executor(&store, "i I", &[0], "count(*) sum(c1)", committing(&store, input))
        .with_cache_groups(2);
    let expected = "barrier 0

                    i I I
                    + 1 1 10
                    + 2 1 5
                    + 3 1 7

                    barrier 1

                    i I I
                    + 4 1 2

                    barrier 2

                    i I I
                    U- 1 1 10
                    U+ 1 2 11

                    barrier 3";
    assert_eq!(run_sorted(Box::new(agg)).await, dedent(expected));
}

#[tokio::test]
async fn new_groups_are_inserted_at_the_barrier_not_per_chunk() {
    let input = [initial(0), chunk("i I\n+ 1 10\n+ 2 5\n+ 1 20"), chunk("i I\n+ 3 7"), barrier(1)];
    let expected = "barrier 0

                    i I I
                    + 1 2 30
                    + 2 1 5
                    + 3 1 7

                    barrier 1";
    assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn a_changed_group_is_an_update_pair_and_an_emptied_group_a_delete() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"),
        barrier(1),
        chunk("i I\n- 1 10\n- 2 5\n+ 3 1"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i I I
                    + 1 2 30
                    + 2 1 5

                    barrier 1

                    i I I
                    U- 1 2 30
                    U+ 1 1 20
                    - 2 1 5
                    + 3 1 1

                    barrier 2";
    assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn input_update_pairs_retract_the_old_row_and_add_the_new_one() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 2 5"),
        barrier(1),
        // 1: 10 -> 15 in place; 2's row moves to group 1.
        chunk("i I\nU- 1 10\nU+ 1 15\nU- 2 5\nU+ 1 5"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i I I
                    + 1 1 10
                    + 2 1 5

                    barrier 1

                    i I I
                    U- 1 1 10
                    U+ 1 2 20
                    - 2 1 5

                    barrier 2";
    assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn a_group_changed_and_changed_back_within_an_epoch_emits_nothing() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 10"),
        barrier(1),
        chunk("i I\n+ 1 5\n+ 2 3"),
        chunk("i I\n- 1 5\n- 2 3"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i I I
                    + 1 1 10

                    barrier 1

                    barrier 2";
    assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn retracting_the_extreme_reads_the_next_one_from_the_stored_values() {
    let input = [
        initial(0),
        chunk("i i\n+ 1 5\n+ 1 3\n+ 1 9\n+ 1 3\n+ 2 -7\n+ 2 -2"),
        barrier(1),
        // One of the two 3s goes: the minimum stays 3.
        chunk("i i\n- 1 3\n- 1 9\n- 2 -7"),
        barrier(2),
        chunk("i i\n- 1 3"),
        barrier(3),
    ];
    let expected = "barrier 0

                    i i i
                    + 1 3 9
                    + 2 -7 -2

                    barrier 1

                    i i i
                    U- 1 3 9
                    U+ 1 3 5
                    U- 2 -7 -2
                    U+ 2 -2 -2

                    barrier 2

                    i i i
                    U- 1 3 5
                    U+ 1 5 5

                    barrier 3";
    assert_eq!(aggregate("i i", &[0], "min(c1) max(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn min_and_max_of_floats_and_text_order_by_value() {
    let input = [
        initial(0),
        chunk("T F T\n+ a -1.5 pear\n+ a -0.5 apple\n+ a 2.25 plum"),
        barrier(1),
        chunk("T F T\n- a -1.5 pear\n- a 2.25 plum"),
        barrier(2),
    ];
    let expected = "barrier 0

                    T F F T T
                    + a -1.5 2.25 apple plum

                    barrier 1

                    T F F T T
                    U- a -1.5 2.25 apple plum
                    U+ a -0.5 -0.5 apple apple

                    barrier 2";
    let calls = "min(c1) max(c1) min(c2) max(c2)";
    assert_eq!(aggregate("T F T", &[0], calls, input).await, dedent(expected));
}

#[tokio::test]
async fn a_null_group_key_is_a_group_of_its_own() {
    let input = [
        initial(0),
        chunk("i I\n+ . 4\n+ . 2\n+ 1 3"),
        barrier(1),
        chunk("i I\n- . 2"),
        barrier(2),
        chunk("i I\n- . 4"),
        barrier(3),
    ];
    let expected = "barrier 0

                    i I I I
                    + . 2 6 2
                    + 1 1 3 3

                    barrier 1

                    i I I I
                    U- . 2 6 2
                    U+ . 1 4 4

                    barrier 2

                    i I I I
                    - . 1 4 4

                    barrier 3";
    let calls = "count(*) sum(c1) min(c1)";
    assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
}

#[tokio::test]
async fn count_of_a_column_skips_nulls_and_sum_and_min_of_only_nulls_are_null() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 .\n+ 1 ."),
        barrier(1),
        chunk("i I\n+ 1 4"),
        barrier(2),
        // Back to only NULLs: the group stays, its sum and min are NULL again.
        chunk("i I\n- 1 4"),
        barrier(3),
    ];
    let expected = "barrier 0

                    i I I I I
                    + 1 2 0 . .

                    barrier 1

                    i I I I I
                    U- 1 2 0 . .
                    U+ 1 3 1 4 4

                    barrier 2

                    i I I I I
                    U- 1 3 1 4 4
                    U+ 1 2 0 . .

                    barrier 3";
    let calls = "count(*) count(c1) sum(c1) min(c1)";
    assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
}

#[tokio::test]
async fn avg_divides_the_sum_by_the_non_null_count() {
    let input = [
        initial(0),
        chunk("i i\n+ 1 1\n+ 1 2\n+ 1 ."),
        barrier(1),
        chunk("i i\n- 1 1\n- 1 2"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i F
                    + 1 1.5

                    barrier 1

                    i F
                    U- 1 1.5
                    U+ 1 .

                    barrier 2";
    assert_eq!(aggregate("i i", &[0], "avg(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn sum_and_min_of_numeric_keep_the_scale() {
    let input = [
        initial(0),
        chunk("i N\n+ 1 1.25\n+ 1 -0.50\n+ 1 10"),
        barrier(1),
        chunk("i N\n- 1 -0.50"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i N N
                    + 1 10.75 -0.50

                    barrier 1

                    i N N
                    U- 1 10.75 -0.50
                    U+ 1 11.25 1.25

                    barrier 2";
    assert_eq!(aggregate("i N", &[0], "sum(c1) min(c1)", input).await, dedent(expected));
}

/// Like Postgres, an aggregate without GROUP BY has one row also over no rows: count 0,
/// sum and min NULL. It is inserted at the first barrier and then only ever updated.
#[tokio::test]
async fn without_group_by_there_is_always_one_row_with_count_0_when_empty() {
    let input = [
        initial(0),
        barrier(1),
        chunk("I\n+ 5\n+ 3\n+ ."),
        barrier(2),
        chunk("I\n- 5\n- 3\n- ."),
        barrier(3),
    ];
    let expected = "I I I I
                    + 0 0 . .

                    barrier 0

                    barrier 1

                    I I I I
                    U- 0 0 . .
                    U+ 3 2 8 3

                    barrier 2

                    I I I I
                    U- 3 2 8 3
                    U+ 0 0 . .

                    barrier 3";
    let calls = "count(*) count(c0) sum(c0) min(c0)";
    assert_eq!(aggregate("I", &[], calls, input).await, dedent(expected));
}

#[tokio::test]
async fn without_group_by_only_the_actor_owning_the_empty_keys_vnode_has_the_row() {
    // Of two actors, each runs over no input: one has the row, the other nothing (a second
    // row would count twice in an aggregate above).
    let mut rows = 0;
    for actor in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = committing(&store, [initial(0), barrier(1)]);
        let vnodes = crate::stream::dispatch::owned_vnodes(actor, 2);
        let agg = hash_agg_executor(&store, "I", &[], "count(*)", input).owning(&vnodes).unwrap();
        let out = run(Box::new(agg)).await;
        rows += out.matches("+ 0").count();
    }
    assert_eq!(rows, 1);
}

/// The job the held aggregates of these tests belong to.
const JOB: TableId = TableId(7);

/// A checkpoint barrier ending epoch `prev` that releases [`JOB`].
fn release(prev: u64) -> Message {
    let mutation = Mutation { release: [JOB].into(), ..Default::default() };
    Message::Barrier(Barrier::checkpoint(Epoch(prev)).with_mutation(mutation))
}

/// A `count(*) sum(c1)` aggregation of `i I` rows grouped by `c0`, holding the groups of
/// `vnodes` (all when `None`) for [`JOB`] up to `limit` groups.
fn held(
    store: &Arc<Store>,
    vnodes: Option<Vec<VirtualNode>>,
    limit: usize,
    input: BoxedExecutor,
) -> BoxedExecutor {
    let vnodes =
        vnodes.unwrap_or_else(|| (0..VirtualNode::COUNT as u16).map(VirtualNode).collect());
    let agg = hash_agg_executor(store, "i I", &[0], "count(*) sum(c1)", input);
    Box::new(agg.holding(Hold { job: JOB, vnodes, limit }))
}

#[tokio::test]
async fn a_held_aggregate_emits_nothing_until_released_then_each_group_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"),
        barrier(1),
        chunk("i I\n- 2 5\n+ 3 1"),
        barrier(2),
        chunk("i I\n+ 1 1"),
        release(3),
        chunk("i I\n+ 3 2"),
        barrier(4),
    ];
    // Group 2 came and went while held: downstream never hears of it.
    let expected = "barrier 0

                    barrier 1

                    barrier 2

                    i I I
                    + 1 3 31
                    + 3 1 1

                    barrier 3

                    i I I
                    U- 3 1 1
                    U+ 3 2 3

                    barrier 4";
    let out = run_sorted(held(&store, None, 100, committing(&store, input))).await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn a_held_aggregate_restarted_before_its_release_still_holds_and_after_it_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let first = [initial(0), chunk("i I\n+ 1 10"), barrier(1)];
    let out = run_sorted(held(&store, None, 100, committing(&store, first))).await;
    assert_eq!(out, dedent("barrier 0\n\nbarrier 1"));
    drop(store);

    // Restarted before the release: what it held before the restart is released with the
    // rest, once.
    let store = Store::open(dir.path()).unwrap();
    let second = [initial(1), chunk("i I\n+ 1 5\n+ 2 1"), barrier(2), release(3)];
    let expected = "barrier 1

                    barrier 2

                    i I I
                    + 1 2 15
                    + 2 1 1

                    barrier 3";
    let out = run_sorted(held(&store, None, 100, committing(&store, second))).await;
    assert_eq!(out, dedent(expected));
    drop(store);

    // Restarted after the release (the job not yet marked created, so built holding): its
    // vnodes are released, and it runs as any aggregate.
    let store = Store::open(dir.path()).unwrap();
    let third = [initial(3), chunk("i I\n+ 2 1"), barrier(4), release(5)];
    let expected = "barrier 3

                    i I I
                    U- 2 1 1
                    U+ 2 2 2

                    barrier 4

                    barrier 5";
    let out = run_sorted(held(&store, None, 100, committing(&store, third))).await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn a_held_aggregate_past_its_limit_releases_early_and_other_vnodes_never_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Only the vnodes of groups 1, 2 and 3 hold; group 4's vnode is not this actor's hold.
    let vnodes_of_groups = |groups: &[i32]| {
        let column: ArrayRef = Arc::new(arrow::array::Int32Array::from(groups.to_vec()));
        crate::stream::dispatch::vnodes_of(&[column], groups.len()).unwrap()
    };
    let mut vnodes = vnodes_of_groups(&[1, 2, 3]);
    assert!(!vnodes.contains(&vnodes_of_groups(&[4])[0]), "pick groups of other vnodes");
    vnodes.sort();
    vnodes.dedup();
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 2 20\n+ 4 40"),
        barrier(1),
        chunk("i I\n+ 3 30"),
        barrier(2),
        chunk("i I\n+ 1 1"),
        barrier(3),
    ];
    // Two groups held are within the limit; the third is one too many.
    let expected = "barrier 0

                    i I I
                    + 4 1 40

                    barrier 1

                    i I I
                    + 1 1 10
                    + 2 1 20
                    + 3 1 30

                    barrier 2

                    i I I
                    U- 1 1 10
                    U+ 1 2 11

                    barrier 3";
    let out = run_sorted(held(&store, Some(vnodes), 2, committing(&store, input))).await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn a_restarted_executor_continues_from_the_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let calls = "count(*) sum(c1) min(c1)";
    let store = Store::open(dir.path()).unwrap();
    let first = [initial(0), chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"), barrier(1)];
    let expected = "barrier 0

                    i I I I
                    + 1 2 30 10
                    + 2 1 5 5

                    barrier 1";
    assert_eq!(
        run_sorted(hash_agg(&store, "i I", &[0], calls, committing(&store, first))).await,
        dedent(expected)
    );
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    let second = [initial(1), chunk("i I\n- 1 10\n+ 2 7"), barrier(2)];
    let expected = "barrier 1

                    i I I I
                    U- 1 2 30 10
                    U+ 1 1 20 20
                    U- 2 1 5 5
                    U+ 2 2 12 5

                    barrier 2";
    assert_eq!(
        run_sorted(hash_agg(&store, "i I", &[0], calls, committing(&store, second))).await,
        dedent(expected)
    );
}

#[tokio::test]
async fn a_restart_forgets_the_epochs_that_were_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Epoch 2 reaches the executor's barrier but never commits.
    let first = [initial(0), chunk("i I\n+ 1 10"), barrier(1), chunk("i I\n+ 1 20"), barrier(2)];
    let expected = "barrier 0

                    i I I
                    + 1 1 10

                    barrier 1

                    i I I
                    U- 1 1 10
                    U+ 1 2 30

                    barrier 2";
    let input = committing_until(&store, 1, first);
    let out = run_sorted(hash_agg(&store, "i I", &[0], "count(*) sum(c1)", input)).await;
    assert_eq!(out, dedent(expected));
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    // The recovery restarts from epoch 1 in epoch 3; epoch 2 is lost.
    let second =
        [Message::Barrier(Barrier::initial(Epoch(1), Epoch(3))), chunk("i I\n+ 1 1"), barrier(3)];
    let expected = "barrier 1

                    i I I
                    U- 1 1 10
                    U+ 1 2 11

                    barrier 3";
    let input = committing(&store, second);
    let out = run_sorted(hash_agg(&store, "i I", &[0], "count(*) sum(c1)", input)).await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn without_group_by_a_restart_does_not_insert_the_row_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let first = [initial(0), chunk("I\n+ 5"), barrier(1)];
    let expected = "I I
                    + 0 .

                    barrier 0

                    I I
                    U- 0 .
                    U+ 1 5

                    barrier 1";
    let out =
        run_sorted(hash_agg(&store, "I", &[], "count(*) sum(c0)", committing(&store, first))).await;
    assert_eq!(out, dedent(expected));
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    let second = [initial(1), chunk("I\n+ 2"), barrier(2)];
    let expected = "barrier 1

                    I I
                    U- 1 5
                    U+ 2 7

                    barrier 2";
    let out =
        run_sorted(hash_agg(&store, "I", &[], "count(*) sum(c0)", committing(&store, second)))
            .await;
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn groups_of_several_columns_differ_in_any_column_null_included() {
    let input = [
        initial(0),
        chunk("i T I\n+ 1 a 5\n+ 1 b 6\n+ 1 a 3\n+ . a 1\n+ 1 . 2"),
        barrier(1),
        chunk("i T I\n- 1 a 3\n- 1 . 2"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i T I I I
                    + . a 1 1 1
                    + 1 . 1 2 2
                    + 1 a 2 3 5
                    + 1 b 1 6 6

                    barrier 1

                    i T I I I
                    - 1 . 1 2 2
                    U- 1 a 2 3 5
                    U+ 1 a 1 5 5

                    barrier 2";
    let calls = "count(*) min(c2) max(c2)";
    assert_eq!(aggregate("i T I", &[0, 1], calls, input).await, dedent(expected));
}

/// As in Postgres, -0 groups with 0 and NaN with NaN; the group shows its first row's key.
#[tokio::test]
async fn float_group_keys_put_minus_zero_with_zero_and_nan_with_nan() {
    let input = [initial(0), chunk("F I\n+ 0 1\n+ -0 2\n+ NaN 3\n+ NaN 4"), barrier(1)];
    let expected = "barrier 0

                    F I I
                    + 0.0 2 3
                    + NaN 2 7

                    barrier 1";
    assert_eq!(aggregate("F I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

#[tokio::test]
async fn a_group_loaded_from_state_retracts_the_values_it_emitted() {
    // -0 is the group of 0; the update retracts the row as it was emitted (0.0).
    let input = [initial(0), chunk("F I\n+ 0 1"), barrier(1), chunk("F I\n+ -0 2"), barrier(2)];
    let expected = "barrier 0

                    F I I
                    + 0.0 1 1

                    barrier 1

                    F I I
                    U- 0.0 1 1
                    U+ 0.0 2 3

                    barrier 2";
    assert_eq!(aggregate("F I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
}

/// The aggregation of [`hash_agg`] in two phases, as the planner builds it: a
/// [`LocalAggExecutor`](crate::stream::executor::local_agg::LocalAggExecutor) over `input`
/// sending its groups at `max_groups`, and the aggregate merging its partial rows.
fn two_phase(
    store: &Arc<Store>,
    header: &str,
    group_by: &[usize],
    calls: &str,
    max_groups: usize,
    input: BoxedExecutor,
) -> BoxedExecutor {
    use crate::stream::executor::local_agg::LocalAggExecutor;
    let one = hash_agg_executor(store, header, group_by, calls, MockSource::boxed([]));
    let partial = one.result_table.full_schema();
    let copy = |c: &AggCall, arg| AggCall {
        kind: c.kind,
        arg,
        output_type: c.output_type.clone(),
        multiset: None,
        distinct: false,
        listing: None,
    };
    let locals = one.calls.iter().map(|c| copy(c, c.arg.clone())).collect();
    let local = LocalAggExecutor::new(input, one.group_exprs.clone(), locals, partial.clone())
        .unwrap()
        .with_max_groups(max_groups);
    let n = group_by.len();
    let column =
        |i: usize| -> Arc<dyn PhysicalExpr> { Arc::new(Column::new(partial.field(i).name(), i)) };
    let mut at = n + 1;
    let mut finals = Vec::new();
    for call in &one.calls {
        finals.push(copy(call, column(at)));
        at += match call.kind {
            AggKind::Count => 1,
            _ => super::sum::SumLayout::of_fields(partial.fields(), at).width(),
        };
    }
    let groups = (0..n).map(column).collect();
    let agg = HashAggExecutor::new(
        Box::new(local),
        store.clone(),
        groups,
        finals,
        one.result_table.clone(),
        one.output_schema.clone(),
    );
    Box::new(agg.merging())
}

/// Inserts, deletes and update pairs over several epochs, with NULLs, emptied groups and a
/// group emptied and refilled within an epoch.
fn changes() -> Vec<Message> {
    vec![
        initial(0),
        chunk("i I I\n+ 1 10 1\n+ 1 . 2\n+ 2 5 .\n+ 3 7 3"),
        chunk("i I I\n+ 1 20 4\n+ 4 . .\n- 3 7 3"),
        barrier(1),
        chunk("i I I\n- 1 10 1\nU- 2 5 .\nU+ 2 6 5\n+ 5 1 1"),
        chunk("i I I\n- 4 . .\n+ 4 8 8\nU- 1 . 2\nU+ 3 9 9"),
        barrier(2),
        chunk("i I I\n- 1 20 4\n- 5 1 1\n+ 6 . ."),
        barrier(3),
        barrier(4),
        chunk("i I I\n+ 1 1 1\n+ 2 2 2\n+ 3 3 3\n+ 4 4 4\n+ 5 5 5\n+ 6 6 6"),
        barrier(5),
    ]
}

#[tokio::test]
async fn two_phases_emit_what_one_aggregate_emits() {
    let calls = "count(*) sum(c1) count(c2) sum(c2)";
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let one = hash_agg(&store, "i I I", &[0], calls, committing(&store, changes()));
    let expected = run_sorted(one).await;
    assert!(expected.contains("U- 2 1 5 0 ."), "{expected}");
    for max_groups in [1, 2, 100] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = committing(&store, changes());
        let two = two_phase(&store, "i I I", &[0], calls, max_groups, input);
        assert_eq!(run_sorted(two).await, expected, "at {max_groups} groups");
    }
}

/// Numeric sums with `NaN` and infinities: the partial rows carry their counts.
#[tokio::test]
async fn two_phases_count_the_special_values_as_one_aggregate_does() {
    let changes = || {
        vec![
            initial(0),
            chunk("i N\n+ 1 1.50\n+ 1 NaN\n+ 2 Infinity\n+ 2 2\n+ 3 -Infinity"),
            chunk("i N\n+ 3 Infinity\n+ 4 5"),
            barrier(1),
            chunk("i N\n- 1 NaN\n- 3 -Infinity\n+ 4 NaN"),
            barrier(2),
            chunk("i N\n- 2 Infinity\n- 3 Infinity\n- 4 NaN"),
            barrier(3),
        ]
    };
    let calls = "count(*) sum(c1)";
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let one = hash_agg(&store, "i N", &[0], calls, committing(&store, changes()));
    let expected = run_sorted(one).await;
    let first = "+ 1 2 NaN\n+ 2 2 Infinity\n+ 3 2 NaN\n+ 4 1 5.00";
    assert!(expected.contains(first), "{expected}");
    assert!(expected.contains("U+ 2 1 2.00"), "{expected}");
    for max_groups in [1, 2, 100] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = committing(&store, changes());
        let two = two_phase(&store, "i N", &[0], calls, max_groups, input);
        assert_eq!(run_sorted(two).await, expected, "at {max_groups} groups");
    }
}

#[tokio::test]
async fn the_final_phase_merges_partial_rows_into_stored_groups() {
    // Partial rows as a local phase sends them: group, row_count, count(*), sum, nonnull.
    let input = [
        initial(0),
        chunk("i I I I I\n+ 1 2 2 30 2\n+ 2 1 1 0 0"),
        barrier(1),
        chunk("i I I I I\n+ 1 -1 -1 -10 -1\n+ 2 -1 -1 0 0\n+ 1 0 0 5 0"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i I I
                    + 1 2 30
                    + 2 1 .

                    barrier 1

                    i I I
                    U- 1 2 30
                    U+ 1 1 25
                    - 2 1 .

                    barrier 2";
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // The final phase over partial rows of `(i, I)` input rows: group by c0, count(c2) as
    // count(*), sum(c3) with its non-NULL count in c4.
    let one = hash_agg_executor(&store, "i I", &[0], "count(*) sum(c1)", MockSource::boxed([]));
    let partial: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c0", 0));
    let mut calls = Vec::new();
    for (call, at) in one.calls.iter().zip([2, 3]) {
        calls.push(AggCall {
            kind: call.kind,
            arg: Arc::new(Column::new(&format!("c{at}"), at)),
            output_type: call.output_type.clone(),
            multiset: None,
            distinct: false,
            listing: None,
        });
    }
    let agg = HashAggExecutor::new(
        committing(&store, input),
        store.clone(),
        vec![partial],
        calls,
        one.result_table.clone(),
        one.output_schema.clone(),
    )
    .merging();
    assert_eq!(run_sorted(Box::new(agg)).await, dedent(expected));
}

#[tokio::test]
async fn a_distinct_value_counts_once_until_its_last_row_goes() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 10\n+ 1 10\n+ 1 20\n+ 1 .\n+ 2 5"),
        barrier(1),
        // One of the two 10s goes: still there. The 20 goes: gone.
        chunk("i I\n- 1 10\n- 1 20"),
        barrier(2),
        // The last 10 goes and comes back within one epoch: nothing changes.
        chunk("i I\n- 1 10\n+ 1 10\n+ 2 5\n+ 2 7"),
        barrier(3),
    ];
    let expected = "barrier 0

                    i I I I F
                    + 1 4 2 30 15.0
                    + 2 1 1 5 5.0

                    barrier 1

                    i I I I F
                    U- 1 4 2 30 15.0
                    U+ 1 2 1 10 10.0

                    barrier 2

                    i I I I F
                    U- 2 1 1 5 5.0
                    U+ 2 3 2 12 6.0

                    barrier 3";
    let calls = "count(*) count(distinct:c1) sum(distinct:c1) avg(distinct:c1)";
    assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
}

#[tokio::test]
async fn a_distinct_count_restarts_from_its_committed_multiset() {
    let dir = tempfile::tempdir().unwrap();
    let calls = "count(*) count(distinct:c1)";
    let store = Store::open(dir.path()).unwrap();
    let first = [initial(0), chunk("i I\n+ 1 10\n+ 1 10\n+ 1 20"), barrier(1)];
    run(hash_agg(&store, "i I", &[0], calls, committing(&store, first))).await;
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    // 10 stays (one of its two rows goes), 20 goes, 30 and 40 come.
    let second = [initial(1), chunk("i I\n- 1 10\n- 1 20\n+ 1 30\n+ 1 40"), barrier(2)];
    let expected = "barrier 1

                    i I I
                    U- 1 3 2
                    U+ 1 3 3

                    barrier 2";
    assert_eq!(
        run_sorted(hash_agg(&store, "i I", &[0], calls, committing(&store, second))).await,
        dedent(expected)
    );
}

/// Random inserts and deletes (values colliding, NULLs among them) under `count(DISTINCT)`,
/// `sum(DISTINCT)` and `avg(DISTINCT)` beside the plain calls, fed one epoch at a time and
/// committed: after every barrier the output so far equals the aggregates of the rows.
#[tokio::test]
async fn distinct_calls_equal_their_aggregates_of_the_rows_after_every_epoch() {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::stream::test_utils::Lcg;

    let calls = "count(*) count(distinct:c1) sum(distinct:c1) avg(distinct:c1) sum(c1)";
    for seed in 0..6u64 {
        let mut rng = Lcg::new(seed);
        // Live rows: (group, value) with their multiplicity.
        let mut rows: Vec<(i32, Option<i64>)> = Vec::new();
        let mut messages = vec![initial(0)];
        let mut states = Vec::new();
        for epoch in 1..=25u64 {
            let mut lines = vec!["i I".to_owned()];
            for _ in 0..1 + rng.below(6) {
                let show = |v: Option<i64>| v.map_or(".".to_owned(), |v| v.to_string());
                if !rows.is_empty() && rng.below(5) < 2 {
                    let (g, v) = rows.swap_remove(rng.below(rows.len() as u64) as usize);
                    lines.push(format!("- {g} {}", show(v)));
                } else {
                    let g = rng.below(3) as i32;
                    let v = match rng.below(5) {
                        0 => None,
                        v => Some(v as i64 * 10),
                    };
                    lines.push(format!("+ {g} {}", show(v)));
                    rows.push((g, v));
                }
            }
            messages.push(chunk(&lines.join("\n")));
            messages.push(barrier(epoch));
            let mut expected: BTreeMap<String, i64> = BTreeMap::new();
            let groups: BTreeSet<i32> = rows.iter().map(|r| r.0).collect();
            for g in groups {
                let all: Vec<i64> = rows.iter().filter(|r| r.0 == g).filter_map(|r| r.1).collect();
                let n = rows.iter().filter(|r| r.0 == g).count();
                let set: BTreeSet<i64> = all.iter().copied().collect();
                let sum = |s: i64, any: bool| if any { s.to_string() } else { ".".to_owned() };
                let dsum: i64 = set.iter().sum();
                let avg = match set.len() {
                    0 => ".".to_owned(),
                    k => format!("{:?}", dsum as f64 / k as f64),
                };
                let line = format!(
                    "{g} {n} {} {} {avg} {}",
                    set.len(),
                    sum(dsum, !set.is_empty()),
                    sum(all.iter().sum(), !all.is_empty())
                );
                expected.insert(line, 1);
            }
            states.push(expected);
        }
        assert_views_at_barriers(
            |store, input| hash_agg(store, "i I", &[0], calls, input),
            messages,
            &states,
            seed,
        )
        .await;
    }
}

/// Random inserts and deletes (runs of inserts only, where a min/max takes the new extreme
/// without reading its multiset, and deletes of the extreme, where it reads it): after every
/// epoch, min and max equal those of the group's live rows.
#[tokio::test]
async fn min_and_max_equal_their_aggregates_of_the_rows_after_every_epoch() {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::stream::test_utils::Lcg;

    for seed in 0..8u64 {
        let mut rng = Lcg::new(seed + 40);
        let mut rows: Vec<(i32, Option<i64>)> = Vec::new();
        let mut messages = vec![initial(0)];
        let mut states = Vec::new();
        for epoch in 1..=30u64 {
            let deleting = rng.below(3) == 0;
            let mut lines = vec!["i I".to_owned()];
            for _ in 0..1 + rng.below(6) {
                let show = |v: Option<i64>| v.map_or(".".to_owned(), |v| v.to_string());
                if deleting && !rows.is_empty() {
                    let (g, v) = rows.swap_remove(rng.below(rows.len() as u64) as usize);
                    lines.push(format!("- {g} {}", show(v)));
                } else {
                    let g = rng.below(3) as i32;
                    let v = match rng.below(6) {
                        0 => None,
                        _ => Some(rng.below(41) as i64 - 20),
                    };
                    lines.push(format!("+ {g} {}", show(v)));
                    rows.push((g, v));
                }
            }
            messages.push(chunk(&lines.join("\n")));
            messages.push(barrier(epoch));
            let mut expected: BTreeMap<String, i64> = BTreeMap::new();
            let groups: BTreeSet<i32> = rows.iter().map(|r| r.0).collect();
            for g in groups {
                let values: Vec<i64> =
                    rows.iter().filter(|r| r.0 == g).filter_map(|r| r.1).collect();
                let n = rows.iter().filter(|r| r.0 == g).count();
                let show = |v: Option<&i64>| v.map_or(".".to_owned(), |v| v.to_string());
                let (min, max) = (show(values.iter().min()), show(values.iter().max()));
                expected.insert(format!("{g} {n} {min} {max}"), 1);
            }
            states.push(expected);
        }
        assert_views_at_barriers(
            |store, input| hash_agg(store, "i I", &[0], "count(*) min(c1) max(c1)", input),
            messages,
            &states,
            seed,
        )
        .await;
    }
}

/// A new view's aggregate whose cache holds two groups of ten: groups go in and out of the
/// cache, are emptied and come back, and a group it has let go of is read back (it knows which
/// by their hashes) while a group it never stored is not looked for. After every epoch each
/// group's count and sum equal those of its live rows.
#[tokio::test]
async fn groups_in_and_out_of_a_small_cache_equal_their_aggregates_after_every_epoch() {
    use std::collections::BTreeMap;

    use crate::stream::test_utils::Lcg;

    for seed in 0..8u64 {
        let mut rng = Lcg::new(seed + 90);
        let mut rows: Vec<(i32, i64)> = Vec::new();
        let mut messages = vec![initial(0)];
        let mut states = Vec::new();
        for epoch in 1..=40u64 {
            let mut lines = vec!["i I".to_owned()];
            for _ in 0..1 + rng.below(4) {
                if rng.below(3) == 0 && !rows.is_empty() {
                    let (g, v) = rows.swap_remove(rng.below(rows.len() as u64) as usize);
                    lines.push(format!("- {g} {v}"));
                } else {
                    let (g, v) = (rng.below(10) as i32, rng.below(100) as i64);
                    lines.push(format!("+ {g} {v}"));
                    rows.push((g, v));
                }
            }
            messages.push(chunk(&lines.join("\n")));
            messages.push(barrier(epoch));
            let mut groups: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
            for (g, v) in &rows {
                let group = groups.entry(*g).or_default();
                group.0 += 1;
                group.1 += v;
            }
            states.push(groups.iter().map(|(g, (n, s))| (format!("{g} {n} {s}"), 1)).collect());
        }
        assert_views_at_barriers(
            |store, input| {
                let agg = hash_agg_executor(store, "i I", &[0], "count(*) sum(c1)", input);
                Box::new(agg.with_cache_groups(2)) as BoxedExecutor
            },
            messages,
            &states,
            seed,
        )
        .await;
    }
}

#[tokio::test]
async fn string_agg_lists_a_groups_values_in_order_as_often_as_they_are_there() {
    let input = [
        initial(0),
        chunk("i T\n+ 1 b\n+ 1 a\n+ 1 b\n+ 1 .\n+ 2 z"),
        barrier(1),
        // One b goes (the other stays), a c comes; group 2's only value goes.
        chunk("i T\n- 1 b\n+ 1 c\n- 2 z"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i T I
                    + 1 a,b,b 4
                    + 2 z 1

                    barrier 1

                    i T I
                    U- 1 a,b,b 4
                    U+ 1 a,b,c 4
                    - 2 z 1

                    barrier 2";
    let calls = "string_agg(c1) count(*)";
    assert_eq!(aggregate("i T", &[0], calls, input).await, dedent(expected));
}

/// A sum that saw NaN or an infinity recovers when they go (see [`super::sum`]), as Postgres's
/// sum over what is left; floats and numerics alike, DISTINCT too.
#[tokio::test]
async fn sums_and_averages_count_nan_and_infinities_apart_and_recover_when_they_go() {
    let input = [
        initial(0),
        chunk("i F N\n+ 1 1.5 1.50\n+ 1 NaN NaN"),
        barrier(1),
        // Still NaN: nothing changes.
        chunk("i F N\n+ 1 inf Infinity"),
        barrier(2),
        chunk("i F N\n- 1 NaN NaN\n+ 1 -inf -Infinity"),
        barrier(3),
        chunk("i F N\n- 1 inf Infinity"),
        barrier(4),
        chunk("i F N\n- 1 -inf -Infinity"),
        barrier(5),
    ];
    let calls = "sum(c1) avg(c1) sum(c2) avg(c2) sum(distinct:c1)";
    let expected = "barrier 0

                    i F F N N F
                    + 1 NaN NaN NaN NaN NaN

                    barrier 1

                    barrier 2

                    barrier 3

                    i F F N N F
                    U- 1 NaN NaN NaN NaN NaN
                    U+ 1 -inf -inf -Infinity -Infinity -inf

                    barrier 4

                    i F F N N F
                    U- 1 -inf -inf -Infinity -Infinity -inf
                    U+ 1 1.5 1.5 1.50 1.500000 1.5

                    barrier 5";
    assert_eq!(aggregate("i F N", &[0], calls, input).await, dedent(expected));
}

/// An average of numerics divides their exact sum (not a float) at the output's scale.
#[tokio::test]
async fn a_numeric_average_is_exact_at_its_scale() {
    let input = [
        initial(0),
        chunk("i N\n+ 1 1\n+ 1 1\n+ 1 2\n+ 2 0.10\n+ 2 0.20"),
        barrier(1),
        chunk("i N\n- 1 2\n+ 2 -0.30"),
        barrier(2),
    ];
    let expected = "barrier 0

                    i N
                    + 1 1.333333
                    + 2 0.150000

                    barrier 1

                    i N
                    U- 1 1.333333
                    U+ 1 1.000000
                    U- 2 0.150000
                    U+ 2 0.000000

                    barrier 2";
    assert_eq!(aggregate("i N", &[0], "avg(c1)", input).await, dedent(expected));
}

/// Random float changes with `NaN` and infinities among them: after every epoch the view is
/// what Postgres computes from the live rows (values are halves, so float sums are exact in
/// any order).
#[tokio::test]
async fn sums_with_special_values_equal_postgres_over_the_rows_after_every_epoch() {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::stream::test_utils::Lcg;

    let values = [Some(1.5), Some(2.0), Some(-3.0), Some(f64::NAN), Some(f64::INFINITY)];
    let values = [&values[..], &[Some(f64::NEG_INFINITY), None]].concat();
    // Postgres's sum of `finite` plus the special values counted in `specials`.
    let postgres = |finite: f64, any: bool, nan: bool, pos: bool, neg: bool| match () {
        _ if nan || (pos && neg) => "NaN".to_owned(),
        _ if pos => "inf".to_owned(),
        _ if neg => "-inf".to_owned(),
        _ if any => format!("{finite:?}"),
        _ => ".".to_owned(),
    };
    let calls = "count(*) sum(c1) avg(c1) sum(distinct:c1)";
    for seed in 0..6u64 {
        let mut rng = Lcg::new(seed);
        let mut rows: Vec<(i32, Option<f64>)> = Vec::new();
        let mut messages = vec![initial(0)];
        let mut states = Vec::new();
        let show = |v: Option<f64>| v.map_or(".".to_owned(), |v| format!("{v}"));
        for epoch in 1..=25u64 {
            let mut lines = vec!["i F".to_owned()];
            for _ in 0..1 + rng.below(6) {
                if !rows.is_empty() && rng.below(5) < 2 {
                    let (g, v) = rows.swap_remove(rng.below(rows.len() as u64) as usize);
                    lines.push(format!("- {g} {}", show(v)));
                } else {
                    let (g, v) = (rng.below(3) as i32, values[rng.below(7) as usize]);
                    lines.push(format!("+ {g} {}", show(v)));
                    rows.push((g, v));
                }
            }
            messages.push(chunk(&lines.join("\n")));
            messages.push(barrier(epoch));
            let mut expected: BTreeMap<String, i64> = BTreeMap::new();
            for g in rows.iter().map(|r| r.0).collect::<BTreeSet<_>>() {
                let all: Vec<f64> = rows.iter().filter(|r| r.0 == g).filter_map(|r| r.1).collect();
                let n = rows.iter().filter(|r| r.0 == g).count();
                let of = |vs: &[f64], avg: bool| {
                    let finite: Vec<f64> = vs.iter().copied().filter(|v| v.is_finite()).collect();
                    let sum: f64 = finite.iter().sum();
                    let finite_value = if avg { sum / finite.len() as f64 } else { sum };
                    postgres(
                        finite_value,
                        !vs.is_empty(),
                        vs.iter().any(|v| v.is_nan()),
                        vs.contains(&f64::INFINITY),
                        vs.contains(&f64::NEG_INFINITY),
                    )
                };
                let mut distinct: Vec<f64> = Vec::new();
                for v in &all {
                    if !distinct.iter().any(|d| d.to_bits() == v.to_bits()) {
                        distinct.push(*v);
                    }
                }
                let line = format!(
                    "{g} {n} {} {} {}",
                    of(&all, false),
                    of(&all, true),
                    of(&distinct, false)
                );
                expected.insert(line, 1);
            }
            states.push(expected);
        }
        assert_views_at_barriers(
            |store, input| hash_agg(store, "i F", &[0], calls, input),
            messages,
            &states,
            seed,
        )
        .await;
    }
}

/// Variances and standard deviations are computed again from the group's values at each
/// barrier: a value that goes leaves no trace, one present twice counts twice.
#[tokio::test]
async fn variances_and_deviations_follow_the_groups_values() {
    let input = [
        initial(0),
        chunk("i I\n+ 1 1\n+ 1 2\n+ 1 4\n+ 2 5"),
        barrier(1),
        chunk("i I\n- 1 4\n+ 1 2\n+ 2 7\n+ 2 ."),
        barrier(2),
        chunk("i I\n- 2 5\n- 2 7"),
        barrier(3),
    ];
    let calls = "var_samp(c1) var_pop(c1) stddev_samp(c1) stddev_pop(c1)";
    let expected = "barrier 0

                    i F F F F
                    + 1 2.3333333333333335 1.5555555555555556 1.5275252316519468 1.247219128924647
                    + 2 . 0.0 . 0.0

                    barrier 1

                    i F F F F
                    U- 1 2.3333333333333335 1.5555555555555556 1.5275252316519468 1.247219128924647
                    U+ 1 0.3333333333333333 0.2222222222222222 0.5773502691896257 0.4714045207910317
                    U- 2 . 0.0 . 0.0
                    U+ 2 2.0 1.0 1.4142135623730951 1.0

                    barrier 2

                    i F F F F
                    U- 2 2.0 1.0 1.4142135623730951 1.0
                    U+ 2 . . . .

                    barrier 3";
    assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
}

/// Runs `messages` through the aggregate `build` makes over a new store and checks the view
/// after every barrier against `states` (the expected view after each epoch).
async fn assert_views_at_barriers(
    build: impl FnOnce(&Arc<Store>, BoxedExecutor) -> BoxedExecutor,
    messages: Vec<Message>,
    states: &[std::collections::BTreeMap<String, i64>],
    seed: u64,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let views = crate::stream::test_utils::views_at_barriers(
        &store,
        |input| build(&store, input),
        messages,
    )
    .await;
    assert_eq!(views.len(), states.len());
    for (n, (view, state)) in views.iter().zip(states).enumerate() {
        assert_eq!(view, state, "seed {seed}, epoch {}", n + 1);
    }
}
