//! Chunk-in / chunk-out tests of the hash joins of every kind.

use std::collections::BTreeMap;

use datafusion::physical_expr::expressions::Column;
use futures::FutureExt;
use tokio::sync::mpsc;

use super::*;
use crate::catalog::{ColumnCatalog, RelationKind, TableId};
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::test_utils::{
    MockSource, Pretty, apply_printed, barrier, chunk, dedent, initial, run, schema,
};
use crate::types::DataType;

/// The rows of both inputs in most tests: `i T`, joined on `c0`.
pub(crate) const ROWS: Shape = Shape { header: "i T", visible: 2 };

/// The columns of a join input and how many of them are visible.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) header: &'static str,
    pub(crate) visible: usize,
}

/// The state table of one side: `join key (c0) ++ input columns`, keyed by all of them, with
/// a trailing `_degree` for the left side of a left outer join.
fn side_table(id: u32, shape: Shape, degree: bool) -> Arc<TableCatalog> {
    let types = schema(shape.header);
    let mut columns = vec![ColumnCatalog::new(
        "join_key_0",
        DataType::from_arrow(types.field(0).data_type()).unwrap(),
    )];
    for field in types.fields() {
        let data_type = DataType::from_arrow(field.data_type()).unwrap();
        columns.push(ColumnCatalog::new(field.name().clone(), data_type));
    }
    if degree {
        columns.push(ColumnCatalog::new("_degree", DataType::Int64));
    }
    let pk = (0..=types.fields().len()).collect();
    let mut table = TableCatalog::new_table(TableId(id), format!("t{id}"), columns, pk, "".into());
    table.kind = RelationKind::Internal;
    table.dist_key_len = 1;
    Arc::new(table)
}

/// A join of `left` and `right` (both of `shape`) on `c0`, as the planner builds it: output
/// `left visible ++ right visible ++ left hidden ++ right hidden ++ join key`.
pub(crate) fn join(
    kind: JoinKind,
    store: &Arc<Store>,
    shape: Shape,
    left: BoxedExecutor,
    right: BoxedExecutor,
) -> BoxedExecutor {
    join_on(kind, store, shape, left, right, None)
}

/// [`join`] with a condition besides the key equality, over `left visible ++ right visible`.
fn join_on(
    kind: JoinKind,
    store: &Arc<Store>,
    shape: Shape,
    left: BoxedExecutor,
    right: BoxedExecutor,
    condition: Option<Arc<dyn PhysicalExpr>>,
) -> BoxedExecutor {
    let side = |input, id, degree| JoinSide {
        input,
        keys: vec![Arc::new(Column::new("c0", 0)) as Arc<dyn PhysicalExpr>],
        table: side_table(id, shape, degree),
        visible: shape.visible,
        width: schema(shape.header).fields().len(),
    };
    let letters: Vec<&str> = shape.header.split_whitespace().collect();
    let (visible, hidden) = letters.split_at(shape.visible);
    let header = match kind.kept() {
        Some(_) => [visible, hidden, &letters[..1]].concat().join(" "),
        None => [visible, visible, hidden, hidden, &letters[..1]].concat().join(" "),
    };
    let left = side(left, 1001, kind.counts(0));
    let right = side(right, 1002, kind.counts(1));
    Box::new(HashJoinExecutor::new(kind, left, right, store.clone(), condition, schema(&header)))
}

/// A running join fed message by message, printing what each message makes it emit.
pub(crate) struct Join {
    store: Arc<Store>,
    left: mpsc::Sender<Message>,
    right: mpsc::Sender<Message>,
    out: BoxedMessageStream,
}

impl Join {
    /// A join of [`ROWS`] started, like an actor, with an initial barrier on both inputs
    /// from the state committed in `store`.
    pub(crate) async fn start(kind: JoinKind, store: &Arc<Store>) -> Join {
        Self::start_on(kind, store, None).await
    }

    /// [`Join::start`] with a condition besides the key equality (see [`join_on`]).
    async fn start_on(
        kind: JoinKind,
        store: &Arc<Store>,
        condition: Option<Arc<dyn PhysicalExpr>>,
    ) -> Join {
        let (left, left_rx) = mpsc::channel(16);
        let (right, right_rx) = mpsc::channel(16);
        let receiver = |rx| Box::new(ReceiverExecutor::new(rx)) as BoxedExecutor;
        let out =
            join_on(kind, store, ROWS, receiver(left_rx), receiver(right_rx), condition).execute();
        let mut join = Join { store: store.clone(), left, right, out };
        let committed = store.committed_epoch();
        let initial = Barrier::initial(committed, committed.next());
        assert_eq!(join.send(true, Message::Barrier(initial.clone())).await, "");
        let out = join.send(false, Message::Barrier(initial)).await;
        assert_eq!(out, format!("barrier {}", committed.0));
        join
    }

