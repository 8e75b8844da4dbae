//! Property test: random DML interleaved with random checkpoints and view creations; every
//! view must equal its query run as a batch query (the naive recomputation).

use std::time::Duration;

use arrow::util::display::array_value_to_string;
use futures::TryStreamExt;

use super::*;
use crate::sql::parser::parse;

/// A deterministic generator, so a failing seed can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

async fn run(engine: &Engine, sql: &str) -> Result<Vec<String>> {
    let session = Session::default();
    let mut out = Vec::new();
    for statement in parse(sql)? {
        if let Output::Rows { stream, .. } = engine.execute(&session, statement).await? {
            let batches: Vec<arrow::array::RecordBatch> = stream.try_collect().await?;
            for batch in &batches {
                for row in 0..batch.num_rows() {
                    let cells: Vec<String> = batch
                        .columns()
                        .iter()
                        .map(|c| array_value_to_string(c, row).unwrap_or_default())
                        .collect();
                    out.push(cells.join("|"));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

const VIEWS: &[(&str, &str)] = &[
    ("p_filter", "SELECT id, a + b AS s FROM p_t WHERE a % 3 <> 0"),
    (
        "p_agg",
        "SELECT a % 4 AS k, count(*) AS n, sum(b) AS sb, min(b) AS lo, max(b) AS hi FROM p_t GROUP BY a % 4",
    ),
    ("p_join", "SELECT p_t.id, p_u.label, p_t.b FROM p_t JOIN p_u ON p_t.a = p_u.a"),
    ("p_global", "SELECT count(*) AS n, sum(a) AS sa, max(b) AS mb FROM p_t"),
    ("p_left", "SELECT p_t.id, p_t.a, p_u.label FROM p_t LEFT JOIN p_u ON p_t.a = p_u.a"),
    ("p_union", "SELECT a, b FROM p_t WHERE b > 50 UNION ALL SELECT a, 0 AS b FROM p_u"),
];

async fn random_history(seed: u64) -> Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        barrier_interval: Duration::from_secs(3600),
        backfill_barrier_interval: Duration::from_secs(3600),
    };
    let (engine, _manager) = Engine::start(config).await?;
    run(&engine, "CREATE TABLE p_t (id int PRIMARY KEY, a int, b int); CREATE TABLE p_u (a int PRIMARY KEY, label varchar)").await?;
    let mut rng = Lcg(seed);
    let mut created = 0;
    for step in 0..120 {
        let id = rng.next(40);
        let sql = match rng.next(10) {
            0..=3 => format!("INSERT INTO p_t VALUES ({id}, {}, {})", rng.next(12), rng.next(100)),
            4 | 5 => format!("UPDATE p_t SET a = {}, b = b + 1 WHERE id = {id}", rng.next(12)),
            6 => format!("DELETE FROM p_t WHERE id >= {id} AND id < {}", id + rng.next(4)),
            7 => format!("INSERT INTO p_u VALUES ({}, 'l{step}')", rng.next(12)),
            8 => format!("DELETE FROM p_u WHERE a = {}", rng.next(12)),
            _ => "FLUSH".to_owned(),
        };
        // Duplicate keys are expected now and then; they must change nothing.
        let _ = run(&engine, &sql).await;
        if created < VIEWS.len() && rng.next(15) == 0 {
            let (name, query) = VIEWS[created];
            run(&engine, &format!("CREATE MATERIALIZED VIEW {name} AS {query}")).await?;
            created += 1;
        }
    }
    for (name, query) in &VIEWS[..created] {
        let view = run(&engine, &format!("SELECT * FROM {name}")).await?;
        let batch = run(&engine, query).await?;
        assert_eq!(view, batch, "seed {seed}: view {name} differs from its query");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_equal_recomputation_over_random_histories() {
    for seed in 0..10 {
        random_history(seed).await.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// A float cast to an integer type rounds in one call: nested casts do not grow the plan
/// exponentially (16 nested float -> int casts; an expression repeating its argument made
/// 4^16 copies). Here rather than in an .slt file, whose statements the SQL fuzzer mutates:
/// sqlparser backtracks exponentially on a malformed statement this deep.
/// It runs on a thread with the server's runtime stack (32 MiB, `src/main.rs`): planning this
/// deep an expression in an unoptimised build needs more than a test thread's 2 MiB.
#[test]
fn nested_float_to_int_casts_plan_at_once() -> Result<()> {
    let thread = std::thread::Builder::new().stack_size(32 << 20);
    let planned = thread.spawn(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        runtime.expect("a runtime").block_on(nested_casts())
    });
    planned.expect("a thread starts").join().expect("the test thread ends")
}

async fn nested_casts() -> Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        barrier_interval: Duration::from_secs(3600),
        backfill_barrier_interval: Duration::from_secs(3600),
    };
    let (engine, _manager) = Engine::start(config).await?;
    let mut expr = "2.5::float8".to_owned();
    for _ in 0..16 {
        expr = format!("CAST(CAST({expr} AS int) AS float8)");
    }
    let rows =
        tokio::time::timeout(Duration::from_secs(20), run(&engine, &format!("SELECT {expr}")))
            .await
            .expect("planned within 20 s")?;
    assert_eq!(rows, ["2.0"]);
    Ok(())
}
