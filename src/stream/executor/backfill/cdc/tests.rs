//! The CDC backfill's tests: chunks in, chunks out, as text tables.

use std::time::Duration;

use super::*;
use crate::catalog::{ColumnCatalog, RelationKind, TableId};
use crate::stream::barrier::BarrierManager;
use crate::stream::graph::cdc::ColumnChange;
use crate::stream::test_utils::{MockSource, Pretty, barrier, dedent, run};
use crate::types::DataType;

fn columns(cols: &[(&str, DataType)]) -> Vec<ColumnCatalog> {
    cols.iter().map(|&(name, data_type)| ColumnCatalog::new(name, data_type)).collect()
}

/// The backfill of upstream `public.t (id int primary key, x text, v text)` into the table
/// `(id int primary key, v varchar)` (upstream columns 0 and 2). The source is never
/// connected to: these tests read no page and fill no unchanged column.
fn config(store: &Arc<Store>, snapshot: bool) -> CdcBackfillConfig {
    let text = |n: &str| ColumnCatalog::new(n, DataType::Varchar);
    let table = TableCatalog::new_table(
        TableId(10),
        "t".into(),
        columns(&[("id", DataType::Int32), ("v", DataType::Varchar)]),
        vec![0],
        "".into(),
    );
    let mut state = TableCatalog::new_table(
        TableId(11),
        "s".into(),
        crate::stream::executor::backfill::state::cdc_columns(columns(&[("id", DataType::Int32)])),
        vec![0],
        "".into(),
    );
    state.kind = RelationKind::Internal;
    let (_manager, barrier, _recoveries) = BarrierManager::new(store.clone(), Duration::MAX);
    CdcBackfillConfig {
        source: SourceConfig::Postgres(crate::stream::test_utils::pg_source_config(
            "upstream.invalid",
            5432,
        )),
        upstream: UpstreamTable {
            schema: "public".into(),
            name: "t".into(),
            columns: vec![text("id"), text("x"), text("v")],
            upstream_types: vec!["integer".into(), "text".into(), "text".into()],
            pk: vec![0],
            type_ids: Vec::new(),
            dropped: Vec::new(),
        },
        table: Arc::new(table),
        upstream_columns: vec![0, 2],
        state: Arc::new(state),
        batch_size: 3,
        snapshot,
        barrier,
        rate_limit: None,
        parallelism: 1,
        rows_per_split: None,
        upstream_identity: None,
        metrics: Arc::new(Metrics::default()),
        follow_columns: false,
        columns_since: Vec::new(),
        dropped: Vec::new(),
        retyped: Vec::new(),
        stop_at_schema_change: false,
        overwrite: false,
        truncates_from: 0,
        rebuilds: Arc::default(),
    }
}

/// A backfill that has read no page yet (or, without a snapshot, takes every change).
fn load(store: &Arc<Store>, snapshot: bool) -> CdcBackfill {
    let (status, _) = watch::channel(BackfillStatus::default());
    CdcBackfill::load(store.clone(), config(store, snapshot), status).unwrap()
}

/// The key `on_changes` compares for the row with primary key `id`.
fn key(b: &CdcBackfill, id: i32) -> Vec<u8> {
    let text =
        |u: usize| Ok(Arc::new(StringArray::from(vec![(u == 0).then(|| id.to_string())])) as _);
    b.keys(&b.typed(text).unwrap()).unwrap().remove(0)
}

/// Records a snapshot page ending at `last_id` whose low offset was `low`, as a read does.
fn read_page(b: &mut CdcBackfill, last_id: i32, low: u64) {
    read_page_of(b, 0, last_id, low);
}

/// [`read_page`] of split `split`.
fn read_page_of(b: &mut CdcBackfill, split: usize, last_id: i32, low: u64) {
    let key = key(b, last_id);
    let split = &mut b.splits[split];
    split.pages.push_back(Page { last_key: key.clone(), low });
    split.cursor = Some((vec![Some(last_id.to_string())], key));
    split.last_low = low;
    split.dirty = true;
}

/// A backfill cut into splits at the ids `points`, none read yet.
fn split_at(store: &Arc<Store>, points: &[i32]) -> CdcBackfill {
    let mut b = load(store, true);
    b.splits = b.splits_at(points.iter().map(i32::to_string).collect()).unwrap();
    b
}

/// A page of split `split` read from the upstream: `(id, v)` rows, text as the upstream
/// sends them, asked for `asked` rows, with low offset `low`.
fn page(b: &CdcBackfill, split: usize, rows: &[(i32, &str)], asked: usize, low: u64) -> PageDone {
    let ids: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
    let x = vec!["x"; rows.len()];
    let v: Vec<&str> = rows.iter().map(|(_, v)| *v).collect();
    let last_key = ids.last().map(|id| vec![Some(id.clone())]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids)),
        Arc::new(StringArray::from(x)),
        Arc::new(StringArray::from(v)),
    ];
    let page = SnapshotPage { columns, last_key };
    let c = &b.config;
    let page = typed_page(&c.table, &c.upstream_columns, page).unwrap();
    let page = Ok((page, CdcOffset::Postgres { lsn: low }));
    PageDone { generation: b.generation, split, asked, session: None, page }
}

