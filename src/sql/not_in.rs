//! A correlated `x NOT IN (SELECT y FROM .. WHERE <correlated>)` in a `WHERE` clause, written
//! as the `NOT EXISTS` it means there:
//!
//! ```text
//! NOT EXISTS (SELECT 1 FROM .. WHERE <correlated> AND (y = x OR y IS NULL OR x IS NULL))
//! ```
//!
//! DataFusion plans `NOT IN` as a null-aware anti join on one key only, so a correlated one
//! (whose correlation adds keys) was refused. In a `WHERE` conjunct the two agree: a row stays
//! when no row of the subquery equals `x` or is NULL, and (if the subquery yields any row) `x`
//! is not NULL; `NOT IN`'s NULL and false both drop the row. Only subqueries that name an outer
//! relation by its qualifier, with no grouping or aggregate, are rewritten; `x` is qualified
//! with the outer relation so the subquery's columns cannot capture its names.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::sql::compat::qualifiers;

/// Rewrites the correlated `NOT IN` conjuncts of every `WHERE` of `statement`.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = statement.visit(&mut NotIn);
}

struct NotIn;

impl VisitorMut for NotIn {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let ast::SetExpr::Select(select) = query.body.as_mut() {
            rewrite_select(select);
        }
        ControlFlow::Continue(())
    }
}

/// The lowercase names and aliases the relations of `from` go by.
fn relation_names(from: &[ast::TableWithJoins]) -> Vec<String> {
    let mut names = Vec::new();
    for table in from {
        for factor in
            std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation))
        {
            match factor {
                ast::TableFactor::Table { name, alias, .. } => {
                    let last = name.0.last().and_then(|p| p.as_ident());
                    names.extend(last.map(|i| i.value.to_lowercase()));
                    names.extend(alias.as_ref().map(|a| a.name.value.to_lowercase()));
                }
                ast::TableFactor::Derived { alias: Some(alias), .. } => {
                    names.push(alias.name.value.to_lowercase());
                }
                _ => {}
            }
        }
    }
    names
}

/// The one name the outer relation goes by, when the outer query reads one relation.
fn only_relation(from: &[ast::TableWithJoins]) -> Option<ast::Ident> {
    let [table] = from else { return None };
    if !table.joins.is_empty() {
        return None;
    }
    match &table.relation {
        ast::TableFactor::Table { alias: Some(alias), .. }
        | ast::TableFactor::Derived { alias: Some(alias), .. } => Some(alias.name.clone()),
        ast::TableFactor::Table { name, alias: None, .. } => {
            name.0.last().and_then(|p| p.as_ident()).cloned()
        }
        _ => None,
    }
}

fn rewrite_select(select: &mut ast::Select) {
    let Some(selection) = select.selection.take() else { return };
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    let outer = only_relation(&select.from);
    for conjunct in &mut conjuncts {
        if let ast::Expr::InSubquery { expr, subquery, negated: true } = conjunct
            && let Some(exists) = not_exists(expr, subquery, outer.as_ref())
        {
            *conjunct = exists;
        }
    }
    select.selection = conjuncts.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
        left: Box::new(a),
        op: ast::BinaryOperator::And,
        right: Box::new(b),
    });
}

fn split_and(expr: ast::Expr, out: &mut Vec<ast::Expr>) {
    match expr {
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            split_and(*left, out);
            split_and(*right, out);
        }
        other => out.push(other),
    }
}

/// Whether `expr` calls a function or holds a subquery (an aggregate cannot move into WHERE).
fn calls_anything(expr: &ast::Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(expr, |e| {
        found |= matches!(e, ast::Expr::Function(_) | ast::Expr::Subquery(_));
        ControlFlow::<()>::Continue(())
    });
    found
}

/// `x` with its unqualified columns qualified by `outer`; `None` when it has some and there is
/// no one outer relation.
fn qualified(x: &ast::Expr, outer: Option<&ast::Ident>) -> Option<ast::Expr> {
    let mut x = x.clone();
    let mut missing = false;
    let _ = ast::visit_expressions_mut(&mut x, |e| {
        if let ast::Expr::Identifier(ident) = e {
            match outer {
                Some(outer) => {
                    *e = ast::Expr::CompoundIdentifier(vec![outer.clone(), ident.clone()]);
                }
                None => missing = true,
            }
        }
        ControlFlow::<()>::Continue(())
    });
    (!missing).then_some(x)
}

fn not_exists(
    x: &ast::Expr,
    subquery: &ast::Query,
    outer: Option<&ast::Ident>,
) -> Option<ast::Expr> {
    let ast::SetExpr::Select(inner) = subquery.body.as_ref() else { return None };
    let plain = subquery.with.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none()
        && inner.having.is_none()
        && matches!(&inner.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    let [item] = inner.projection.as_slice() else { return None };
    let y = match item {
        ast::SelectItem::UnnamedExpr(y) | ast::SelectItem::ExprWithAlias { expr: y, .. } => y,
        _ => return None,
    };
    let names = relation_names(&inner.from);
    let correlated =
        inner.selection.as_ref().is_some_and(|w| qualifiers(w).iter().any(|q| !names.contains(q)));
    if !plain || !correlated || calls_anything(y) || calls_anything(x) {
        return None;
    }
    let x = qualified(x, outer)?;
    let condition = format!("({y} = {x} OR {y} IS NULL OR {x} IS NULL)");
    let condition = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&condition)
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    let mut exists = subquery.clone();
    if let ast::SetExpr::Select(select) = exists.body.as_mut() {
        select.projection = vec![ast::SelectItem::UnnamedExpr(ast::Expr::Value(
            ast::Value::Number("1".into(), false).into(),
        ))];
        let selection = select.selection.take().expect("correlated above");
        select.selection = Some(ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(selection))),
            op: ast::BinaryOperator::And,
            right: Box::new(condition),
        });
    }
    Some(ast::Expr::Exists { subquery: Box::new(exists), negated: true })
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
    fn correlated_not_in_is_not_exists() {
        assert_eq!(
            rewritten(
                "SELECT id FROM t WHERE id NOT IN (SELECT g FROM u WHERE u.k = t.k) AND id > 1"
            ),
            "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE (u.k = t.k) AND (g = t.id OR \
             g IS NULL OR t.id IS NULL)) AND id > 1"
        );
        // Not correlated, under OR, aggregated, or with no one outer relation: left alone.
        for sql in [
            "SELECT id FROM t WHERE id NOT IN (SELECT g FROM u)",
            "SELECT id FROM t WHERE id > 1 OR id NOT IN (SELECT g FROM u WHERE u.k = t.k)",
            "SELECT id FROM t WHERE id NOT IN (SELECT max(g) FROM u WHERE u.k = t.k)",
            "SELECT t.id FROM t JOIN v ON t.a = v.a WHERE id NOT IN (SELECT g FROM u WHERE u.k = t.k)",
        ] {
            assert!(rewritten(sql).contains("NOT IN"), "{sql}");
        }
    }
}
