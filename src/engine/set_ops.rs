//! `EXCEPT ALL` and `INTERSECT ALL` as Postgres counts them.
//!
//! DataFusion plans `a EXCEPT ALL b` as an anti join of every row of `a` with `b`, and
//! `INTERSECT ALL` as a semi join: a row twice in `a` and once in `b` was gone from `EXCEPT ALL`
//! (Postgres keeps one) and twice in `INTERSECT ALL` (Postgres: once), in queries and views
//! alike, without a word. Postgres keeps a row `max(0, m - n)` times in `EXCEPT ALL` and
//! `min(m, n)` times in `INTERSECT ALL`, where it is `m` times in `a` and `n` times in `b`.
//!
//! Before a statement is planned, each such operation is written as its distinct form over
//! numbered rows: each side's duplicates are numbered `1..m` (`row_number()` over all its
//! columns), so the row `(r, k)` is in `a`'s numbered rows for `k <= m` and in `b`'s for
//! `k <= n`, and the distinct `EXCEPT` keeps exactly `k` in `n+1..=m`, `INTERSECT` `k <= min(m,
//! n)`; the numbers are then dropped:
//!
//! ```text
//! SELECT __c1 AS x, .. FROM (
//!   SELECT __c1, .., row_number() OVER (PARTITION BY __c1, ..) AS __n FROM (a) AS __l(__c1, ..)
//!   EXCEPT
//!   SELECT __c1, .., row_number() OVER (PARTITION BY __c1, ..) AS __n FROM (b) AS __r(__c1, ..)
//! ) AS __d
//! ```
//!
//! The left side's column names (the result's) come from planning it alone, with the `WITH`
//! clauses around it. Inner operations are written first.

use std::ops::ControlFlow;

use datafusion::execution::session_state::SessionState;
use datafusion::sql::sqlparser::ast::{self, Visit, VisitMut, Visitor, VisitorMut};

use crate::error::{Error, Result};
use crate::sql::parser::{Statement, parse};

/// `stmt` with every `EXCEPT ALL` and `INTERSECT ALL` counted as Postgres counts them (see the
/// module docs).
pub(crate) async fn count_duplicates(
    state: &SessionState,
    stmt: &mut ast::Statement,
) -> Result<()> {
    while let Some(found) = first_counted(stmt) {
        let names = left_names(state, &found).await?;
        let mut replace = Replace { names, done: false, result: Ok(()) };
        let _ = VisitMut::visit(stmt, &mut replace);
        replace.result?;
        if !replace.done {
            return Err(Error::Stream(
                "a counted set operation was found but not rewritten".into(),
            ));
        }
    }
    Ok(())
}

/// The first counted operation (innermost first): its left side, and the `WITH` clauses of the
/// queries around it.
struct Found {
    left: ast::SetExpr,
    with: Vec<ast::With>,
}

/// Whether `op` with `quantifier` counts duplicates.
fn counted(op: &ast::SetOperator, quantifier: &ast::SetQuantifier) -> Option<&'static str> {
    match (op, quantifier) {
        (ast::SetOperator::Except | ast::SetOperator::Minus, ast::SetQuantifier::All) => {
            Some("EXCEPT")
        }
        (ast::SetOperator::Intersect, ast::SetQuantifier::All) => Some("INTERSECT"),
        _ => None,
    }
}

/// The first counted operation of `body`'s set operations, in post-order (nested queries are
/// visited on their own, before the query holding them).
fn find_in(body: &ast::SetExpr) -> Option<&ast::SetExpr> {
    let ast::SetExpr::SetOperation { op, set_quantifier, left, right } = body else {
        return None;
    };
    find_in(left)
        .or_else(|| find_in(right))
        .or_else(|| counted(op, set_quantifier).map(|_| left.as_ref()))
}

fn first_counted(stmt: &ast::Statement) -> Option<Found> {
    struct Find {
        with: Vec<Option<ast::With>>,
        found: Option<Found>,
    }
    impl Visitor for Find {
        type Break = ();

        fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<()> {
            self.with.push(query.with.clone());
            ControlFlow::Continue(())
        }

        fn post_visit_query(&mut self, query: &ast::Query) -> ControlFlow<()> {
            if let Some(left) = find_in(&query.body) {
                let with = self.with.iter().flatten().cloned().collect();
                self.found = Some(Found { left: left.clone(), with });
                return ControlFlow::Break(());
            }
            self.with.pop();
            ControlFlow::Continue(())
        }
    }
    let mut find = Find { with: Vec::new(), found: None };
    let _ = Visit::visit(stmt, &mut find);
    find.found
}

/// The result's column names: the left side's, planned alone.
async fn left_names(state: &SessionState, found: &Found) -> Result<Vec<String>> {
    let ctes: Vec<String> =
        found.with.iter().flat_map(|w| w.cte_tables.iter().map(|c| c.to_string())).collect();
    let with = match ctes.is_empty() {
        true => String::new(),
        false => format!("WITH {} ", ctes.join(", ")),
    };
    let sql = format!("{with}{}", found.left);
    let Some(Statement::Sql(stmt)) = parse(&sql)?.pop() else {
        return Err(Error::Stream(format!("the left side of EXCEPT/INTERSECT ALL: {sql}")));
    };
    let plan = state.statement_to_plan(datafusion::sql::parser::Statement::Statement(stmt)).await?;
    Ok(plan.schema().fields().iter().map(|f| f.name().clone()).collect())
}

/// Replaces the first counted operation (the one [`first_counted`] found) by its rewriting.
struct Replace {
    names: Vec<String>,
    done: bool,
    result: Result<()>,
}

impl Replace {
    /// Rewrites the first counted operation of `body` (post-order); whether it did.
    fn rewrite(&mut self, body: &mut ast::SetExpr) -> bool {
        let ast::SetExpr::SetOperation { op, set_quantifier, left, right } = body else {
            return false;
        };
        if self.rewrite(left) || self.rewrite(right) {
            return true;
        }
        let Some(keyword) = counted(op, set_quantifier) else { return false };
        match self.counted_query(keyword, left, right) {
            Ok(query) => *body = ast::SetExpr::Query(Box::new(query)),
            Err(e) => self.result = Err(e),
        }
        true
    }

    /// The distinct form of `left keyword ALL right` over numbered rows (see the module docs).
    fn counted_query(
        &self,
        keyword: &str,
        left: &ast::SetExpr,
        right: &ast::SetExpr,
    ) -> Result<ast::Query> {
        let columns: Vec<String> = (1..=self.names.len()).map(|i| format!("__c{i}")).collect();
        let list = columns.join(", ");
        let numbered = |side: &ast::SetExpr, alias: &str| {
            format!(
                "SELECT {list}, row_number() OVER (PARTITION BY {list}) AS __n \
                 FROM ({side}) AS {alias}({list})"
            )
        };
        let named: Vec<String> = columns
            .iter()
            .zip(&self.names)
            .map(|(c, name)| format!("{c} AS \"{}\"", name.replace('"', "\"\"")))
            .collect();
        let sql = format!(
            "SELECT {} FROM ({} {keyword} {}) AS __d",
            named.join(", "),
            numbered(left, "__l"),
            numbered(right, "__r")
        );
        match parse(&sql)?.pop() {
            Some(Statement::Sql(stmt)) => match *stmt {
                ast::Statement::Query(query) => Ok(*query),
                other => Err(Error::Stream(format!("not a query: {other}"))),
            },
            _ => Err(Error::Stream(format!("not a query: {sql}"))),
        }
    }
}

impl VisitorMut for Replace {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if self.rewrite(&mut query.body) {
            self.done = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}