/// Source changes, one a line: `upstream-table delete? position [values] [unchanged] replaces?`,
/// `upstream-table truncate position`, or `upstream-table columns position [names]` (each
/// column typed `text`, or `[names] [oids]` with modifiers -1).
fn changes(lines: &str) -> StreamChunk {
    let lines: Vec<String> = lines
        .lines()
        .map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [op, table, "truncate", lsn] => format!("{op} {table} t {lsn} [] . f t f 0"),
            [op, table, "columns", lsn, names] => {
                let types = names.split(',').map(|_| "25,4294967295").collect::<Vec<_>>();
                format!("{op} {table} f {lsn} {names} [{}] f f t 0", types.join(","))
            }
            [op, table, "columns", lsn, names, oids] => {
                let oids = oids.trim_matches(['[', ']']).split(',');
                // `oid` (modifier -1) or `oid:modifier`.
                let types = oids
                    .map(|oid| match oid.split_once(':') {
                        Some((oid, modifier)) => format!("{oid},{modifier}"),
                        None => format!("{oid},4294967295"),
                    })
                    .collect::<Vec<_>>();
                format!("{op} {table} f {lsn} {names} [{}] f f t 0", types.join(","))
            }
            _ => format!("{line} f f 0"),
        })
        .collect();
    StreamChunk::from_pretty(&format!("T B I [T] [u] B B B I\n{}", lines.join("\n")))
}

/// What the backfill emits for `lines` (see [`changes`]), as text; `-` for nothing.
async fn apply(b: &mut CdcBackfill, lines: &str) -> String {
    match b.on_changes(&changes(lines)).await.unwrap() {
        out if out.is_empty() => "-".into(),
        out => out.as_slice().pretty(),
    }
}

#[tokio::test]
async fn changes_before_the_first_page_apply_ahead_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    assert_eq!(apply(&mut b, "+ public.t f 100 [1, x, a] . f").await, "i T [u]\n+ 1 a .");
    assert_eq!(b.splits[0].ahead.len(), 1);
}

#[tokio::test]
async fn read_rows_take_newer_changes_and_rows_beyond_the_cursor_take_them_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 3, 100);
    let lines = "+ public.t f 150 [2, x, b] . f
                   + public.t t 150 [3, ., .] . f
                   + public.t f 150 [4, x, d] . f";
    // Deletes carry only the key; the last column is `_unchanged`.
    let expected = "i T [u]\n+ 2 b .\n- 3 . .\n+ 4 d .";
    assert_eq!(apply(&mut b, lines).await, dedent(expected));
}

#[tokio::test]
async fn a_change_older_than_the_page_that_read_its_row_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 3, 100);
    // The page's snapshot (taken at or after LSN 100) holds the change of LSN 90.
    let lines = "+ public.t f 90  [2, x, b] . f
                   + public.t f 100 [2, x, c] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 c .");
}

#[tokio::test]
async fn a_change_settles_the_pages_below_its_lsn_and_they_take_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 3, 100);
    read_page(&mut b, 6, 200);
    // Key 5 was read by the page of low offset 200: its snapshot holds LSN 150.
    let lines = "+ public.t f 150 [5, x, e] . f";
    assert_eq!(apply(&mut b, lines).await, "-");
    assert_eq!(b.splits[0].pages.len(), 1, "the page of low offset 100 settled");
    assert_eq!(b.splits[0].settled, Some(key(&b, 3)));
    // Rows of the settled range take every change, whatever its LSN.
    let lines = "+ public.t f 90 [2, x, b] . f
                   + public.t f 90 [5, x, e] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .");
}

#[tokio::test]
async fn once_the_snapshot_is_finished_changes_beyond_the_cursor_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 3, 100);
    b.splits[0].finished = true;
    b.phase = Phase::Finishing;
    // Key 2's page has not settled: its older change is still dropped.
    let lines = "+ public.t f 90 [2, x, b] . f
                   + public.t f 90 [7, x, g] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 7 g .");
}

#[tokio::test]
async fn a_column_retyped_upstream_stops_the_table_by_its_description_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    b.guard.learn_types(vec![(25, -1); 3]);
    read_page(&mut b, 3, 100);
    // Column v is an integer from here on; its value 7 would cast to the table's text.
    let lines = "+ public.t f 110 [4, x, d] . f
                 + public.t columns 120 [id,x,v] [25,25,23]
                 + public.t f 120 [5, x, 7] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 4 d .");
    let reason = b.stopped.clone().expect("stopped");
    assert!(reason.contains("column v changed type upstream from text"), "{reason}");
    // A description whose types cannot be told (none learnt) and an upstream that does not
    // answer: the changes after it are not applied unchecked.
    let mut b = load(&Store::open(&dir.path().join("2")).unwrap(), true);
    let unchecked = b.on_changes(&changes("+ public.t columns 110 [id,x,v]")).await;
    assert!(matches!(unchecked, Err(Error::Upstream { code: "08006", .. })), "{unchecked:?}");
}

