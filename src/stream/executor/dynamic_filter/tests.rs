//! Chunk-in / chunk-out tests of the dynamic filter. Left rows are `id | a` (`I i`), the right
//! input's one row is the threshold (`i`), and the condition compares `a` with it.

use std::collections::BTreeMap;

use datafusion::physical_expr::expressions::Column;

use super::*;
use crate::catalog::{ColumnCatalog, RelationKind, TableId};
use crate::stream::dispatch::owned_vnodes;
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::test_utils::{
    Lcg, MockSource, Pretty, apply_printed, barrier, c, chunk, dedent, initial, run, schema,
};
use crate::types::DataType;

fn internal(id: u32, columns: &[(&str, DataType)], pk: Vec<usize>) -> Arc<TableCatalog> {
    let columns = columns.iter().map(|(n, t)| ColumnCatalog::new(*n, *t)).collect();
    let mut table =
        TableCatalog::new_table(TableId(id), format!("t{id}"), columns, pk, String::new());
    table.kind = RelationKind::Internal;
    table.dist_key_len = 0;
    Arc::new(table)
}

/// `_value | id | a` keyed by `_value | id`.
fn rows_table() -> Arc<TableCatalog> {
    let columns = [("_value", DataType::Int32), ("id", DataType::Int64), ("a", DataType::Int32)];
    internal(200, &columns, vec![0, 1])
}

/// `_key | _threshold` keyed by `_key`.
fn threshold_table() -> Arc<TableCatalog> {
    internal(201, &[("_key", DataType::Int32), ("_threshold", DataType::Int32)], vec![0])
}

/// A dynamic filter `a op threshold`, as actor `actor` of `parallelism`, its rows placed by
/// `dist` (no columns: all rows in one vnode, so output order is the value order).
fn filter(
    store: &Arc<Store>,
    op: Operator,
    dist: Vec<Arc<dyn PhysicalExpr>>,
    (actor, parallelism): (usize, usize),
    left: BoxedExecutor,
    right: BoxedExecutor,
) -> BoxedExecutor {
    let condition = DynamicCondition {
        value: Arc::new(Column::new("c1", 1)),
        op,
        threshold: Arc::new(Column::new("c0", 0)),
    };
    Box::new(DynamicFilterExecutor::new(
        left,
        right,
        store.clone(),
        condition,
        dist,
        owned_vnodes(actor, parallelism),
        rows_table(),
        threshold_table(),
        schema("I i"),
    ))
}

async fn filtered(op: Operator, left: Vec<Message>, right: Vec<Message>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (left, right) = (MockSource::boxed(left), MockSource::boxed(right));
    run(filter(&store, op, vec![], (0, 1), left, right)).await
}

#[tokio::test]
async fn a_moving_threshold_turns_only_the_rows_between_its_old_and_new_value() {
    let left = vec![
        initial(0),
        chunk("I i\n+ 1 5\n+ 2 10\n+ 3 15\n+ 4 ."),
        barrier(1),
        chunk("I i\n+ 5 20"),
        barrier(2),
        barrier(3),
        chunk("I i\n- 3 15\nU- 1 5\nU+ 1 7"),
        barrier(4),
        barrier(5),
    ];
    let right = vec![
        initial(0),
        // No threshold yet: nothing shows.
        chunk("i\n+ 8"),
        barrier(1),
        chunk("i\nU- 8\nU+ 12"),
        barrier(2),
        // The subquery has no row: nothing shows.
        chunk("i\n- 12"),
        barrier(3),
        barrier(4),
        chunk("i\n+ 0"),
        barrier(5),
    ];
    let expected = "barrier 0

                    I i
                    + 2 10
                    + 3 15

                    barrier 1

                    I i
                    + 5 20

                    I i
                    - 2 10

                    barrier 2

                    I i
                    - 3 15
                    - 5 20

                    barrier 3

                    barrier 4

                    I i
                    + 1 7
                    + 2 10
                    + 5 20

                    barrier 5";
    assert_eq!(filtered(Operator::Gt, left, right).await, dedent(expected));
}

#[tokio::test]
async fn rows_below_a_threshold_show_and_equal_values_follow_the_operator() {
    let left = vec![initial(0), chunk("I i\n+ 1 5\n+ 2 10\n+ 3 15"), barrier(1), barrier(2)];
    let right = vec![initial(0), chunk("i\n+ 10"), barrier(1), chunk("i\nU- 10\nU+ 5"), barrier(2)];
    let expected = "barrier 0

                    I i
                    + 1 5
                    + 2 10

                    barrier 1

                    I i
                    - 2 10

                    barrier 2";
    assert_eq!(filtered(Operator::LtEq, left, right).await, dedent(expected));
    let right = vec![initial(0), chunk("i\n+ 10"), barrier(1), chunk("i\nU- 10\nU+ 5"), barrier(2)];
    let left = vec![initial(0), chunk("I i\n+ 1 5\n+ 2 10\n+ 3 15"), barrier(1), barrier(2)];
    let expected = "barrier 0

                    I i
                    + 1 5

                    barrier 1

                    I i
                    - 1 5

                    barrier 2";
    assert_eq!(filtered(Operator::Lt, left, right).await, dedent(expected));
}

