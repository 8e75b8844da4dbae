//! Chunk-in / chunk-out tests of the over-window. Rows are `id | g | x`, partitioned by `g`
//! and ordered by `x` (ties by `id`, the stream key).

use std::collections::BTreeMap;

use arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNode;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::physical_expr::expressions::Column;

use super::*;
use crate::catalog::{ColumnCatalog, Epoch, RelationKind, TableId};
use crate::stream::test_utils::{
    Lcg, MockSource, barrier, chunk, dedent, initial, run, schema, views_at_barriers,
};
use crate::types::DataType;

/// The window functions `names` (`rank`, `row_number`, `sum`, `lag`, `count`, `first`) over
/// `PARTITION BY g ORDER BY x` (or over whole partitions with `whole`), as DataFusion plans
/// them from SQL over rows `c0 | c1 | c2`, with the schema they read.
async fn calls(names: &[&str], whole: bool) -> (Vec<Expr>, DFSchema) {
    let over = match whole {
        true => "OVER (PARTITION BY c1)",
        false => "OVER (PARTITION BY c1 ORDER BY c2 NULLS LAST)",
    };
    let items: Vec<String> = names
        .iter()
        .map(|name| {
            let f = match *name {
                "rank" => "rank()",
                "row_number" => "row_number()",
                "sum" => "sum(c2)",
                "count" => "count(c2)",
                "first" => "first_value(c2)",
                "lag" => "lag(c2)",
                other => panic!("no window function {other}"),
            };
            format!("{f} {over}")
        })
        .collect();
    let ctx = datafusion::prelude::SessionContext::new();
    ctx.register_batch("t", RecordBatch::new_empty(schema("i I I"))).unwrap();
    let sql = format!("SELECT {} FROM t", items.join(", "));
    let plan = ctx.state().create_logical_plan(&sql).await.unwrap();
    let mut found = None;
    plan.apply(|node| {
        if let datafusion::logical_expr::LogicalPlan::Window(w) = node {
            found = Some((w.window_expr.clone(), w.input.schema().as_ref().clone()));
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    })
    .unwrap();
    found.expect("a window")
}

/// An over-window over `input` (rows `i I I`), computing `calls` over `dfschema`, its rows in
/// table 100.
fn over_window(
    store: &Arc<Store>,
    (calls, dfschema): &(Vec<Expr>, DFSchema),
    input: BoxedExecutor,
) -> BoxedExecutor {
    let in_schema = schema("i I I");
    let props = ExecutionProps::new();
    let exprs: Vec<Arc<dyn WindowExpr>> = calls
        .iter()
        .map(|e| {
            let ctx = PhysicalPlanningContext::default();
            datafusion::physical_planner::create_window_expr(e, dfschema, &props, &ctx).unwrap()
        })
        .collect();
    let value_fields: Vec<Field> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| Field::new(format!("v{i}"), e.field().unwrap().data_type().clone(), true))
        .collect();
    let mut columns = vec![("partition_0", ArrowType::Int64), ("_order", ArrowType::Binary)];
    columns.extend([("id", ArrowType::Int32), ("g", ArrowType::Int64), ("x", ArrowType::Int64)]);
    for f in &value_fields {
        columns.push((f.name().as_str(), f.data_type().clone()));
    }
    columns.push(("_emitted", ArrowType::Boolean));
    let columns = columns
        .into_iter()
        .map(|(n, t)| ColumnCatalog::new(n.to_owned(), DataType::from_arrow(&t).unwrap()))
        .collect();
    let mut table =
        TableCatalog::new_table(TableId(100), "t100".into(), columns, vec![0, 1, 2], String::new());
    table.kind = RelationKind::Internal;
    table.dist_key_len = 1;
    let partition: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c1", 1));
    // Ordered by x, NULLs last, as the calls are (or not at all, as they are not).
    let order = match exprs[0].order_by().is_empty() {
        true => Vec::new(),
        false => vec![SortKey {
            expr: Arc::new(Column::new("c2", 2)),
            descending: false,
            nulls_first: false,
        }],
    };
    let partition_field = Field::new("_partition_0", ArrowType::Int64, true);
    let output = output_schema(&in_schema, 3, &value_fields, &[partition_field]);
    let spec = OverWindowSpec {
        partition: vec![partition],
        order,
        calls: exprs,
        visible_schema: in_schema,
    };
    Box::new(OverWindowExecutor::new(input, spec, Arc::new(table), store.clone(), output))
}