#[tokio::test]
async fn a_column_renamed_upstream_stops_the_table_before_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = load(&store, true);
    b.guard.learn_types(vec![(25, -1); 3]);
    read_page(&mut b, 3, 100);
    b.splits[0].finished = true;
    b.phase = Phase::Finishing;
    // The same columns, and one more after them: followed.
    let lines = "+ public.t columns 110 [id,x,v,w]
                 + public.t f 110 [7, x, g, z] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 7 g .");
    assert_eq!(b.stopped, None);
    // Column x renamed: its values cannot be told from a new column's.
    let lines = "+ public.t f 120 [8, x, h] . f
                 + public.t columns 120 [id,y,v]
                 + public.t f 120 [9, y, i] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 8 h .");
    let reason = b.stopped.clone().expect("stopped");
    assert!(reason.contains("column x was renamed upstream"), "{reason}");
    assert_eq!(b.config.metrics.cdc_table_stopped(b.config.table.id.0), Some(reason.clone()));
    assert_eq!(b.status.borrow().stopped, Some(reason));
    // And stays stopped: no change applies, no page is read.
    assert_eq!(apply(&mut b, "+ public.t f 130 [10, x, j] . f").await, "-");
    // Also after a restart, recorded with the checkpoint, while the progress is as it was.
    b.persist(Epoch(1)).unwrap();
    store.commit(Epoch(1)).unwrap();
    let mut restored = load(&store, true);
    assert_eq!(restored.stopped, b.stopped);
    assert_eq!((restored.splits.len(), restored.rows()), (1, b.rows()));
    assert_eq!(apply(&mut restored, "+ public.t f 140 [11, x, k] . f").await, "-");
    restored.phase = Phase::Reading;
    restored.splits[0].finished = false;
    assert!(restored.next_read(0).is_none());
}

#[tokio::test]
async fn changes_of_other_upstream_tables_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), false);
    let lines = "+ public.u f 100 [1, x, a] . f
                   + public.t f 100 [2, x, b] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .");
}

#[tokio::test]
async fn unchanged_upstream_columns_become_table_column_indices() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), false);
    // Upstream column 2 is table column 1; upstream column 1 is not in the table.
    let lines = "+ public.t f 100 [1, x, .] [2]    f
                   + public.t f 100 [2, ., b] [1]    f
                   + public.t f 100 [3, ., .] [1, 2] f";
    let expected = "i T [u]
                    + 1 . [1]
                    + 2 b .
                    + 3 . [1]";
    assert_eq!(apply(&mut b, lines).await, dedent(expected));
}

#[tokio::test]
async fn a_replacing_update_sending_every_column_reads_nothing_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), false);
    // The upstream is never connected to: nothing is unchanged.
    let lines = "+ public.t f 100 [1, x, a] . t
                 + public.t f 100 [2, x, b] [] t";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 1 a .\n+ 2 b .");
}

#[test]
fn values_read_upstream_replace_the_unsent_ones_of_their_change_only() {
    let chunk = changes(
        "+ public.t f 100 [1, x, .] [2] t
         + public.u f 100 [9, y, z] .   f
         + public.t f 100 [3, ., c] [1] f",
    );
    let changes = Changes::of(&chunk).unwrap();
    // What `fetch_unchanged` reads for change 0, whose upstream row now has v = 'A'.
    let fetched =
        Fetched { at: HashMap::from([((0, 2), 0)]), values: StringArray::from(vec![Some("A")]) };
    let column = |u| fetched.gather(&changes, &[0, 2], u, usize::MAX, &Layouts(None)).unwrap();
    let text =
        |a: ArrayRef| a.as_string::<i32>().iter().map(|v| v.map(String::from)).collect::<Vec<_>>();
    let some = |v: &str| Some(v.to_owned());
    assert_eq!(text(column(0)), [some("1"), some("3")]);
    assert_eq!(text(column(2)), [some("A"), some("c")]);
    // Change 2 did not send column 1: it stays NULL, the materialize keeps the stored value.
    assert_eq!(text(column(1)), [some("x"), None]);
    let without = Fetched { at: HashMap::new(), values: StringArray::from(Vec::<&str>::new()) };
    assert_eq!(
        text(without.gather(&changes, &[0, 2], 2, usize::MAX, &Layouts(None)).unwrap()),
        [None, some("c")]
    );
}

#[tokio::test]
async fn a_restart_applies_every_change_up_to_the_persisted_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = load(&store, true);
    read_page(&mut b, 3, 100);
    b.splits[0].rows = 3;
    b.persist(Epoch(1)).unwrap();
    store.commit(Epoch(1)).unwrap();

    let mut b = load(&store, true);
    assert_eq!(b.phase, Phase::Reading);
    assert_eq!(b.rows(), 3);
    // Every change to a row up to the cursor applies, and beyond it ahead of the snapshot.
    let lines = "+ public.t f 5 [3, x, c] . f
                   + public.t f 5 [4, x, d] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 3 c .\n+ 4 d .");
    assert_eq!(b.splits[0].ahead.len(), 1);
}

#[tokio::test]
async fn without_a_snapshot_every_change_passes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (status, _) = watch::channel(BackfillStatus::default());
    let lines = "+ public.t f 100 [1, x, a] . f
                   + public.t t 101 [1, ., .] . f";
    let input = [barrier(1), Message::Chunk(changes(lines)), barrier(2)];
    let executor = CdcBackfillExecutor::new(
        MockSource::boxed(input),
        store.clone(),
        config(&store, false),
        status,
    );
    let expected = "barrier 1

                    i T [u]
                    + 1 a .
                    - 1 . .

                    barrier 2";
    assert_eq!(run(Box::new(executor)).await, dedent(expected));
}

