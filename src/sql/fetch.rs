//! `FETCH FIRST n ROWS ONLY | WITH TIES`, which DataFusion does not plan.
//!
//! `ONLY` is a `LIMIT`. `WITH TIES` keeps the rows that tie with the last one by the query's
//! `ORDER BY`: the rows whose `rank()` over that order is at most `n`. The query is written
//! as such, so batch queries and views (a window and a filter over it, maintained as any
//! other) answer the same:
//!
//! ```text
//! SELECT a, b FROM t ORDER BY b DESC FETCH FIRST 3 ROWS WITH TIES
//!   =>  SELECT * EXCLUDE (__sluice_rank) FROM
//!         (SELECT a, b, rank() OVER (ORDER BY b DESC) AS __sluice_rank FROM t) AS __sluice_ties
//!       WHERE __sluice_rank <= 3 ORDER BY __sluice_rank
//! ```
//!
//! A set operation is ranked as a subquery (its `ORDER BY` names its output columns). `WITH
//! TIES` with an `OFFSET`, or without an `ORDER BY`, and `PERCENT`, are refused by name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::error::{Error, Result};

/// The rank column a `WITH TIES` query filters on.
const RANK: &str = "__sluice_rank";

/// Rewrites every `FETCH` clause of `statement` (see the module docs).
pub fn rewrite(statement: &mut ast::Statement) -> Result<()> {
    let mut fetches = Fetches { error: None };
    let _ = statement.visit(&mut fetches);
    match fetches.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Fetches {
    error: Option<Error>,
}

impl VisitorMut for Fetches {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if query.fetch.is_some()
            && let Err(e) = fetch(query)
        {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

fn fetch(query: &mut ast::Query) -> Result<()> {
    let fetch = query.fetch.take().expect("checked by the caller");
    if fetch.percent {
        return Err(Error::Unsupported("FETCH FIRST .. PERCENT".into()));
    }
    let count = fetch.quantity.unwrap_or_else(|| number("1"));
    if !fetch.with_ties {
        match &mut query.limit_clause {
            Some(ast::LimitClause::LimitOffset { limit, .. }) => *limit = Some(count),
            Some(ast::LimitClause::OffsetCommaLimit { limit, .. }) => *limit = count,
            None => {
                query.limit_clause = Some(ast::LimitClause::LimitOffset {
                    limit: Some(count),
                    offset: None,
                    limit_by: Vec::new(),
                });
            }
        }
        return Ok(());
    }
    if query.limit_clause.is_some() {
        return Err(Error::Unsupported("FETCH .. WITH TIES together with OFFSET or LIMIT".into()));
    }
    let Some(order_by) = query.order_by.take() else {
        return Err(Error::InvalidStatement(
            "WITH TIES cannot be specified without ORDER BY clause".into(),
        ));
    };
    let ast::OrderByKind::Expressions(order) = &order_by.kind else {
        return Err(Error::Unsupported("FETCH .. WITH TIES with ORDER BY ALL".into()));
    };
    let over = order.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let rank = parse_expr(&format!("rank() OVER (ORDER BY {over})"))?;
    let ranked = ast::SelectItem::ExprWithAlias { expr: rank, alias: ast::Ident::new(RANK) };
    let body = std::mem::replace(query.body.as_mut(), ast::SetExpr::Values(empty_values()));
    let inner = match body {
        ast::SetExpr::Select(mut select) => {
            select.projection.push(ranked);
            ast::Query { body: Box::new(ast::SetExpr::Select(select)), ..empty_query(query) }
        }
        other => {
            // A set operation: ranked over its output, as a subquery.
            let operand = ast::Query { body: Box::new(other), ..empty_query(query) };
            let mut outer =
                parse_query(&format!("SELECT *, 1 AS {RANK} FROM (SELECT 1) AS __sluice_set"))?;
            let ast::SetExpr::Select(select) = outer.body.as_mut() else {
                unreachable!("a select")
            };
            select.projection[1] = ranked;
            set_subquery(select, operand);
            outer
        }
    };
    let mut outer = parse_query(&format!(
        "SELECT * FROM (SELECT 1) AS __sluice_ties WHERE {RANK} <= 1 ORDER BY {RANK}"
    ))?;
    let ast::SetExpr::Select(select) = outer.body.as_mut() else { unreachable!("a select") };
    if let Some(ast::SelectItem::Wildcard(options)) = select.projection.first_mut() {
        options.opt_exclude =
            Some(ast::ExcludeSelectItem::Single(ast::ObjectName::from(vec![ast::Ident::new(
                RANK,
            )])));
    }
    if let Some(ast::Expr::BinaryOp { right, .. }) = &mut select.selection {
        **right = count;
    }
    set_subquery(select, inner);
    query.with = outer.with.take().or(query.with.take());
    query.body = outer.body;
    query.order_by = outer.order_by;
    Ok(())
}

/// `select`'s one derived table, made `subquery`.
fn set_subquery(select: &mut ast::Select, subquery: ast::Query) {
    if let Some(ast::TableWithJoins {
        relation: ast::TableFactor::Derived { subquery: slot, .. },
        ..
    }) = select.from.first_mut()
    {
        **slot = subquery;
    }
}

/// A query with `query`'s parts other than its body, order and limits (its WITH clause stays
/// with the outermost query).
fn empty_query(query: &ast::Query) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(ast::SetExpr::Values(empty_values())),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: query.pipe_operators.clone(),
    }
}

fn empty_values() -> ast::Values {
    ast::Values { explicit_row: false, value_keyword: false, rows: Vec::new() }
}

fn number(text: &str) -> ast::Expr {
    ast::Expr::Value(ast::Value::Number(text.to_owned(), false).into())
}

fn parse_expr(sql: &str) -> Result<ast::Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| Error::Parse(e.to_string()))
}