    /// Sends `msg` to one input and prints everything the join emits before it waits for
    /// more input.
    pub(crate) async fn send(&mut self, to_left: bool, msg: Message) -> String {
        let input = if to_left { &self.left } else { &self.right };
        input.send(msg).await.expect("the join is running");
        // A fresh task budget, so the channel never pretends to be empty.
        tokio::task::yield_now().await;
        let mut out = Vec::new();
        // Pending: the join processed everything it was sent and waits for more.
        while let Some(next) = self.out.next().now_or_never() {
            match next {
                Some(Ok(msg)) => out.push(msg.pretty()),
                Some(Err(e)) => {
                    out.push(format!("error: {e}"));
                    break;
                }
                None => {
                    out.push("end".to_owned());
                    break;
                }
            }
        }
        out.join("\n\n")
    }

    /// Sends a chunk to the left input.
    pub(crate) async fn left(&mut self, text: &str) -> String {
        self.send(true, chunk(text)).await
    }

    /// Sends a chunk to the right input.
    pub(crate) async fn right(&mut self, text: &str) -> String {
        self.send(false, chunk(text)).await
    }

    /// Ends epoch `epoch` on both inputs and commits it, as the barrier manager does once
    /// every actor passed the barrier; returns what the join emitted.
    pub(crate) async fn checkpoint(&mut self, epoch: u64) -> String {
        let mut out = self.send(true, barrier(epoch)).await;
        out.push_str(&self.send(false, barrier(epoch)).await);
        self.store.commit(Epoch(epoch)).unwrap();
        out
    }
}

#[tokio::test]
async fn a_left_row_then_a_matching_right_row_emit_one_joined_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // The right row comes an epoch after the left one, so the order of the two is fixed.
    let left = MockSource::boxed([initial(0), chunk("i T\n+ 1 a\n+ 2 b"), barrier(1), barrier(2)]);
    let right = MockSource::boxed([initial(0), barrier(1), chunk("i T\n+ 1 x"), barrier(2)]);
    let out = run(join(JoinKind::Inner, &store, ROWS, left, right)).await;
    let expected = "
        barrier 0

        barrier 1

        i T i T i
        + 1 a 1 x 1

        barrier 2";
    assert_eq!(out, dedent(expected));
}

#[tokio::test]
async fn a_row_joins_every_match_on_the_other_side() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ 1 b\n+ 2 c").await, "");
    assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 b 1 x 1");
    let expected = "
        i T i T i
        + 1 a 1 y 1
        + 1 b 1 y 1
        + 2 c 2 z 2";
    assert_eq!(j.right("i T\n+ 1 y\n+ 2 z").await, dedent(expected));
    assert_eq!(j.left("i T\n+ 1 d").await, "i T i T i\n+ 1 d 1 x 1\n+ 1 d 1 y 1");
}

#[tokio::test]
async fn deleting_a_left_row_retracts_its_joined_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ 1 b").await, "");
    assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 b 1 x 1");
    assert_eq!(j.right("i T\n+ 1 y").await, "i T i T i\n+ 1 a 1 y 1\n+ 1 b 1 y 1");
    assert_eq!(j.left("i T\n- 1 a").await, "i T i T i\n- 1 a 1 x 1\n- 1 a 1 y 1");
    // The deleted row no longer joins.
    assert_eq!(j.right("i T\n+ 1 z").await, "i T i T i\n+ 1 b 1 z 1");
}

#[tokio::test]
async fn deleting_a_right_row_retracts_its_joined_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.right("i T\n+ 1 x\n+ 1 y").await, "");
    let expected = "
        i T i T i
        + 1 a 1 x 1
        + 1 a 1 y 1
        + 1 b 1 x 1
        + 1 b 1 y 1";
    assert_eq!(j.left("i T\n+ 1 a\n+ 1 b").await, dedent(expected));
    assert_eq!(j.right("i T\n- 1 x").await, "i T i T i\n- 1 a 1 x 1\n- 1 b 1 x 1");
    assert_eq!(j.left("i T\n+ 1 c").await, "i T i T i\n+ 1 c 1 y 1");
}