#[test]
fn a_restored_backfill_reports_its_last_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = load(&store, true);
    read_page(&mut b, 10, 4242);
    b.persist(Epoch(1)).unwrap();
    store.commit(Epoch(1)).unwrap();
    let restored = load(&store, true);
    assert_eq!(restored.last_low(), 4242);
    assert_eq!(restored.rows(), b.rows());
}

#[tokio::test]
async fn each_split_merges_changes_by_its_own_cursor_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
    read_page_of(&mut b, 0, 3, 100);
    read_page_of(&mut b, 1, 7, 200);
    // Split 0 [.., 5) has read up to 3, split 1 [5, ..) up to 7; LSN 150 is older than
    // split 1's page, so its snapshot holds the change to 6; 4 and 8 are ahead of their
    // splits' cursors.
    let lines = "+ public.t f 150 [2, x, b] . f
                 + public.t f 150 [4, x, d] . f
                 + public.t f 150 [6, x, f] . f
                 + public.t f 150 [8, x, h] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .\n+ 4 d .\n+ 8 h .");
    assert_eq!((b.splits[0].ahead.len(), b.splits[1].ahead.len()), (1, 1));
    let lines = "+ public.t f 250 [6, x, f] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 6 f .");
}

#[tokio::test]
async fn changes_ahead_of_a_page_in_flight_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
    read_page_of(&mut b, 0, 1, 100);
    b.splits[0].reading = true;
    // Beyond split 0's cursor while its next page is read: applied ahead, and held to be
    // judged again once the page is applied. 7 is ahead of split 1, which reads nothing.
    let lines = "+ public.t f 150 [2, x, b] . f
                 + public.t f 250 [3, x, c] . f
                 + public.t f 250 [4, x, d] . f
                 + public.t f 250 [7, x, g] . f";
    let expected = "i T [u]\n+ 2 b .\n+ 3 c .\n+ 4 d .\n+ 7 g .";
    assert_eq!(apply(&mut b, lines).await, dedent(expected));
    // The page (low offset 200, asked for 3 rows) read 2 and 3: they overwrite what was
    // applied ahead, and 4, absent from its snapshot, is deleted. Its snapshot holds the
    // change of LSN 150 but maybe not those of 250, which apply again. It is short, so the
    // split is read to its end and the insert of 4 applies too.
    let out = b.on_page(page(&b, 0, &[(2, "b"), (3, "old")], 3, 200)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    let expected = ["i T [u]\n+ 2 b .\n+ 3 old .", "i T [u]\n- 4 . .", "i T [u]\n+ 3 c .\n+ 4 d ."];
    assert_eq!(out, expected);
    assert!(b.splits[0].finished && !b.splits[1].finished);
    assert_eq!(b.phase, Phase::Reading);
    // Split 1 has no page in flight: a change ahead of its cursor applies, without waiting.
    let lines = "+ public.t f 300 [8, x, h] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 8 h .");
    assert!(b.splits[1].held.is_empty());
}

