//! End-to-end tests: each test spawns the real `sluice` binary and talks to it over the
//! Postgres wire protocol.
//!
//! - [`harness`]: start, `kill -9`, and restart a server on a temporary data directory;
//! - [`slt`]: runs every `sql_tests/**/*.slt` file against one server;
//! - [`crash`]: kill -9 and restart scenarios (recovery must keep every committed write);
//! - [`cli`]: the command line: `--help`, `--version`, a `--config` file;
//! - [`clients`]: real clients (tokio-postgres's extended protocol, `psql`) and many sessions;
//! - [`cdc_faults`]: CDC through upstream crashes, restarts mid-snapshot, partitioned tables;
//! - [`cdc_matrix`]: generated tables, values, keys and events: every CDC table equals its
//!   upstream;
//! - [`cdc_upstream_events`]: upstream habits (schema changes, statement-logged changes, a
//!   MySQL source killed before its first change, a shared slot) followed or refused aloud;
//! - [`chaos`]: CDC tables and views stay exact through rounds of kills and upstream faults;
//! - [`fuzz`]: random SQL never crashes the server, fails internally, loses an acknowledged
//!   write or stalls, and views equal their queries;
//! - [`observability`]: `/metrics` during a backfill, the JSON API, and the dashboard in a
//!   real headless Chromium;
//! - [`recovery`]: an actor failure recovers the jobs in the running server;
//! - [`upstream`]: a private PostgreSQL server with logical WAL, the upstream of CDC tests;
//! - [`mysql_upstream`]: a private MariaDB server with a row binlog, the upstream of MySQL CDC
//!   tests, and [`mysql_cdc`]: the MySQL connector against it;
//! - [`analytics`]: twenty reporting views (joins, top-N, anti joins, subqueries, windows) over
//!   CDC tables equal Postgres's answers, through concurrent writes, a kill -9 and a rescale;
//! - [`bench_smoke`]: the benchmark driver (`bench/driver.rs`) on a few thousand rows, so
//!   `bench/run` cannot rot.

mod analytics;
#[path = "../bench/driver.rs"]
mod bench_driver;
mod bench_smoke;
mod cdc;
mod cdc_faults;
mod cdc_matrix;
mod cdc_upstream_events;
mod chaos;
mod cli;
mod clients;
mod crash;
mod fuzz;
mod harness;
mod jobs;
mod mv;
mod mysql_cdc;
mod mysql_upstream;
mod observability;
mod psycopg;
mod recovery;
mod rescale;
mod slt;
mod upstream;