#[tokio::test]
async fn an_update_pair_becomes_a_delete_and_an_insert() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.left("i T\n+ 1 a").await, "");
    assert_eq!(j.right("i T\n+ 1 x\n+ 2 y").await, "i T i T i\n+ 1 a 1 x 1");
    // The same key: the pair's halves match the same right row.
    assert_eq!(j.left("i T\nU- 1 a\nU+ 1 b").await, "i T i T i\n- 1 a 1 x 1\n+ 1 b 1 x 1");
    // Another key: each half matches its own rows.
    assert_eq!(j.left("i T\nU- 1 b\nU+ 2 b").await, "i T i T i\n- 1 b 1 x 1\n+ 2 b 2 y 2");
    assert_eq!(j.right("i T\nU- 2 y\nU+ 2 z").await, "i T i T i\n- 2 b 2 y 2\n+ 2 b 2 z 2");
}

#[tokio::test]
async fn a_chunk_probing_many_keys_sees_committed_sealed_and_current_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    // Committed: keys 1..=400, one right row each, and key 2 twice.
    let rows: String = (1..=400).map(|k| format!("\n+ {k} r{k}")).collect();
    assert_eq!(j.right(&format!("i T{rows}\n+ 2 s2")).await, "");
    assert_eq!(j.checkpoint(1).await, "barrier 1");
    // Epoch 2, sealed but not committed: key 3 changes its row, key 5 loses it.
    assert_eq!(j.right("i T\n- 3 r3\n+ 3 x3\n- 5 r5").await, "");
    assert_eq!(j.send(true, barrier(2)).await, "");
    assert_eq!(j.send(false, barrier(2)).await, "barrier 2");
    // Epoch 3, not sealed: key 7 gains a row, key 401 its first.
    assert_eq!(j.right("i T\n+ 7 y7\n+ 401 r401").await, "");
    // One left chunk probing 30 keys, most far apart among the stored ones.
    let probes: Vec<u32> = (1..=10).chain((0..20).map(|i| 20 * i + 13)).chain([401]).collect();
    let left: String = probes.iter().map(|k| format!("\n+ {k} l{k}")).collect();
    let out = j.left(&format!("i T{left}")).await;
    let mut expected = vec!["i T i T i".to_owned()];
    for &k in &probes {
        let mut matches = match k {
            2 => vec!["r2".to_owned(), "s2".to_owned()],
            3 => vec!["x3".to_owned()],
            5 => vec![],
            7 => vec!["r7".to_owned(), "y7".to_owned()],
            k => vec![format!("r{k}")],
        };
        matches.sort();
        expected.extend(matches.iter().map(|m| format!("+ {k} l{k} {k} {m} {k}")));
    }
    assert_eq!(out, expected.join("\n"));
}

#[tokio::test]
async fn null_join_keys_never_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.left("i T\n+ . a\n+ 1 b").await, "");
    assert_eq!(j.right("i T\n+ . x\n+ 1 y").await, "i T i T i\n+ 1 b 1 y 1");
    assert_eq!(j.left("i T\n+ . c").await, "");
    assert_eq!(j.right("i T\n- . x").await, "");
    assert_eq!(j.left("i T\n- . a\n- 1 b").await, "i T i T i\n- 1 b 1 y 1");
}

#[tokio::test]
async fn the_barrier_passes_once_both_sides_sent_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::Inner, &store).await;
    assert_eq!(j.send(true, barrier(1)).await, "");
    // Held behind the left barrier until the right one comes.
    assert_eq!(j.left("i T\n+ 1 a").await, "");
    // The right input is still in epoch 1: its rows pass, and meet no left row yet.
    assert_eq!(j.right("i T\n+ 1 x").await, "");
    assert_eq!(j.send(false, barrier(1)).await, "barrier 1\n\ni T i T i\n+ 1 a 1 x 1");
    assert_eq!(j.checkpoint(2).await, "barrier 2");
}

#[tokio::test]
async fn hidden_columns_follow_the_visible_columns_of_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let shape = Shape { header: "i T I", visible: 2 };
    let left = MockSource::boxed([initial(0), chunk("i T I\n+ 1 a 10"), barrier(1), barrier(2)]);
    let right = MockSource::boxed([initial(0), barrier(1), chunk("i T I\n+ 1 x 20"), barrier(2)]);
    let out = run(join(JoinKind::Inner, &store, shape, left, right)).await;
    let expected = "
        barrier 0

        barrier 1

        i T i T I I i
        + 1 a 1 x 10 20 1

        barrier 2";
    assert_eq!(out, dedent(expected));
}