#[tokio::test]
async fn changes_ahead_of_the_cursor_apply_at_once_and_the_page_reading_them_overwrites_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 2, 100);
    // Ahead of the cursor: an insert carrying every column applies at once; a delete of
    // a row the table does not hold, or an update without its unsent columns, does not.
    let lines = "+ public.t f 150 [5, x, e] . f
                 + public.t f 150 [8, x, h] . f
                 + public.t t 160 [6, ., .] . f
                 + public.t f 170 [7, x, g] [2] f";
    assert_eq!(apply(&mut b, lines).await, dedent("i T [u]\n+ 5 e .\n+ 8 h ."));
    // Rows applied ahead take every later change, the unsent columns kept from them.
    let lines = "+ public.t f 180 [5, x, e2] [2] f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 5 e2 [1]");
    // The page reading 3-5 overwrites 5 (an upsert); 8 waits for its page.
    let out = b.on_page(page(&b, 0, &[(3, "c"), (4, "d"), (5, "e3")], 3, 200)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T\n+ 3 c\n+ 4 d", "i T [u]\n+ 5 e3 ."]);
    assert_eq!(b.splits[0].ahead.len(), 1);
    // The last page has no 8: it was deleted upstream before the page's snapshot.
    let out = b.on_page(page(&b, 0, &[(6, "f")], 3, 300)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T\n+ 6 f", "i T [u]\n- 8 . ."]);
    assert!(b.splits[0].finished && b.splits[0].ahead.is_empty());
}

#[tokio::test]
async fn a_delete_ahead_of_the_cursor_forgets_the_row_and_the_cap_bounds_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load(&Store::open(dir.path()).unwrap(), true);
    read_page(&mut b, 2, 100);
    let lines = "+ public.t f 150 [5, x, e] . f
                 + public.t t 160 [5, ., .] . f";
    assert_eq!(apply(&mut b, lines).await, dedent("i T [u]\n+ 5 e .\n- 5 . ."));
    assert!(b.splits[0].ahead.is_empty());
    // The page reading 5 again inserts it plainly: the table no longer holds it.
    let out = b.on_page(page(&b, 0, &[(5, "e")], 1, 200)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T\n+ 5 e"]);
    // At the cap, further rows wait for their page; rows already ahead still take changes.
    for id in 0..AHEAD_ROWS as i32 {
        let key = key(&b, 1000 + id);
        b.splits[0].ahead.insert(key, vec![ScalarValue::Int32(Some(1000 + id))]);
    }
    let lines = "+ public.t f 250 [9, x, i] . f
                 + public.t f 250 [1000, x, k] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 1000 k .");
}

#[tokio::test]
async fn a_restart_finds_the_rows_applied_ahead_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = split_at(&store, &[5]);
    read_page_of(&mut b, 0, 2, 100);
    // Committed with the checkpoint: split 0 read up to 2; the table holds 1, 2 (read),
    // 4 (applied ahead in split 0) and 7 (ahead in split 1, which read nothing).
    b.persist(Epoch(1)).unwrap();
    let table = &b.config.table;
    let mut rows = StateTable::new(store.clone(), table.id, table.pk.clone(), table.dist_key_len);
    let chunk = StreamChunk::from_pretty("i T\n+ 1 a\n+ 2 b\n+ 4 d\n+ 7 g");
    rows.write_chunk(&chunk).unwrap();
    rows.commit(Epoch(1));
    store.commit(Epoch(1)).unwrap();
    let restored = load(&store, true);
    let ahead: Vec<Vec<Vec<u8>>> =
        restored.splits.iter().map(|s| s.ahead.keys().cloned().collect()).collect();
    assert_eq!(ahead, [vec![key(&b, 4)], vec![key(&b, 7)]]);
    assert_eq!(restored.splits[1].ahead[&key(&b, 7)], [ScalarValue::Int32(Some(7))]);
}

#[tokio::test]
async fn a_restart_restores_every_split_where_it_stood() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = split_at(&store, &[5, 10]);
    read_page_of(&mut b, 0, 3, 100);
    b.splits[0].rows = 3;
    b.splits[1].finished = true;
    b.splits[1].rows = 5;
    b.persist(Epoch(1)).unwrap();
    store.commit(Epoch(1)).unwrap();

    let mut b = load(&store, true);
    let ids: Vec<&str> = b.splits.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["public.t/0", "public.t/1", "public.t/2"]);
    assert_eq!(b.rows(), 8);
    assert_eq!(b.splits[1].range, SplitRange { start: Some("5".into()), end: Some("10".into()) });
    // Split 0 applies up to its cursor, finished split 1 everything, and rows beyond split
    // 0's cursor and in split 2 (nothing read yet) take their changes ahead.
    let lines = "+ public.t f 5 [3, x, c] . f
                 + public.t f 5 [4, x, d] . f
                 + public.t f 5 [9, x, i] . f
                 + public.t f 5 [12, x, l] . f";
    let expected = "i T [u]\n+ 3 c .\n+ 4 d .\n+ 9 i .\n+ 12 l .";
    assert_eq!(apply(&mut b, lines).await, dedent(expected));
    let ahead: Vec<usize> = b.splits.iter().map(|s| s.ahead.len()).collect();
    assert_eq!(ahead, [1, 0, 1]);
}

#[test]
fn split_points_order_as_keys_do_not_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let b = split_at(&Store::open(dir.path()).unwrap(), &[100, 9, 20, 9]);
    let ranges: Vec<(Option<&str>, Option<&str>)> =
        b.splits.iter().map(|s| (s.range.start.as_deref(), s.range.end.as_deref())).collect();
    let expected = [
        (None, Some("9")),
        (Some("9"), Some("20")),
        (Some("20"), Some("100")),
        (Some("100"), None),
    ];
    assert_eq!(ranges, expected);
    let ids: Vec<&str> = b.splits.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["public.t/0", "public.t/1", "public.t/2", "public.t/3"]);
    // Each key goes to the split whose range holds it: a bound belongs to the later split.
    let route = |id: i32| b.split_of(&key(&b, id)).unwrap();
    assert_eq!([-5, 8, 9, 19, 20, 99, 100, 1000].map(route), [0, 0, 1, 1, 2, 2, 3, 3]);
}

#[tokio::test]
async fn an_upstream_truncate_ends_the_snapshot_and_every_later_change_applies() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
    read_page_of(&mut b, 0, 2, 100);
    b.splits[0].reading = true;
    let in_flight = page(&b, 0, &[(3, "c"), (4, "d")], 2, 150);
    // 3 is ahead of the cursor, applied ahead and held; then the truncate, then changes
    // committed after it, which apply whatever the cursors: the table holds nothing else.
    let lines = "+ public.t f 150 [3, x, c] . f
                 + public.t truncate 200
                 + public.t f 210 [1, x, a] . f
                 + public.t f 210 [8, x, h] . f";
    let expected = "i T [u]\n+ 3 c .\n\ntruncate\n\ni T [u]\n+ 1 a .\n+ 8 h .";
    assert_eq!(apply(&mut b, lines).await, expected);
    assert!(b.splits.iter().all(|s| s.finished && s.held.is_empty() && s.ahead.is_empty()));
    assert_eq!(b.phase, Phase::Finishing);
    // The page read across the truncate is dropped; no split reads again.
    assert!(b.on_page(in_flight).unwrap().is_empty());
    assert!(b.next_read(0).is_none());
    let lines = "+ public.t t 220 [1, ., .] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n- 1 . .");
    // The checkpoint records every split finished: a restart reads no snapshot.
    b.persist(Epoch(3)).unwrap();
    assert_eq!(b.phase, Phase::Done { epoch: Epoch(3) });
}

