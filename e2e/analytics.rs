//! The views people write for reporting, over CDC tables of a private upstream Postgres: multi-
//! way joins with aggregates, top-N per group, anti joins, `NOT IN`, scalar subqueries,
//! `DISTINCT ON`, window functions, `EXCEPT`, `FILTER`. Created while the upstream is being
//! written; each must equal Postgres's answer to the same query on the upstream once quiet, and
//! again after a kill -9 with changes made while Sluice was down, and after a rescale.

use std::time::Duration;

use anyhow::{Context, ensure};
use tokio_postgres::Client;

use crate::harness::{Rng, Sluice, retry_until, sorted};
use crate::upstream::Upstream;

/// The upstream schema and its first rows.
const SCHEMA: &str = "
    SET TimeZone = 'UTC';
    CREATE TABLE customers (id int PRIMARY KEY, name text, region text, signup date);
    CREATE TABLE products (id int PRIMARY KEY, category text, price numeric(10,2));
    CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, ordered_at timestamptz,
        status text);
    CREATE TABLE items (order_id int, line int, product_id int, qty int,
        PRIMARY KEY (order_id, line));
    CREATE TABLE shipments (id int PRIMARY KEY, order_id int, shipped_at timestamptz);
    INSERT INTO customers SELECT i, 'c' || i, (ARRAY['north','south','east','west'])[1 + i % 4],
        DATE '2024-01-01' + (i % 300) FROM generate_series(1, 2000) i;
    INSERT INTO products SELECT i, 'cat' || (i % 12), (i % 97) * 1.25 + 0.5
        FROM generate_series(1, 300) i;
    INSERT INTO orders SELECT i, 1 + (i * 7) % 1990,
        TIMESTAMPTZ '2024-03-01 00:00:00+00' + i * interval '17 minutes',
        (ARRAY['open','done','done','cancelled'])[1 + i % 4] FROM generate_series(1, 20000) i;
    INSERT INTO items SELECT 1 + i / 3, i % 3, 1 + (i * 13) % 300, 1 + i % 5
        FROM generate_series(0, 59999) i;
    INSERT INTO shipments SELECT i, CASE WHEN i % 50 = 0 THEN 900000 + i ELSE i * 2 END,
        TIMESTAMPTZ '2024-03-02 00:00:00+00' + i * interval '31 minutes'
        FROM generate_series(1, 9000) i;";

const TABLES: [&str; 5] = ["customers", "products", "orders", "items", "shipments"];