// The left outer join.

async fn left_join(store: &std::sync::Arc<Store>) -> Join {
    Join::start(JoinKind::LeftOuter, store).await
}

#[tokio::test]
async fn a_left_row_without_match_is_padded_with_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ 2 b").await, "i T i T i\n+ 1 a . . 1\n+ 2 b . . 2");
    assert_eq!(j.right("i T\n+ 3 x").await, "");
}

#[tokio::test]
async fn the_first_match_retracts_the_padded_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a . . 1");
    assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n- 1 a . . 1\n+ 1 a 1 x 1");
    // Degree 1 to 2: nothing padded to retract.
    assert_eq!(j.right("i T\n+ 1 y").await, "i T i T i\n+ 1 a 1 y 1");
}

#[tokio::test]
async fn the_padded_row_comes_back_when_the_last_match_goes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.right("i T\n+ 1 x\n+ 1 y").await, "");
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 a 1 y 1");
    assert_eq!(j.right("i T\n- 1 x").await, "i T i T i\n- 1 a 1 x 1");
    assert_eq!(j.right("i T\n- 1 y").await, "i T i T i\n- 1 a 1 y 1\n+ 1 a . . 1");
    // Back at degree 0: the next match retracts the padded row again.
    assert_eq!(j.right("i T\n+ 1 z").await, "i T i T i\n- 1 a . . 1\n+ 1 a 1 z 1");
}

#[tokio::test]
async fn matches_in_one_chunk_count_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a . . 1");
    let expected = "
        i T i T i
        - 1 a . . 1
        + 1 a 1 x 1
        + 1 a 1 y 1";
    assert_eq!(j.right("i T\n+ 1 x\n+ 1 y").await, dedent(expected));
    let expected = "
        i T i T i
        - 1 a 1 x 1
        - 1 a 1 y 1
        + 1 a . . 1";
    assert_eq!(j.right("i T\n- 1 x\n- 1 y").await, dedent(expected));
}

#[tokio::test]
async fn deleting_an_unmatched_left_row_retracts_its_padded_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a . . 1");
    assert_eq!(j.left("i T\n- 1 a").await, "i T i T i\n- 1 a . . 1");
    assert_eq!(j.right("i T\n+ 1 x").await, "");
}

#[tokio::test]
async fn deleting_a_matched_left_row_retracts_its_joined_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.right("i T\n+ 1 x\n+ 1 y").await, "");
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 a 1 y 1");
    assert_eq!(j.left("i T\n- 1 a").await, "i T i T i\n- 1 a 1 x 1\n- 1 a 1 y 1");
    // No padded row comes back for a deleted left row.
    assert_eq!(j.right("i T\n- 1 x\n- 1 y").await, "");
}

#[tokio::test]
async fn a_left_update_pair_moves_the_row_between_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.right("i T\n+ 2 y").await, "");
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a . . 1");
    assert_eq!(j.left("i T\nU- 1 a\nU+ 2 a").await, "i T i T i\n- 1 a . . 1\n+ 2 a 2 y 2");
    assert_eq!(j.right("i T\n- 2 y").await, "i T i T i\n- 2 a 2 y 2\n+ 2 a . . 2");
}

#[tokio::test]
async fn a_null_key_left_row_is_padded_and_never_matches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ . a").await, "i T i T i\n+ . a . . .");
    assert_eq!(j.right("i T\n+ . x").await, "");
    assert_eq!(j.left("i T\n- . a").await, "i T i T i\n- . a . . .");
}

#[tokio::test]
async fn degrees_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ 2 b").await, "i T i T i\n+ 1 a . . 1\n+ 2 b . . 2");
    assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n- 1 a . . 1\n+ 1 a 1 x 1");
    assert_eq!(j.checkpoint(1).await, "barrier 1");
    drop(j);
    drop(store);

    let store = Store::open(dir.path()).unwrap();
    let mut j = left_join(&store).await;
    assert_eq!(j.right("i T\n- 1 x").await, "i T i T i\n- 1 a 1 x 1\n+ 1 a . . 1");
    assert_eq!(j.right("i T\n+ 2 y").await, "i T i T i\n- 2 b . . 2\n+ 2 b 2 y 2");
    assert_eq!(j.left("i T\n+ 2 c").await, "i T i T i\n+ 2 c 2 y 2");
}