#[tokio::test]
async fn a_truncate_before_the_splits_are_planned_still_records_the_end_of_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut config = config(&store, true);
    config.parallelism = 2;
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), config, status).unwrap();
    assert!(b.splits.is_empty(), "planned at the first page");
    assert_eq!(apply(&mut b, "+ public.t truncate 200").await, "truncate");
    b.persist(Epoch(3)).unwrap();
    store.commit(Epoch(3)).unwrap();
    let mut config = self::config(&store, true);
    config.parallelism = 2;
    let (status, _) = watch::channel(BackfillStatus::default());
    let b = CdcBackfill::load(store, config, status).unwrap();
    assert_eq!(b.phase, Phase::Done { epoch: Epoch(0) });
}

/// A backfill reading the snapshot again over the stored rows, from upstream position `from`.
fn overwriting(store: &Arc<Store>, from: u64) -> CdcBackfill {
    let mut c = config(store, true);
    c.overwrite = true;
    c.truncates_from = from;
    let (status, _) = watch::channel(BackfillStatus::default());
    CdcBackfill::load(store.clone(), c, status).unwrap()
}

/// The rows `chunk` (`i T` text) stored and committed in the table, as at a checkpoint.
fn store_rows(b: &CdcBackfill, store: &Arc<Store>, chunk: &str) {
    let table = &b.config.table;
    let mut rows = StateTable::new(store.clone(), table.id, table.pk.clone(), table.dist_key_len);
    rows.write_chunk(&StreamChunk::from_pretty(chunk)).unwrap();
    rows.commit(Epoch(1));
    store.commit(Epoch(1)).unwrap();
}

#[tokio::test]
async fn a_snapshot_read_again_overwrites_the_stored_rows_of_each_page_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = overwriting(&store, 0);
    // Stored before the snapshot is read again: 1-5 and 9.
    store_rows(&b, &store, "i T\n+ 1 a\n+ 2 b\n+ 3 c\n+ 4 d\n+ 5 e\n+ 9 i");
    // A delete of a stored row no change applied ahead applies; so does an insert ahead.
    let lines = "+ public.t t 150 [5, ., .] . f
                 + public.t f 150 [7, x, g] . f";
    assert_eq!(apply(&mut b, lines).await, dedent("i T [u]\n- 5 . .\n+ 7 g ."));
    // Page 1-3 (2 is gone upstream): every row an upsert, 2 deleted.
    let out = b.on_page(page(&b, 0, &[(1, "a"), (3, "c2"), (4, "d")], 3, 200)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T [u]\n+ 1 a .\n+ 3 c2 .\n+ 4 d .", "i T [u]\n- 2 . ."]);
    // The last page: 7 (applied ahead) and 8; stored 5 and 9 are gone upstream.
    let out = b.on_page(page(&b, 0, &[(7, "g"), (8, "h")], 3, 300)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T [u]\n+ 7 g .\n+ 8 h .", "i T [u]\n- 5 . .\n- 9 . ."]);
    assert!(b.splits[0].finished);
}

#[tokio::test]
async fn a_snapshot_read_again_after_a_restart_finds_stored_rows_by_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = overwriting(&store, 0);
    read_page(&mut b, 2, 100);
    b.persist(Epoch(1)).unwrap();
    store_rows(&b, &store, "i T\n+ 1 a\n+ 2 b\n+ 4 d");
    let mut b = overwriting(&store, 0);
    // Not held in memory as applied ahead: the page covering them finds them.
    assert!(b.splits[0].ahead.is_empty());
    let out = b.on_page(page(&b, 0, &[(3, "c")], 3, 200)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T [u]\n+ 3 c .", "i T [u]\n- 4 . ."]);
}

#[tokio::test]
async fn columns_added_upstream_are_followed_by_a_table_declared_with_all_columns() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut c = config(&store, false);
    c.follow_columns = true;
    let added = c.rebuilds.clone();
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    let lines = "+ public.t columns 100 [id,x,v] [23,25,25]
                 + public.t f 100 [1, x, a] . f
                 + public.t columns 200 [id,x,v,w] [23,25,25,23]
                 + public.t f 200 [2, x, b, 5] . f";
    let err = b.on_changes(&changes(lines)).await.unwrap_err();
    assert!(err.to_string().contains("gained column(s) w"), "{err}");
    let expected = ColumnChange {
        table: TableId(10),
        position: 200,
        dropped: vec![],
        added: vec!["w".to_owned()],
        retyped: vec![],
    };
    assert_eq!(added.take_changes(), [expected]);
}