async fn windowed(names: &[&str], input: impl IntoIterator<Item = Message>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    run(over_window(&store, &calls(names, false).await, MockSource::boxed(input))).await
}

#[tokio::test]
async fn rows_get_their_window_values_at_the_barrier() {
    let input = [initial(0), chunk("i I I\n+ 1 1 10\n+ 2 1 20\n+ 3 1 20\n+ 4 2 5"), barrier(1)];
    // Peers (x = 20) share a rank and a running sum; lag reads the row before.
    let expected = "barrier 0

                    i I I U I I I
                    + 4 2 5 1 5 . 2

                    i I I U I I I
                    + 1 1 10 1 10 . 1
                    + 2 1 20 2 50 10 1
                    + 3 1 20 2 50 20 1

                    barrier 1";
    assert_eq!(windowed(&["rank", "sum", "lag"], input).await, dedent(expected));
}

#[tokio::test]
async fn a_change_updates_the_rows_whose_values_it_moves() {
    let input = [
        initial(0),
        chunk("i I I\n+ 1 1 10\n+ 2 1 20\n+ 3 1 30"),
        barrier(1),
        // A row before the others: every rank and running sum after it moves.
        chunk("i I I\n+ 4 1 5"),
        barrier(2),
        // The last row goes: nobody else's values change.
        chunk("i I I\n- 3 1 30"),
        barrier(3),
        // A row moves within its partition, then another leaves it for another partition.
        chunk("i I I\nU- 1 1 10\nU+ 1 1 25\nU- 2 1 20\nU+ 2 2 20"),
        barrier(4),
    ];
    let expected = "barrier 0

                    i I I U I I
                    + 1 1 10 1 10 1
                    + 2 1 20 2 30 1
                    + 3 1 30 3 60 1

                    barrier 1

                    i I I U I I
                    U- 1 1 10 1 10 1
                    U+ 1 1 10 2 15 1
                    U- 2 1 20 2 30 1
                    U+ 2 1 20 3 35 1
                    U- 3 1 30 3 60 1
                    U+ 3 1 30 4 65 1
                    + 4 1 5 1 5 1

                    barrier 2

                    i I I U I I
                    - 3 1 30 4 65 1

                    barrier 3

                    i I I U I I
                    - 1 1 10 2 15 1
                    - 2 1 20 3 35 1

                    i I I U I I
                    + 2 2 20 1 20 2

                    i I I U I I
                    + 1 1 25 2 30 1

                    barrier 4";
    assert_eq!(windowed(&["rank", "sum"], input).await, dedent(expected));
}

#[tokio::test]
async fn a_row_inserted_and_deleted_within_an_epoch_never_shows() {
    let input = [
        initial(0),
        chunk("i I I\n+ 1 1 10"),
        barrier(1),
        chunk("i I I\n+ 2 1 5\n- 2 1 5\nU- 1 1 10\nU+ 1 1 11\nU- 1 1 11\nU+ 1 1 12"),
        barrier(2),
    ];
    // Row 1 is deleted once with what was emitted for it, and inserted with its last value.
    let expected = "barrier 0

                    i I I I I
                    + 1 1 10 1 1

                    barrier 1

                    i I I I I
                    - 1 1 10 1 1

                    i I I I I
                    + 1 1 12 1 1

                    barrier 2";
    assert_eq!(windowed(&["count"], input).await, dedent(expected));
}

#[tokio::test]
async fn a_restart_goes_on_from_the_stored_rows_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let names = calls(&["row_number", "first"], false).await;
    let first = [initial(0), chunk("i I I\n+ 1 1 10\n+ 2 1 20"), barrier(1)];
    run(over_window(&store, &names, MockSource::boxed(first))).await;
    store.commit(Epoch(1)).unwrap();
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    let second = [initial(1), chunk("i I I\n+ 3 1 1\n- 2 1 20"), barrier(2)];
    let expected = "barrier 1

                    i I I U I I
                    - 2 1 20 2 10 1

                    i I I U I I
                    U- 1 1 10 1 10 1
                    U+ 1 1 10 2 1 1
                    + 3 1 1 1 1 1

                    barrier 2";
    let out = run(over_window(&store, &names, MockSource::boxed(second))).await;
    assert_eq!(out, dedent(expected));
}