fn parse_query(sql: &str) -> Result<ast::Query> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|e| Error::Parse(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String> {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement)?;
        Ok(statement.to_string())
    }

    #[test]
    fn fetch_is_a_limit_or_a_rank() {
        assert_eq!(
            rewritten("SELECT a FROM t ORDER BY a FETCH FIRST 3 ROWS ONLY").unwrap(),
            "SELECT a FROM t ORDER BY a LIMIT 3"
        );
        assert_eq!(
            rewritten("SELECT a FROM t ORDER BY a OFFSET 2 ROWS FETCH NEXT ROW ONLY").unwrap(),
            "SELECT a FROM t ORDER BY a LIMIT 1 OFFSET 2 ROWS"
        );
        assert_eq!(
            rewritten("SELECT a, b FROM t ORDER BY b DESC FETCH FIRST 3 ROWS WITH TIES").unwrap(),
            "SELECT * EXCLUDE __sluice_rank FROM (SELECT a, b, rank() OVER (ORDER BY b DESC) \
             AS __sluice_rank FROM t) AS __sluice_ties WHERE __sluice_rank <= 3 ORDER BY \
             __sluice_rank"
        );
        let set = rewritten(
            "SELECT a FROM t UNION SELECT a FROM u ORDER BY a FETCH FIRST 2 ROWS WITH TIES",
        )
        .unwrap();
        assert!(
            set.contains("FROM (SELECT a FROM t UNION SELECT a FROM u) AS __sluice_set"),
            "{set}"
        );
        let nested = rewritten(
            "SELECT * FROM (SELECT a FROM t ORDER BY a FETCH FIRST 1 ROW WITH TIES) AS s",
        )
        .unwrap();
        assert!(nested.contains("__sluice_rank <= 1"), "{nested}");
        assert!(rewritten("SELECT a FROM t FETCH FIRST 1 ROW WITH TIES").is_err());
        assert!(
            rewritten("SELECT a FROM t ORDER BY a OFFSET 1 FETCH FIRST 1 ROW WITH TIES").is_err()
        );
    }
}
