//! SQL: text to statements, views to stream plans, and what makes DataFusion answer as
//! Postgres does.

/// `min`/`max`, `sum`/`avg` registered over DataFusion's (floats in groups; numeric `NaN` and
/// infinities).
pub mod aggregates;
/// Logical-plan rewrites that keep queries away from DataFusion bugs.
pub mod analyzer;
/// Postgres's array literals (`'{1,2}'::int[]`, `x = ANY('{a,b}')`) as Postgres reads them.
pub mod array_literals;
/// Arrays' `@>`, `<@` and `&&`.
pub mod array_ops;
/// Integer arithmetic that fails on overflow (22003), in batch and streaming plans.
pub mod checked;
/// Postgres compatibility: rewrites that make parsed statements plan as in Postgres.
pub mod compat;
/// sqlparser's Postgres dialect with a bound on parse work.
pub mod dialect;
/// `numeric / numeric` with Postgres's digits.
pub mod division;
/// Eager aggregation: an aggregate over an inner join pre-aggregates one side.
pub mod eager;
/// `EXISTS` outside `WHERE` conjuncts as a count.
pub mod exists;
/// `FETCH FIRST n ROWS ONLY | WITH TIES` as a limit or a rank.
pub mod fetch;
/// Postgres's formatting functions: `to_char`, `to_date`, `to_timestamp`, `age`, `format`.
pub mod format;
/// Scalar functions registered over DataFusion's (`version()`).
pub mod functions;
/// An interval times or divided by a number, as Postgres computes it.
pub mod interval;
/// `to_jsonb`, and `jsonb_agg` / `json_agg` as a `string_agg`.
pub mod json_agg;
/// The jsonb operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`) as functions.
pub mod jsonb;
/// Postgres's numeric functions DataFusion lacks (`sign`, `div`, `mod`, `scale`, ..).
pub mod math;
/// Postgres names for unnamed output columns.
pub mod names;
/// A correlated `NOT IN` in a `WHERE` clause as the `NOT EXISTS` it means there.
pub mod not_in;
/// Statements: sqlparser's Postgres dialect plus Sluice's own, with input limits.
pub mod parser;
/// A view's DataFusion plan lowered to a stream plan.
pub mod planner;
/// `row_number()`, `rank()`, `dense_rank()` and `ntile()` typed as Postgres types them.
pub mod ranks;
/// Arithmetic over numeric `NaN` and infinities, as Postgres computes it.
pub mod special_arith;
/// A bound on DataFusion's grouped top-k aggregation (no panic on a huge `LIMIT`).
pub mod topk;