/// Random inserts, deletes and updates (values colliding, NULLs among them, rows moving
/// between partitions) under window functions ordered and over whole partitions: after every
/// barrier the output so far equals the window values computed from the rows.
#[tokio::test]
async fn every_window_equals_its_values_over_the_rows_after_every_epoch() {
    let names = ["rank", "row_number", "sum", "lag", "count", "first"];
    for whole in [false, true] {
        for seed in 0..4u64 {
            let mut rng = Lcg::new(seed * 7 + u64::from(whole));
            let mut rows: BTreeMap<i32, (i64, Option<i64>)> = BTreeMap::new();
            let mut messages = vec![initial(0)];
            let mut states = Vec::new();
            let mut next_id = 0;
            for epoch in 1..=25u64 {
                let mut lines = vec!["i I I".to_owned()];
                let show = |v: Option<i64>| v.map_or(".".to_owned(), |v| v.to_string());
                let value = |rng: &mut Lcg| match rng.below(6) {
                    0 => None,
                    v => Some(v as i64 * 10),
                };
                for _ in 0..1 + rng.below(4) {
                    if !rows.is_empty() && rng.below(3) == 0 {
                        let ids: Vec<i32> = rows.keys().copied().collect();
                        let id = ids[rng.below(ids.len() as u64) as usize];
                        let (g, x) = rows.remove(&id).unwrap();
                        if rng.below(2) == 0 {
                            let (ng, nx) = (rng.below(3) as i64, value(&mut rng));
                            lines.push(format!(
                                "U- {id} {g} {}\nU+ {id} {ng} {}",
                                show(x),
                                show(nx)
                            ));
                            rows.insert(id, (ng, nx));
                        } else {
                            lines.push(format!("- {id} {g} {}", show(x)));
                        }
                    } else {
                        next_id += 1;
                        let (g, x) = (rng.below(3) as i64, value(&mut rng));
                        lines.push(format!("+ {next_id} {g} {}", show(x)));
                        rows.insert(next_id, (g, x));
                    }
                }
                messages.push(chunk(&lines.join("\n")));
                messages.push(barrier(epoch));
                states.push(expected(&rows, whole));
            }
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let names = calls(&names, whole).await;
            let views = views_at_barriers(&store, |i| over_window(&store, &names, i), messages);
            let views = views.await;
            assert_eq!(views.len(), states.len());
            for (n, (view, state)) in views.iter().zip(&states).enumerate() {
                assert_eq!(view, state, "whole {whole}, seed {seed}, epoch {}", n + 1);
            }
        }
    }
}

/// The output rows of `rows` under rank, row_number, running sum, lag, running count and
/// first_value over `PARTITION BY g ORDER BY x NULLS LAST` (ties by id), or over whole
/// partitions (every row a peer of every other, in id order).
fn expected(rows: &BTreeMap<i32, (i64, Option<i64>)>, whole: bool) -> BTreeMap<String, i64> {
    let show = |v: Option<i64>| v.map_or(".".to_owned(), |v| v.to_string());
    let mut out = BTreeMap::new();
    for g in 0..3 {
        let mut part: Vec<(i32, Option<i64>)> =
            rows.iter().filter(|(_, r)| r.0 == g).map(|(id, r)| (*id, r.1)).collect();
        if !whole {
            // NULLS LAST, then by id.
            part.sort_by_key(|(id, x)| (x.is_none(), *x, *id));
        }
        let key = |x: Option<i64>| if whole { None } else { Some(x) };
        for (i, (id, x)) in part.iter().enumerate() {
            let peers_end = part.iter().rposition(|(_, y)| key(*y) == key(*x)).expect("itself") + 1;
            let first_peer = part.iter().position(|(_, y)| key(*y) == key(*x)).unwrap();
            let rank = first_peer + 1;
            let frame = &part[..peers_end];
            let values: Vec<i64> = frame.iter().filter_map(|(_, y)| *y).collect();
            let sum = if values.is_empty() { None } else { Some(values.iter().sum()) };
            let lag = if i == 0 { None } else { part[i - 1].1 };
            let first = part[0].1;
            let line = format!(
                "{id} {g} {} {rank} {} {} {} {} {} {g}",
                show(*x),
                i + 1,
                show(sum),
                show(lag),
                values.len(),
                show(first)
            );
            out.insert(line, 1);
        }
    }
    out
}
