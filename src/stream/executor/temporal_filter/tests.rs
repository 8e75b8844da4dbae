//! Chunk-in / chunk-out tests of the temporal filter. Rows are `id | t`, `t` in seconds; the
//! clock is given in seconds too, and conditions compare `t` with whole seconds of `now`.

use std::collections::BTreeMap;

use arrow::datatypes::DataType as ArrowType;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, Literal};
use datafusion::scalar::ScalarValue;

use super::*;
use crate::catalog::{ColumnCatalog, Epoch, RelationKind, TableId};
use crate::stream::message::Barrier;
use crate::stream::test_utils::{
    Lcg, MockSource, chunk, committing, dedent, run, views_at_barriers,
};
use crate::types::DataType;

/// `now` in whole seconds minus `minus`, over `id | t | now`.
fn now_minus(minus: i64) -> Arc<dyn PhysicalExpr> {
    let now: Arc<dyn PhysicalExpr> = Arc::new(Column::new("now", 2));
    let nanos = Arc::new(CastExpr::new(now, ArrowType::Int64, None));
    let billion = Arc::new(Literal::new(ScalarValue::Int64(Some(1_000_000_000))));
    let seconds = Arc::new(BinaryExpr::new(nanos, Operator::Divide, billion));
    let minus = Arc::new(Literal::new(ScalarValue::Int64(Some(minus))));
    Arc::new(BinaryExpr::new(seconds, Operator::Minus, minus))
}

/// `t op now - minus`.
fn condition(op: Operator, minus: i64) -> TemporalCondition {
    let t: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c1", 1));
    TemporalCondition { column: 1, predicate: Arc::new(BinaryExpr::new(t, op, now_minus(minus))) }
}

/// The state table of a condition over `id | t`: `_time | id | t`, keyed by `_time | id`.
fn table(id: u32) -> Arc<TableCatalog> {
    let columns = [("_time", ArrowType::Int64), ("id", ArrowType::Int32), ("t", ArrowType::Int64)]
        .iter()
        .map(|(n, t)| ColumnCatalog::new((*n).to_owned(), DataType::from_arrow(t).unwrap()))
        .collect();
    let mut table =
        TableCatalog::new_table(TableId(id), format!("t{id}"), columns, vec![0, 1], String::new());
    table.kind = RelationKind::Internal;
    table.dist_key_len = 0;
    Arc::new(table)
}

/// A temporal filter over `input` with `leaving` and `entering` conditions.
fn filter(
    store: &Arc<Store>,
    leaving: Option<TemporalCondition>,
    entering: Option<TemporalCondition>,
    input: BoxedExecutor,
) -> BoxedExecutor {
    let leaving = leaving.map(|condition| KeptBy { condition, table: table(100) });
    let entering = entering.map(|condition| KeptBy { condition, table: table(101) });
    let vnodes = crate::stream::dispatch::owned_vnodes(0, 1);
    Box::new(TemporalFilterExecutor::new(input, store.clone(), 2, vnodes, leaving, entering))
}

/// A checkpoint barrier ending epoch `prev`, made at second `at`.
fn barrier_at(prev: u64, at: i64) -> Message {
    Message::Barrier(Barrier::checkpoint(Epoch(prev)).at(at * 1_000_000))
}

/// The first barrier, made at second `at`.
fn initial_at(committed: u64, at: i64) -> Message {
    let barrier = Barrier::initial(Epoch(committed), Epoch(committed + 1));
    Message::Barrier(barrier.at(at * 1_000_000))
}

async fn filtered(
    leaving: Option<TemporalCondition>,
    entering: Option<TemporalCondition>,
    input: impl IntoIterator<Item = Message>,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    run(filter(&store, leaving, entering, MockSource::boxed(input))).await
}