#[tokio::test]
async fn columns_dropped_upstream_are_followed_unless_told_to_stop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lines = "+ public.t columns 100 [id,x,v] [23,25,25]
                 + public.t f 100 [1, x, a] . f
                 + public.t columns 200 [id,v] [23,25]
                 + public.t f 200 [2, b] . f";
    let c = config(&store, false);
    let changed = c.rebuilds.clone();
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    let err = b.on_changes(&changes(lines)).await.unwrap_err();
    assert!(err.to_string().contains("dropped column(s) x"), "{err}");
    let expected = ColumnChange {
        table: TableId(10),
        position: 200,
        dropped: vec![1],
        added: vec![],
        retyped: vec![],
    };
    assert_eq!(changed.take_changes(), [expected]);
    // `schema.change = 'stop'`: the table stops there instead, keeping what came before.
    let mut c = config(&store, false);
    c.stop_at_schema_change = true;
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 1 a .");
    let reason = b.stopped.clone().unwrap();
    assert!(
        reason
            .contains("dropped column(s) x, and the table was created with schema.change = 'stop'"),
        "{reason}"
    );
}

#[tokio::test]
async fn changes_after_a_followed_drop_are_laid_out_without_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Upstream `(id, x, v)`, `x` dropped at position 200; the table holds all three (a view
    // reads `x`): changes from the drop on give it NULL, and send their values one place up.
    let mut c = config(&store, false);
    let mut table = (*c.table).clone();
    table.columns.insert(1, ColumnCatalog::new("x", DataType::Varchar));
    c.table = Arc::new(table);
    c.upstream_columns = vec![0, 1, 2];
    c.dropped = vec![(200, 1)];
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    let lines = "+ public.t columns 100 [id,x,v] [23,25,25]
                 + public.t f 100 [1, x1, a] . f
                 + public.t columns 200 [id,v] [23,25]
                 + public.t f 200 [2, b] . f
                 + public.t f 210 [1, .] [1] f";
    // The update of row 1 did not send `v` (its place 1 after the drop): the stored value stays.
    let expected = "i T T [u]\n+ 1 x1 a .\n\ni T T [u]\n+ 2 . b .\n+ 1 . . [2]";
    assert_eq!(apply(&mut b, lines).await, expected);
    assert!(b.stopped.is_none(), "{:?}", b.stopped);
}

#[tokio::test]
async fn changes_from_before_a_followed_column_keep_its_stored_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // The table `(id, v, w)` after `w` (upstream column 3) was added at position 200.
    let mut c = config(&store, false);
    let mut table = (*c.table).clone();
    table.columns.push(ColumnCatalog { since: 1, ..ColumnCatalog::new("w", DataType::Int32) });
    c.table = Arc::new(table);
    c.upstream_columns = vec![0, 2, 3];
    c.upstream.columns.push(ColumnCatalog::new("w", DataType::Int32));
    c.upstream.upstream_types.push("integer".into());
    c.columns_since = vec![(200, 3)];
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1), (23, -1)]);
    let lines = "+ public.t columns 100 [id,x,v] [23,25,25]
                 + public.t f 100 [1, x, a] . f
                 + public.t columns 200 [id,x,v,w] [23,25,25,23]
                 + public.t f 200 [2, x, b, 5] . f";
    // Row 1 has no value for `w` (table column 2): the stored row keeps its own.
    let expected = "i T i [u]\n+ 1 a . [2]\n\ni T i [u]\n+ 2 b 5 .";
    assert_eq!(apply(&mut b, lines).await, expected);
    assert!(b.stopped.is_none());
    // A description from before the addition that renames an older column stops it.
    let lines = "+ public.t columns 150 [id,y,v] [23,25,25]";
    apply(&mut b, lines).await;
    assert!(b.stopped.as_ref().unwrap().contains("column x was renamed"), "{:?}", b.stopped);
}

#[tokio::test]
async fn changes_from_before_a_snapshot_read_again_are_dropped_where_it_has_read_even_after_a_restart()
 {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // The snapshot read again from position 200 has read up to id 3 and persisted it.
    let mut b = overwriting(&store, 200);
    read_page(&mut b, 3, 250);
    b.persist(Epoch(1)).unwrap();
    store_rows(&b, &store, "i T\n+ 1 a\n+ 2 b");
    // After a restart its pages are forgotten; changes replayed from before 200 to rows it
    // read are dropped (its rows hold them, and what only it has: a column added at 200),
    // those beyond its cursor apply ahead, and later ones apply.
    let mut b = overwriting(&store, 200);
    let lines = "+ public.t t 150 [2, ., .] . f
                 + public.t f 160 [2, x, b] . f
                 + public.t f 170 [7, x, g] . f
                 + public.t f 260 [1, x, a2] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 7 g .\n+ 1 a2 .");
    // Once it has finished, too.
    b.splits[0].finished = true;
    b.splits[0].dirty = true;
    b.persist(Epoch(2)).unwrap();
    store.commit(Epoch(2)).unwrap();
    let mut b = overwriting(&store, 200);
    assert!(b.splits[0].finished);
    let lines = "+ public.t f 190 [9, x, i] . f
                 + public.t f 210 [9, x, i2] . f";
    assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 9 i2 .");
}