/// Random rows and thresholds for every operator, over four actors and across a restart: at
/// every barrier the union of the actors' outputs is the rows whose condition holds.
#[tokio::test]
async fn the_output_is_the_rows_the_condition_holds_for_across_actors_and_a_restart() {
    for (seed, op) in
        [Operator::Lt, Operator::LtEq, Operator::Gt, Operator::GtEq].into_iter().enumerate()
    {
        let mut rng = Lcg::new(seed as u64 + 7);
        let mut rows: BTreeMap<i64, Option<i32>> = BTreeMap::new();
        let mut threshold: Option<i32> = None;
        let (mut left, mut right, mut expected) = (vec![initial(0)], vec![initial(0)], Vec::new());
        const EPOCHS: u64 = 12;
        for epoch in 1..=EPOCHS {
            for _ in 0..2 {
                let mut text = String::from("I i");
                for _ in 0..20 {
                    let id = rng.below(40) as i64;
                    let a = (rng.below(10) > 0).then(|| rng.below(50) as i32);
                    let cell = |a: Option<i32>| a.map_or(".".to_owned(), |a| a.to_string());
                    match rows.get(&id).copied() {
                        Some(old) if rng.below(3) == 0 => {
                            text += &format!("\n- {id} {}", cell(old));
                            rows.remove(&id);
                        }
                        Some(old) => {
                            text += &format!("\nU- {id} {}\nU+ {id} {}", cell(old), cell(a));
                            rows.insert(id, a);
                        }
                        None => {
                            text += &format!("\n+ {id} {}", cell(a));
                            rows.insert(id, a);
                        }
                    }
                }
                left.push(chunk(&text));
            }
            let next = match rng.below(4) {
                0 => None,
                _ => Some(rng.below(50) as i32),
            };
            match (threshold, next) {
                (Some(old), Some(new)) => right.push(chunk(&format!("i\nU- {old}\nU+ {new}"))),
                (Some(old), None) => right.push(chunk(&format!("i\n- {old}"))),
                (None, Some(new)) => right.push(chunk(&format!("i\n+ {new}"))),
                (None, None) => {}
            }
            threshold = next;
            left.push(barrier(epoch));
            right.push(barrier(epoch));
            let holds = |a: i32, t: i32| match op {
                Operator::Lt => a < t,
                Operator::LtEq => a <= t,
                Operator::Gt => a > t,
                _ => a >= t,
            };
            let view: BTreeMap<String, i64> = rows
                .iter()
                .filter(|(_, a)| matches!((a, threshold), (Some(a), Some(t)) if holds(*a, t)))
                .map(|(id, a)| (format!("{id} {}", a.unwrap()), 1))
                .collect();
            expected.push(view);
        }
        // Actors take each row by its `id`'s vnode, as a hash exchange would; every actor gets
        // the threshold. The first run commits up to epoch 6 and sees 8; the rest after a
        // restart from 6.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let epochs = |messages: &[Message]| -> Vec<Vec<Message>> {
            let mut out = vec![Vec::new()];
            for m in &messages[1..] {
                out.last_mut().unwrap().push(m.clone());
                if matches!(m, Message::Barrier(_)) {
                    out.push(Vec::new());
                }
            }
            out
        };
        let (left, right) = (epochs(&left), epochs(&right));
        let mut views: Vec<BTreeMap<String, i64>> = Vec::new();
        for (from, to, committed) in [(1, 8, 6), (7, EPOCHS, EPOCHS)] {
            // The restart forgets what the uncommitted epochs wrote and showed.
            store.discard_uncommitted(Epoch(from - 1));
            views.truncate((from - 1) as usize);
            let mut view = views.last().cloned().unwrap_or_default();
            let mut actors = Vec::new();
            for actor in 0..4 {
                let (lt, lr) = tokio::sync::mpsc::channel(64);
                let (rt, rr) = tokio::sync::mpsc::channel(64);
                let (l, r) = (ReceiverExecutor::new(lr), ReceiverExecutor::new(rr));
                let executor = filter(&store, op, vec![c(0)], (actor, 4), Box::new(l), Box::new(r));
                let start = Message::Barrier(crate::stream::message::Barrier::initial(
                    Epoch(from - 1),
                    Epoch(from),
                ));
                lt.send(start.clone()).await.unwrap();
                rt.send(start).await.unwrap();
                let mut out = executor.execute();
                assert!(matches!(out.next().await, Some(Ok(Message::Barrier(_)))));
                actors.push((lt, rt, out));
            }
            for epoch in from..=to {
                for (actor, (lt, rt, out)) in actors.iter_mut().enumerate() {
                    for m in &left[(epoch - 1) as usize] {
                        let m = match m {
                            Message::Chunk(chunk) => {
                                let key = [chunk.columns()[0].clone()];
                                let vnodes = vnodes_of(&key, chunk.len()).unwrap();
                                let owner = |i: usize| {
                                    crate::stream::dispatch::owner_of(vnodes[i].0 as usize, 4)
                                };
                                match mask_chunk(chunk, |i| owner(i) == actor).unwrap() {
                                    Some(part) => Message::Chunk(part),
                                    None => continue,
                                }
                            }
                            other => other.clone(),
                        };
                        lt.send(m).await.unwrap();
                    }
                    for m in &right[(epoch - 1) as usize] {
                        rt.send(m.clone()).await.unwrap();
                    }
                    // Everything up to the barrier comes out before it.
                    while let Message::Chunk(chunk) = out.next().await.unwrap().unwrap() {
                        apply_printed(&mut view, &Message::Chunk(chunk).pretty());
                    }
                }
                if epoch <= committed {
                    store.commit(Epoch(epoch)).unwrap();
                }
                views.push(view.clone());
            }
        }
        for (epoch, (got, want)) in views.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "{op} after epoch {}", epoch + 1);
        }
    }
}