#[tokio::test]
async fn a_leaving_condition_shows_rows_until_they_age_out() {
    // t > now - 10: a row shows while now < t + 10.
    let input = [
        initial_at(0, 100),
        chunk("i I\n+ 1 95\n+ 2 85\n+ 3 ."),
        barrier_at(1, 104),
        chunk("i I\n+ 4 100"),
        barrier_at(2, 105),
        chunk("i I\n- 4 100"),
        barrier_at(3, 200),
    ];
    let expected = "barrier 0

                    i I
                    + 1 95

                    barrier 1

                    i I
                    + 4 100

                    barrier 2

                    i I
                    - 1 95

                    i I
                    - 4 100

                    barrier 3";
    let leaving = Some(condition(Operator::Gt, 10));
    assert_eq!(filtered(leaving, None, input).await, dedent(expected));
}

#[tokio::test]
async fn an_entering_condition_shows_rows_once_their_time_comes() {
    // t <= now.
    let input = [
        initial_at(0, 100),
        chunk("i I\n+ 1 90\n+ 2 110\n+ 3 120\n+ 4 ."),
        barrier_at(1, 110),
        chunk("i I\n- 3 120\n- 1 90"),
        barrier_at(2, 130),
    ];
    let expected = "barrier 0

                    i I
                    + 1 90

                    barrier 1

                    i I
                    + 2 110

                    i I
                    - 1 90

                    barrier 2";
    let entering = Some(condition(Operator::LtEq, 0));
    assert_eq!(filtered(None, entering, input).await, dedent(expected));
}

#[tokio::test]
async fn a_window_shows_rows_from_their_time_until_they_age_out() {
    // now - 10 < t <= now.
    let input = [
        initial_at(0, 100),
        chunk("i I\n+ 1 95\n+ 2 105\n+ 3 130"),
        barrier_at(1, 106),
        barrier_at(2, 150),
    ];
    // At 150, row 3's time has come and gone: it never shows.
    let expected = "barrier 0

                    i I
                    + 1 95

                    barrier 1

                    i I
                    - 1 95

                    i I
                    + 2 105

                    barrier 2

                    i I
                    - 2 105";
    let (leaving, entering) = (condition(Operator::Gt, 10), condition(Operator::LtEq, 0));
    assert_eq!(filtered(Some(leaving), Some(entering), input).await, dedent(expected));
}

#[tokio::test]
async fn update_halves_on_two_sides_of_the_clock_become_an_insert_or_a_delete() {
    let input = [
        initial_at(0, 100),
        chunk("i I\n+ 1 95\n+ 2 80"),
        barrier_at(1, 100),
        chunk("i I\nU- 1 95\nU+ 1 70\nU- 2 80\nU+ 2 99"),
        barrier_at(2, 106),
    ];
    // Row 2 moved to 99 and ages out at 109, row 1 left; nothing more at 106.
    let expected = "barrier 0

                    i I
                    + 1 95

                    barrier 1

                    i I
                    - 1 95
                    + 2 99

                    barrier 2";
    let leaving = Some(condition(Operator::Gt, 10));
    assert_eq!(filtered(leaving, None, input).await, dedent(expected));
}

#[tokio::test]
async fn a_restart_catches_up_with_the_time_that_passed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let conditions = || (Some(condition(Operator::Gt, 10)), Some(condition(Operator::LtEq, 0)));
    let first = [initial_at(0, 100), chunk("i I\n+ 1 95\n+ 2 105\n+ 3 150"), barrier_at(1, 101)];
    let (leaving, entering) = conditions();
    run(filter(&store, leaving, entering, committing(&store, first))).await;
    drop(store);

    // Down until 145: row 1 aged out, row 2 came and went, row 3 is still to come.
    let store = Store::open(dir.path()).unwrap();
    let (leaving, entering) = conditions();
    let second = [initial_at(1, 145), barrier_at(2, 152)];
    let out = run(filter(&store, leaving, entering, MockSource::boxed(second))).await;
    let expected = "barrier 1

                    i I
                    - 1 95

                    barrier 2

                    i I
                    + 3 150";
    assert_eq!(out, dedent(expected));
}