/// The views: a name and a query that Postgres and Sluice both answer, deterministically
/// (orders made total where the answer depends on them).
const VIEWS: [(&str, &str); 21] = [
    (
        "a_region_revenue",
        "SELECT c.region, sum(i.qty * p.price) AS revenue, count(DISTINCT o.id) AS orders \
         FROM orders o JOIN customers c ON o.customer_id = c.id \
         JOIN items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id \
         GROUP BY c.region",
    ),
    (
        "a_top_customers",
        "SELECT region, id, spend FROM (SELECT c.region, c.id, sum(i.qty * p.price) AS spend, \
         row_number() OVER (PARTITION BY c.region ORDER BY sum(i.qty * p.price) DESC, c.id) AS rn \
         FROM customers c JOIN orders o ON o.customer_id = c.id \
         JOIN items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id \
         GROUP BY c.region, c.id) t WHERE rn <= 5",
    ),
    (
        "a_unshipped",
        "SELECT o.id, o.customer_id FROM orders o \
         WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.order_id = o.id)",
    ),
    (
        "a_never_ordered",
        "SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
    ),
    (
        "a_big_orders",
        "SELECT order_id, q FROM (SELECT order_id, sum(qty) AS q FROM items GROUP BY order_id) t \
         WHERE q > (SELECT sum(qty) / count(DISTINCT order_id) FROM items)",
    ),
    (
        "a_category_stats",
        "SELECT p.category, count(*) AS lines, sum(i.qty) AS qty, min(p.price) AS lo, \
         max(p.price) AS hi FROM items i JOIN products p ON p.id = i.product_id \
         GROUP BY p.category",
    ),
    (
        "a_status_by_region",
        "SELECT c.region, count(*) FILTER (WHERE o.status = 'open') AS open, \
         count(*) FILTER (WHERE o.status = 'done') AS done FROM orders o \
         JOIN customers c ON c.id = o.customer_id GROUP BY c.region",
    ),
    (
        "a_orphans",
        "SELECT o.id AS order_id, s.id AS shipment_id FROM orders o \
         FULL JOIN shipments s ON s.order_id = o.id WHERE o.id IS NULL OR s.id IS NULL",
    ),
    (
        "a_latest_order",
        "SELECT DISTINCT ON (customer_id) customer_id, id, ordered_at FROM orders \
         ORDER BY customer_id, ordered_at DESC, id DESC",
    ),
    (
        "a_nth_order",
        "SELECT id, customer_id, count(*) OVER (PARTITION BY customer_id ORDER BY ordered_at, id) \
         AS nth, lag(id) OVER (PARTITION BY customer_id ORDER BY ordered_at, id) AS prev \
         FROM orders",
    ),
    (
        "a_top_products",
        "SELECT product_id, sum(qty) AS q FROM items GROUP BY product_id \
         ORDER BY q DESC, product_id LIMIT 10",
    ),
    (
        "a_open_customers",
        "SELECT id, name FROM customers \
         WHERE id IN (SELECT customer_id FROM orders WHERE status = 'open')",
    ),
    (
        "a_order_counts",
        "SELECT c.id, (SELECT count(*) FROM orders o WHERE o.customer_id = c.id) AS n \
         FROM customers c",
    ),
    (
        "a_open_not_cancelled",
        "SELECT customer_id FROM orders WHERE status = 'open' \
         EXCEPT SELECT customer_id FROM orders WHERE status = 'cancelled'",
    ),
    (
        "a_shipped_or_cancelled",
        "SELECT order_id FROM shipments UNION SELECT id FROM orders WHERE status = 'cancelled'",
    ),
    (
        "a_customer_funnel",
        "SELECT c.id, count(o.id) AS orders, count(s.id) AS shipped FROM customers c \
         LEFT JOIN orders o ON o.customer_id = c.id LEFT JOIN shipments s ON s.order_id = o.id \
         GROUP BY c.id",
    ),
    (
        "a_loyal",
        "SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id HAVING count(*) > 11",
    ),
    (
        "a_category_orders",
        "SELECT p.category, count(DISTINCT i.order_id) AS orders, sum(i.qty) AS qty \
         FROM items i JOIN products p ON p.id = i.product_id GROUP BY p.category",
    ),
    (
        "a_price_rank",
        "SELECT id, category, dense_rank() OVER (PARTITION BY category ORDER BY price DESC) AS dr \
         FROM products",
    ),
    (
        "a_cancel_flags",
        "SELECT customer_id, bool_or(status = 'cancelled') AS any_cancelled, \
         bool_and(status <> 'open') AS all_closed FROM orders GROUP BY customer_id",
    ),
    (
        "a_late_shipments",
        "SELECT s.id, o.id AS order_id FROM shipments s JOIN orders o ON o.id = s.order_id \
         AND s.shipped_at > o.ordered_at + interval '3 days'",
    ),
];

#[tokio::test]
async fn analytical_views_over_cdc_tables_equal_postgres() -> anyhow::Result<()> {
    let upstream = Upstream::start().await?;
    let mut server = Sluice::start().await?;
    let outcome = analytics(&upstream, &mut server).await;
    outcome.with_context(|| format!("{}\n{}", server.log_tail(), upstream.log_tail()))
}