#[tokio::test]
async fn a_padded_row_has_nulls_for_the_right_hidden_columns_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let shape = Shape { header: "i T I", visible: 2 };
    let left = MockSource::boxed([initial(0), chunk("i T I\n+ 1 a 10"), barrier(1), barrier(2)]);
    let right = MockSource::boxed([initial(0), barrier(1), chunk("i T I\n+ 1 x 20"), barrier(2)]);
    let out = run(join(JoinKind::LeftOuter, &store, shape, left, right)).await;
    let expected = "
        barrier 0

        i T i T I I i
        + 1 a . . 10 . 1

        barrier 1

        i T i T I I i
        - 1 a . . 10 . 1
        + 1 a 1 x 10 20 1

        barrier 2";
    assert_eq!(out, dedent(expected));
}

// The right and full outer, semi and anti joins.

#[tokio::test]
async fn a_right_join_pads_right_rows_without_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::RightOuter, &store).await;
    assert_eq!(j.right("i T\n+ 1 x\n+ . y").await, "i T i T i\n+ . . 1 x 1\n+ . . . y .");
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n- . . 1 x 1\n+ 1 a 1 x 1");
    assert_eq!(j.left("i T\n+ 2 b").await, "");
    assert_eq!(j.left("i T\n- 1 a").await, "i T i T i\n- 1 a 1 x 1\n+ . . 1 x 1");
}

#[tokio::test]
async fn a_full_join_pads_either_side() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::FullOuter, &store).await;
    assert_eq!(j.left("i T\n+ 1 a").await, "i T i T i\n+ 1 a . . 1");
    assert_eq!(j.right("i T\n+ 2 y").await, "i T i T i\n+ . . 2 y 2");
    let expected = "
        i T i T i
        - 1 a . . 1
        + 1 a 1 x 1";
    assert_eq!(j.right("i T\n+ 1 x").await, dedent(expected));
    let expected = "
        i T i T i
        - 1 a 1 x 1
        + . . 1 x 1
        - . . 2 y 2
        + 2 a 2 y 2";
    // The left row moves from key 1 to key 2: x loses its match, y gains one.
    assert_eq!(j.left("i T\nU- 1 a\nU+ 2 a").await, dedent(expected));
}

#[tokio::test]
async fn a_semi_join_shows_a_row_while_it_has_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::LeftSemi, &store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ . b").await, "");
    assert_eq!(j.right("i T\n+ 1 x").await, "i T i\n+ 1 a 1");
    // A second match changes nothing; the last one going retracts the row.
    assert_eq!(j.right("i T\n+ 1 y").await, "");
    assert_eq!(j.right("i T\n- 1 x").await, "");
    assert_eq!(j.right("i T\n- 1 y").await, "i T i\n- 1 a 1");
    assert_eq!(j.right("i T\n+ 1 z\n+ . w").await, "i T i\n+ 1 a 1");
    assert_eq!(j.left("i T\n+ 1 c").await, "i T i\n+ 1 c 1");
}

#[tokio::test]
async fn an_anti_join_shows_a_row_while_it_has_no_match() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut j = Join::start(JoinKind::LeftAnti, &store).await;
    assert_eq!(j.left("i T\n+ 1 a\n+ . b").await, "i T i\n+ 1 a 1\n+ . b .");
    assert_eq!(j.right("i T\n+ 1 x\n+ . y").await, "i T i\n- 1 a 1");
    assert_eq!(j.right("i T\n+ 1 z").await, "");
    assert_eq!(j.right("i T\n- 1 x\n- 1 z").await, "i T i\n+ 1 a 1");
    assert_eq!(j.left("i T\n- . b").await, "i T i\n- . b .");
}