/// Random inserts, deletes and updates of rows with times around the clock, and a clock that
/// moves by random steps, under each kind of filter with conditions of each strictness: after
/// every barrier the output so far equals the rows for which the conditions hold at its time.
#[tokio::test]
async fn every_filter_equals_its_condition_at_each_barrier() {
    // (leaving: t > now - a or t >= now - a; entering: t <= now + b or t < now + b)
    let shapes = [
        (Some((Operator::Gt, 10)), None),
        (Some((Operator::GtEq, 5)), None),
        (None, Some((Operator::LtEq, 0))),
        (None, Some((Operator::Lt, -3))),
        (Some((Operator::Gt, 10)), Some((Operator::LtEq, 0))),
        (Some((Operator::GtEq, 20)), Some((Operator::Lt, 5))),
    ];
    let holds = |op: Operator, t: i64, bound: i64| match op {
        Operator::Gt => t > bound,
        Operator::GtEq => t >= bound,
        Operator::Lt => t < bound,
        Operator::LtEq => t <= bound,
        _ => unreachable!(),
    };
    for (s, (leaving, entering)) in shapes.into_iter().enumerate() {
        for seed in 0..4u64 {
            let mut rng = Lcg::new(seed * 17 + s as u64);
            let mut rows: BTreeMap<i32, Option<i64>> = BTreeMap::new();
            let mut now = 1000i64;
            let mut messages = vec![initial_at(0, now)];
            let mut states = Vec::new();
            let mut next_id = 0;
            for epoch in 1..=40u64 {
                let mut lines = vec!["i I".to_owned()];
                let show = |t: Option<i64>| t.map_or(".".to_owned(), |t| t.to_string());
                for _ in 0..rng.below(5) {
                    let time = |rng: &mut Lcg| match rng.below(12) {
                        0 => None,
                        _ => Some(now - 30 + rng.below(60) as i64),
                    };
                    if !rows.is_empty() && rng.below(3) == 0 {
                        let ids: Vec<i32> = rows.keys().copied().collect();
                        let id = ids[rng.below(ids.len() as u64) as usize];
                        let t = rows.remove(&id).unwrap();
                        if rng.below(2) == 0 {
                            let nt = time(&mut rng);
                            lines.push(format!("U- {id} {}\nU+ {id} {}", show(t), show(nt)));
                            rows.insert(id, nt);
                        } else {
                            lines.push(format!("- {id} {}", show(t)));
                        }
                    } else {
                        next_id += 1;
                        let t = time(&mut rng);
                        lines.push(format!("+ {next_id} {}", show(t)));
                        rows.insert(next_id, t);
                    }
                }
                if lines.len() > 1 {
                    messages.push(chunk(&lines.join("\n")));
                }
                // When barrier `epoch` comes out, the rows are judged at the time of the one
                // before; what its own time changes follows it.
                let shown: BTreeMap<String, i64> = rows
                    .iter()
                    .filter_map(|(id, t)| Some((id, (*t)?)))
                    .filter(|(_, t)| leaving.is_none_or(|(op, a)| holds(op, *t, now - a)))
                    .filter(|(_, t)| entering.is_none_or(|(op, b)| holds(op, *t, now - b)))
                    .map(|(id, t)| (format!("{id} {t}"), 1))
                    .collect();
                states.push(shown);
                now += rng.below(8) as i64;
                messages.push(barrier_at(epoch, now));
            }
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let leaving = leaving.map(|(op, a)| condition(op, a));
            let entering = entering.map(|(op, b)| condition(op, b));
            let build = |input| filter(&store, leaving, entering, input);
            let views = views_at_barriers(&store, build, messages).await;
            assert_eq!(views.len(), states.len());
            for (n, (view, state)) in views.iter().zip(&states).enumerate() {
                assert_eq!(view, state, "shape {s}, seed {seed}, epoch {}", n + 1);
            }
        }
    }
}