/// `n` random changes to the upstream tables: orders placed, cancelled, moved between
/// customers and deleted, items changed, shipments made and lost, prices and regions changed.
async fn write(up: &Client, rng: &mut Rng, n: usize, next_id: &mut i64) -> anyhow::Result<()> {
    for _ in 0..n {
        let order = 1 + rng.below(20_000);
        let sql = match rng.below(10) {
            0 | 1 => {
                *next_id += 1;
                let id = *next_id;
                let customer = 1 + rng.below(2000);
                format!(
                    "INSERT INTO orders VALUES ({id}, {customer}, now(), 'open');
                     INSERT INTO items VALUES ({id}, 0, {}, {}), ({id}, 1, {}, 1)",
                    1 + rng.below(300),
                    1 + rng.below(9),
                    1 + rng.below(300)
                )
            }
            2 => format!("UPDATE orders SET status = 'cancelled' WHERE id = {order}"),
            3 => format!(
                "UPDATE orders SET customer_id = {} WHERE id = {order}",
                1 + rng.below(2000)
            ),
            4 => format!(
                "DELETE FROM items WHERE order_id = {order}; DELETE FROM orders WHERE id = {order}"
            ),
            5 => format!("UPDATE items SET qty = qty + 3 WHERE order_id = {order}"),
            6 => {
                *next_id += 1;
                format!("INSERT INTO shipments VALUES ({}, {order}, now())", *next_id)
            }
            7 => format!("DELETE FROM shipments WHERE order_id = {order}"),
            8 => format!(
                "UPDATE products SET price = price + 0.25 WHERE id = {}",
                1 + rng.below(300)
            ),
            _ => format!("UPDATE customers SET region = 'west' WHERE id = {}", 1 + rng.below(2000)),
        };
        up.batch_execute(&format!("BEGIN; {sql}; COMMIT")).await?;
    }
    Ok(())
}

/// Waits until every view holds what Postgres answers to its query on the upstream.
async fn assert_views_equal_postgres(sluice: &Client, up: &Client) -> anyhow::Result<()> {
    for (name, query) in VIEWS {
        retry_until(Duration::from_secs(90), || async {
            let ours = sorted(sluice, &format!("SELECT * FROM {name}")).await?;
            let theirs = sorted(up, query).await?;
            ensure!(!theirs.is_empty(), "{name} is empty in Postgres: it would prove nothing");
            ensure!(
                ours == theirs,
                "{name}: {} rows in Sluice, {} in Postgres; first differences: {:?}",
                ours.len(),
                theirs.len(),
                ours.iter().zip(&theirs).filter(|(a, b)| a != b).take(3).collect::<Vec<_>>()
            );
            Ok(())
        })
        .await?;
    }
    Ok(())
}

async fn analytics(upstream: &Upstream, server: &mut Sluice) -> anyhow::Result<()> {
    upstream.create_database("shop").await?;
    let up = upstream.connect("shop").await?;
    up.batch_execute(SCHEMA).await?;
    let client = server.connect().await?;
    client.batch_execute(&upstream.source_sql("pg", "")).await?;
    for table in TABLES {
        client
            .batch_execute(&format!("CREATE TABLE {table} (*) FROM pg TABLE 'public.{table}'"))
            .await?;
    }
    // A writer runs while the views are created (their backfills overlap its changes).
    let writer = upstream.connect("shop").await?;
    writer.batch_execute("SET TimeZone = 'UTC'").await?;
    let seed = 20261206;
    let writing = tokio::spawn(async move {
        let mut rng = Rng::new(seed);
        let mut next_id = 1_000_000;
        write(&writer, &mut rng, 400, &mut next_id).await.map(|()| (writer, rng, next_id))
    });
    for (name, query) in VIEWS {
        client
            .batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {query}"))
            .await
            .with_context(|| format!("creating {name}"))?;
    }
    let (writer, mut rng, mut next_id) = writing.await??;
    up.batch_execute("SET TimeZone = 'UTC'").await?;
    assert_views_equal_postgres(&client, &up).await.context("after creation")?;

    // Killed while changes stream, changed while down, restarted.
    let more = write(&writer, &mut rng, 100, &mut next_id);
    let (written, killed) = tokio::join!(more, server.kill9());
    written?;
    killed?;
    write(&writer, &mut rng, 100, &mut next_id).await?;
    server.restart().await?;
    let client = server.connect().await?;
    assert_views_equal_postgres(&client, &up).await.context("after kill -9")?;

    // Rescaled, then changed again.
    for name in ["a_top_customers", "a_nth_order", "a_never_ordered", "a_region_revenue"] {
        client
            .batch_execute(&format!("ALTER MATERIALIZED VIEW {name} SET PARALLELISM = 1"))
            .await?;
    }
    write(&writer, &mut rng, 100, &mut next_id).await?;
    assert_views_equal_postgres(&client, &up).await.context("after rescaling")?;
    Ok(())
}
