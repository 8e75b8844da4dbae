//! `EXISTS (subquery)` where DataFusion does not plan it: anywhere but a conjunct of `WHERE`
//! (a select list, `CASE`, under `OR`, `HAVING`), where it failed with "Physical plan does not
//! support logical expression Exists". There it is written as a count:
//!
//! ```text
//! EXISTS (SELECT .. FROM f WHERE w)      =>  (SELECT count(*) FROM f WHERE w) > 0
//! NOT EXISTS (SELECT .. FROM f WHERE w)  =>  (SELECT count(*) FROM f WHERE w) = 0
//! ```
//!
//! a scalar subquery DataFusion decorrelates (its count is 0 where no row matches), in batch
//! queries and views alike. A subquery with grouping, `DISTINCT`, a limit or a set operation is
//! counted as a derived table (it cannot be correlated then). `EXISTS` conjuncts of `WHERE`
//! stay: they are semi and anti joins.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Rewrites the `EXISTS` of `statement` that are not `WHERE` conjuncts.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = statement.visit(&mut Exists);
}

struct Exists;

impl VisitorMut for Exists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let ast::SetExpr::Select(select) = query.body.as_mut() {
            for item in &mut select.projection {
                if let ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    counted(e);
                }
            }
            if let Some(having) = &mut select.having {
                counted(having);
            }
            if let Some(selection) = &mut select.selection {
                conjuncts_counted(selection);
            }
        }
        ControlFlow::Continue(())
    }
}

/// The `EXISTS` in `expr` below its top-level `AND`s written as counts.
fn conjuncts_counted(expr: &mut ast::Expr) {
    match expr {
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            conjuncts_counted(left);
            conjuncts_counted(right);
        }
        ast::Expr::Nested(inner) => conjuncts_counted(inner),
        ast::Expr::Exists { .. } => {}
        other => counted(other),
    }
}

/// Every `EXISTS` in `expr` written as a count.
fn counted(expr: &mut ast::Expr) {
    let _ = ast::visit_expressions_mut(expr, |e| {
        if let ast::Expr::Exists { subquery, negated } = e
            && let Some(count) = count_of(subquery, *negated)
        {
            *e = count;
        }
        ControlFlow::<()>::Continue(())
    });
}

fn count_of(subquery: &ast::Query, negated: bool) -> Option<ast::Expr> {
    let compare = if negated { "= 0" } else { "> 0" };
    let simple = match subquery.body.as_ref() {
        ast::SetExpr::Select(select) => {
            subquery.with.is_none()
                && subquery.limit_clause.is_none()
                && subquery.fetch.is_none()
                && select.distinct.is_none()
                && select.having.is_none()
                && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty())
        }
        _ => false,
    };
    let sql = match simple {
        true => {
            let mut count = subquery.clone();
            if let ast::SetExpr::Select(select) = count.body.as_mut() {
                select.projection = vec![ast::SelectItem::UnnamedExpr(parse("count(*)")?)];
            }
            count.order_by = None;
            format!("(({count}) {compare})")
        }
        false => format!("((SELECT count(*) FROM ({subquery}) AS __sluice_exists) {compare})"),
    };
    parse(&sql)
}

fn parse(sql: &str) -> Option<ast::Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).and_then(|mut p| p.parse_expr()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn exists_outside_where_conjuncts_is_a_count() {
        assert_eq!(
            rewritten("SELECT id, EXISTS (SELECT 1 FROM u WHERE u.k = t.k) AS e FROM t"),
            "SELECT id, ((SELECT count(*) FROM u WHERE u.k = t.k) > 0) AS e FROM t"
        );
        assert_eq!(
            rewritten("SELECT id FROM t WHERE id > 1 OR NOT EXISTS (SELECT 1 FROM u)"),
            "SELECT id FROM t WHERE id > 1 OR ((SELECT count(*) FROM u) = 0)"
        );
        assert_eq!(
            rewritten("SELECT EXISTS (SELECT DISTINCT k FROM u)"),
            "SELECT ((SELECT count(*) FROM (SELECT DISTINCT k FROM u) AS __sluice_exists) > 0)"
        );
        // WHERE conjuncts are semi and anti joins: left alone.
        let kept = "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k) AND id > 1";
        assert_eq!(rewritten(kept), kept);
    }
}