/// What a join of `kind` outputs for the rows `(key, tag)` of its sides, as `apply_printed`
/// accumulates it; `.` is NULL.
fn expected(
    kind: JoinKind,
    left: &[(Option<u8>, String)],
    right: &[(Option<u8>, String)],
    condition: impl Fn(&str, &str) -> bool,
) -> BTreeMap<String, i64> {
    let show = |k: Option<u8>| k.map_or(".".to_owned(), |k| k.to_string());
    // Whether a row of side `side` with `(k, t)` matches the other side's `(o, u)`.
    let pair = |side: usize, (k, t): &(Option<u8>, String), (o, u): &(Option<u8>, String)| {
        k.is_some() && o == k && if side == 0 { condition(t, u) } else { condition(u, t) }
    };
    let matches = |side: usize, row: &(Option<u8>, String), other: &[(Option<u8>, String)]| {
        other.iter().filter(|o| pair(side, row, o)).count()
    };
    let mut out = BTreeMap::new();
    let mut add = |row: String| *out.entry(row).or_insert(0) += 1;
    if kind.kept().is_none() {
        for l in left {
            let lk = &l.0;
            let lt = &l.1;
            for (rk, rt) in right.iter().filter(|r| pair(0, l, r)) {
                add(format!("{} {lt} {} {rt} {}", show(*lk), show(*rk), show(*lk)));
            }
        }
    }
    for (side, rows, other) in [(0, left, right), (1, right, left)] {
        for row in rows {
            let (k, t) = row;
            let n = matches(side, row, other);
            let (s, kept) = (show(*k), kind.kept() == Some(side));
            let semi = matches!(kind, JoinKind::LeftSemi | JoinKind::RightSemi);
            match kind.kept() {
                Some(_) if kept && (n > 0) == semi => add(format!("{s} {t} {s}")),
                None if kind.counts(side) && n == 0 => add(match side {
                    0 => format!("{s} {t} . . {s}"),
                    _ => format!(". . {s} {t} {s}"),
                }),
                _ => {}
            }
        }
    }
    out
}

/// Random changes to both sides (keys 1..3 and NULL, inserts and deletes, one row or a few per
/// chunk, checkpoints and restarts between them) against every join kind: after every chunk, the
/// output so far equals the join of the sides' current rows.
#[tokio::test]
async fn every_kind_equals_its_join_after_every_change() {
    every_kind_equals_its_join(None, |_, _| true).await;
}

/// As [`every_kind_equals_its_join_after_every_change`], with a condition besides the key
/// equality (the left tag sorts before the right one): only the pairs meeting it match, so a
/// chunk's rows move the degrees of some stored rows of their key and not of others.
#[tokio::test]
async fn every_kind_with_a_condition_equals_its_join_after_every_change() {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::BinaryExpr;
    let lt = BinaryExpr::new(
        Arc::new(Column::new("c1", 1)),
        Operator::Lt,
        Arc::new(Column::new("c3", 3)),
    );
    every_kind_equals_its_join(Some(Arc::new(lt)), |l, r| l < r).await;
}

async fn every_kind_equals_its_join(
    condition: Option<Arc<dyn PhysicalExpr>>,
    holds: impl Fn(&str, &str) -> bool + Copy,
) {
    use JoinKind::*;
    let kinds = [Inner, LeftOuter, RightOuter, FullOuter, LeftSemi, RightSemi, LeftAnti, RightAnti];
    for (k, kind) in kinds.into_iter().enumerate() {
        for seed in 0..6u64 {
            let mut rng = crate::stream::test_utils::Lcg::new(seed * 131 + k as u64);
            let dir = tempfile::tempdir().unwrap();
            let mut store = Store::open(dir.path()).unwrap();
            let mut j = Join::start_on(kind, &store, condition.clone()).await;
            let mut sides: [Vec<(Option<u8>, String)>; 2] = [Vec::new(), Vec::new()];
            let mut view = BTreeMap::new();
            let mut tags = 0;
            for step in 0..40u64 {
                let side = rng.below(2) as usize;
                let mut lines = vec!["i T".to_owned()];
                for _ in 0..1 + rng.below(6) {
                    if !sides[side].is_empty() && rng.below(3) == 0 {
                        let (key, tag) =
                            sides[side].remove(rng.below(sides[side].len() as u64) as usize);
                        lines
                            .push(format!("- {} {tag}", key.map_or(".".into(), |k| k.to_string())));
                    } else {
                        let key = match rng.below(5) {
                            0 => None,
                            k => Some(k.min(3) as u8),
                        };
                        tags += 1;
                        let tag = format!("t{tags}");
                        lines
                            .push(format!("+ {} {tag}", key.map_or(".".into(), |k| k.to_string())));
                        sides[side].push((key, tag));
                    }
                }
                let printed = if side == 0 {
                    j.left(&lines.join("\n")).await
                } else {
                    j.right(&lines.join("\n")).await
                };
                apply_printed(&mut view, &printed);
                assert_eq!(
                    view,
                    expected(kind, &sides[0], &sides[1], holds),
                    "{kind:?}, seed {seed}, step {step}:\n{}\n{printed}",
                    lines.join("\n")
                );
                if rng.below(8) == 0 {
                    j.checkpoint(step + 1).await;
                    if rng.below(2) == 0 {
                        drop(j);
                        drop(store);
                        store = Store::open(dir.path()).unwrap();
                        j = Join::start_on(kind, &store, condition.clone()).await;
                    }
                }
            }
        }
    }
}