#[tokio::test]
async fn a_truncate_from_before_a_snapshot_read_again_starts_it_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut b = overwriting(&store, 500);
    read_page(&mut b, 3, 600);
    b.splits[0].reading = true;
    let in_flight = page(&b, 0, &[(4, "d")], 3, 650);
    // Read again from before the snapshot began: the truncate empties the table, and every
    // page reads again (what was read was deleted); the change after it applies ahead.
    let lines = "+ public.t truncate 400
                 + public.t f 410 [1, x, a] . f";
    assert_eq!(apply(&mut b, lines).await, "truncate\n\ni T [u]\n+ 1 a .");
    assert!(b.splits[0].cursor.is_none() && !b.splits[0].finished);
    assert_eq!(b.phase, Phase::Reading);
    assert!(b.on_page(in_flight).unwrap().is_empty(), "read across the truncate: dropped");
    let out = b.on_page(page(&b, 0, &[(1, "a2"), (2, "b")], 3, 700)).unwrap();
    let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
    assert_eq!(out, ["i T [u]\n+ 1 a2 .\n+ 2 b ."]);
    assert!(b.splits[0].finished);
    // One after the snapshot began is the upstream's own: it ends the snapshot as always.
    let mut b = overwriting(&store, 500);
    assert_eq!(apply(&mut b, "+ public.t truncate 600").await, "truncate");
    assert!(b.splits[0].finished);
}

#[tokio::test]
async fn a_text_column_retyped_to_wider_text_is_followed_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let c = config(&store, false);
    let changed = c.rebuilds.clone();
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    // `x` (text) becomes varchar(20): typmod 24. The table follows it, reading its snapshot
    // again (the upstream may have rewritten the values).
    let lines = "+ public.t columns 100 [id,x,v] [23,25,25]
                 + public.t f 100 [1, x, a] . f
                 + public.t columns 200 [id,x,v] [23,1043:24,25]
                 + public.t f 200 [2, y, b] . f";
    let err = b.on_changes(&changes(lines)).await.unwrap_err();
    assert!(err.to_string().contains("changed column x to character varying(20)"), "{err}");
    let change = changed.take_changes().pop().unwrap();
    assert_eq!(change.retyped, [(1, "character varying(20)".to_owned(), DataType::Varchar)]);
    assert!(b.stopped.is_none());
    // Once followed (at 200), descriptions up to it, read again, are taken as they come.
    let mut c = config(&store, false);
    c.retyped = vec![(200, 1)];
    c.upstream.upstream_types[1] = "character varying(20)".into();
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (1043, 24), (25, -1)]);
    let expected = "i T [u]\n+ 1 a .\n\ni T [u]\n+ 2 b .";
    assert_eq!(apply(&mut b, lines).await, expected);
    assert!(b.stopped.is_none() && changed.take_changes().is_empty());
    // To another type: the table stops.
    let c = config(&store, false);
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (25, -1), (25, -1)]);
    apply(&mut b, "+ public.t columns 200 [id,x,v] [23,23,25]").await;
    let reason = b.stopped.clone().unwrap();
    assert!(reason.contains("column x changed type upstream from text"), "{reason}");
}

#[tokio::test]
async fn a_number_column_widened_upstream_is_followed_in_place_and_a_narrowed_one_stops() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // `x` is an integer upstream, held as one.
    let fixture = |store: &Arc<Store>| {
        let mut c = config(store, false);
        c.upstream.columns[1] = ColumnCatalog::new("x", DataType::Int32);
        c.upstream.upstream_types[1] = "integer".into();
        c
    };
    let c = fixture(&store);
    let changed = c.rebuilds.clone();
    let (status, _) = watch::channel(BackfillStatus::default());
    let mut b = CdcBackfill::load(store.clone(), c, status).unwrap();
    b.guard.learn_types(vec![(23, -1), (23, -1), (25, -1)]);
    let lines = "+ public.t columns 100 [id,x,v] [23,23,25]
                 + public.t f 100 [1, 7, a] . f
                 + public.t columns 200 [id,x,v] [23,20,25]
                 + public.t f 200 [2, 5000000000, b] . f";
    let err = b.on_changes(&changes(lines)).await.unwrap_err();
    assert!(err.to_string().contains("changed column x to bigint"), "{err}");
    let change = changed.take_changes().pop().unwrap();
    assert_eq!(
        (change.position, change.retyped),
        (200, vec![(1, "bigint".into(), DataType::Int64)])
    );
    assert!(b.stopped.is_none());
    // bigint to smallint, and the key column widened: each stops the table.
    for (description, column) in
        [("[23,21,25]", "column x changed type upstream"), ("[20,23,25]", "column id changed type")]
    {
        let (status, _) = watch::channel(BackfillStatus::default());
        let mut b = CdcBackfill::load(store.clone(), fixture(&store), status).unwrap();
        b.guard.learn_types(vec![(23, -1), (23, -1), (25, -1)]);
        apply(&mut b, &format!("+ public.t columns 200 [id,x,v] {description}")).await;
        let reason = b.stopped.clone().unwrap();
        assert!(reason.contains(column), "{reason}");
        assert!(changed.take_changes().is_empty());
    }
}
