//! Postgres compatibility: rewrites that make parsed statements plan in DataFusion as they do
//! in Postgres.
//!
//! Clients' catalog queries (psql's `\d`, asyncpg's type introspection, ..) go through the
//! compatibility parser's rules ([`rewrite_queries`]); every statement then gets Sluice's own
//! rewrites ([`rewrite`]): `ARRAY(SELECT ..)`, qualified `unnest`, select-list set-returning
//! functions and catalog subqueries, exponent literals, unconstrained numeric casts, jsonb
//! operators and the output names Postgres gives.

use std::sync::LazyLock;

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;

use crate::sql::names::alias_output_columns;

/// Rewrites Postgres-specific query syntax (psql's catalog queries, `OPERATOR(pg_catalog.~)`,
/// `::regclass`, ...) into forms DataFusion plans.
static PG_COMPAT: LazyLock<PostgresCompatibilityParser> =
    LazyLock::new(PostgresCompatibilityParser::new);

/// asyncpg's type introspection (`WITH RECURSIVE typeinfo_tree(..)`, run for any type it has no
/// codec for, arrays of integers among them): its nested recursive CTEs do not plan in
/// DataFusion.
const ASYNCPG_INTROSPECTION: &str = "WITH RECURSIVE typeinfo_tree(";

/// What Sluice runs for asyncpg's type introspection: the same columns, for the types asked for.
/// Sluice has no domains, ranges or composite types, so a type's base type, range subtype and
/// attributes are always NULL, and the recursion stops at the array element types, which are
/// built in. Its columns have types asyncpg decodes without introspection (`attrtypoids` is
/// `text[]`, always NULL), or it would introspect them, again and again.
const ASYNCPG_INTROSPECTION_ANSWER: &str = "SELECT t.oid AS oid, ns.nspname AS ns, \
    t.typname AS name, t.typtype AS kind, CAST(NULL AS int) AS basetype, t.typelem AS elemtype, \
    elem_t.typdelim AS elemdelim, CAST(NULL AS int) AS range_subtype, \
    CAST(NULL AS text[]) AS attrtypoids, CAST(NULL AS text[]) AS attrnames, 0 AS depth, \
    CAST(NULL AS text) AS basetype_name, elem_t.typname AS elemtype_name, \
    CAST(NULL AS text) AS range_subtype_name \
    FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace ns ON ns.oid = t.typnamespace \
    LEFT JOIN pg_catalog.pg_type elem_t ON t.typelem = elem_t.oid AND t.typelem <> 0 \
    WHERE t.oid = any($1::oid[])";

/// The query Sluice runs in place of a client's catalog query it cannot plan, if `sql` is one.
pub fn client_query_replacement(sql: &str) -> Option<&'static str> {
    sql.trim_start().starts_with(ASYNCPG_INTROSPECTION).then_some(ASYNCPG_INTROSPECTION_ANSWER)
}

/// Rewrites `ARRAY(SELECT e FROM .. ORDER BY o)` as `(SELECT array_agg(e ORDER BY o) FROM ..)`,
/// which DataFusion plans (psql's `\du` and `\d+` use the first form). One difference stays:
/// over no rows the aggregate is NULL where Postgres gives an empty array.
fn array_subqueries(statement: &mut ast::Statement) {
    use std::ops::ControlFlow;

    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Function(f) = expr
            && f.name.to_string().eq_ignore_ascii_case("array")
            && let ast::FunctionArguments::Subquery(query) = &f.args
            && let Some(rewritten) = array_agg_subquery(query)
        {
            *expr = rewritten;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Reads `FROM pg_catalog.unnest(..)` (psql's `\d+` writes it) as `FROM unnest(..)`, which
/// DataFusion plans; qualified, it was looked up as a table function of that name. Names the
/// column of `unnest(a) x` `x` and that of `generate_series(..) [g]` `generate_series` [`g`],
/// as Postgres does.
struct QualifiedUnnest;

impl ast::VisitorMut for QualifiedUnnest {
    type Break = ();

    fn pre_visit_table_factor(
        &mut self,
        factor: &mut ast::TableFactor,
    ) -> std::ops::ControlFlow<()> {
        if let ast::TableFactor::Table { name, alias, args: Some(args), .. } = factor
            && matches!(
                name.to_string().to_ascii_lowercase().as_str(),
                "unnest" | "pg_catalog.unnest"
            )
        {
            let exprs: Option<Vec<ast::Expr>> = args
                .args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            if let Some(array_exprs) = exprs {
                *factor = ast::TableFactor::UNNEST {
                    alias: alias.take(),
                    array_exprs,
                    with_offset: false,
                    with_offset_alias: None,
                    with_ordinality: false,
                };
            }
        }
        // `generate_series(..)` in FROM has one column, called as the function or as its alias.
        if let ast::TableFactor::Table { name, alias, args: Some(_), .. } = factor
            && name.to_string().eq_ignore_ascii_case("generate_series")
        {
            let alias = alias.get_or_insert_with(|| ast::TableAlias {
                explicit: true,
                name: ast::Ident::new("generate_series"),
                columns: Vec::new(),
                at: None,
            });
            if alias.columns.is_empty() {
                alias.columns.push(ast::TableAliasColumnDef::from_name(alias.name.value.clone()));
            }
        }
        // As in Postgres, the one column of `unnest(a) x` is called `x`.
        if let ast::TableFactor::UNNEST { alias: Some(alias), array_exprs, .. } = factor
            && alias.columns.is_empty()
            && array_exprs.len() == 1
        {
            alias
                .columns
                .push(ast::TableAliasColumnDef { name: alias.name.clone(), data_type: None });
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// `SELECT generate_series(..)` returns a row per value in Postgres; DataFusion's function
/// returns one array. In the select list of a query it is unnested, and named as Postgres names
/// it.
fn series_in_select_list(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else { return };
    let is_series = |e: &ast::Expr| matches!(e, ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("generate_series"));
    let unnest = |e: &ast::Expr| {
        Parser::new(&PostgreSqlDialect {})
            .try_with_sql(&format!("unnest({e})"))
            .and_then(|mut p| p.parse_expr())
            .ok()
    };
    for item in &mut select.projection {
        match item {
            ast::SelectItem::UnnamedExpr(e) if is_series(e) => {
                if let Some(expr) = unnest(e) {
                    let alias = ast::Ident::new("generate_series");
                    *item = ast::SelectItem::ExprWithAlias { expr, alias };
                }
            }
            ast::SelectItem::ExprWithAlias { expr, .. } if is_series(expr) => {
                if let Some(unnested) = unnest(expr) {
                    *expr = unnested;
                }
            }
            _ => {}
        }
    }
}

/// In queries of `pg_catalog`, writes a scalar subquery that selects one plain expression, `(SELECT
/// e FROM ..)`, as `(SELECT first_value(e) FROM ..)`: DataFusion plans a correlated scalar
/// subquery only when it aggregates (psql's `\dT` has one). Catalog subqueries of this form
/// look a row up by its OID; in user queries, Postgres's error for a subquery returning more
/// than one row is kept.
fn catalog_scalar_subqueries(statement: &mut ast::Statement) {
    use std::ops::ControlFlow;

    if !statement.to_string().to_ascii_lowercase().contains("pg_catalog.") {
        return;
    }
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Subquery(query) = expr
            && let ast::SetExpr::Select(select) = query.body.as_mut()
            && let [ast::SelectItem::UnnamedExpr(element)] = select.projection.as_slice()
            && !is_aggregate_call(element)
            && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty())
            && let Ok(first) = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&format!("first_value({element})"))
                .and_then(|mut p| p.parse_expr())
        {
            select.projection = vec![ast::SelectItem::UnnamedExpr(first)];
        }
        ControlFlow::<()>::Continue(())
    });
    let _ = ast::VisitMut::visit(statement, &mut CatalogSelectListSubqueries);
}

/// In catalog queries, the correlated subqueries of a select list: one DataFusion decorrelates
/// (one table, correlated only by equalities) has its conditions on the outer row alone moved
/// out (`(SELECT .. WHERE d.k = a.k AND a.flag)` is `CASE WHEN a.flag THEN (SELECT .. WHERE d.k
/// = a.k) END`); any other is NULL, as clients' catalog queries have always been answered here
/// (the column they fill, a collation or a comment, Sluice does not have).
struct CatalogSelectListSubqueries;

impl ast::VisitorMut for CatalogSelectListSubqueries {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> std::ops::ControlFlow<()> {
        if let ast::SetExpr::Select(select) = query.body.as_mut() {
            for item in &mut select.projection {
                if let ast::SelectItem::UnnamedExpr(expr)
                | ast::SelectItem::ExprWithAlias { expr, .. } = item
                    && let ast::Expr::Subquery(subquery) = expr
                    && let Some(rewritten) = decorrelatable(subquery)
                {
                    *expr = rewritten;
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The qualifiers (`t` of `t.c`) an expression names.
pub(crate) fn qualifiers(expr: &ast::Expr) -> Vec<String> {
    let mut out = Vec::new();
    let _ = ast::visit_expressions(expr, |e| {
        if let ast::Expr::CompoundIdentifier(parts) = e
            && parts.len() >= 2
        {
            out.push(parts[parts.len() - 2].value.to_lowercase());
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    out
}

/// What [`CatalogSelectListSubqueries`] puts in place of a select-list subquery; `None` keeps it
/// (it is not correlated).
fn decorrelatable(subquery: &ast::Query) -> Option<ast::Expr> {
    let null = Some(ast::Expr::Value(ast::Value::Null.into()));
    let ast::SetExpr::Select(select) = subquery.body.as_ref() else { return None };
    let mut inner = Vec::new();
    for table in &select.from {
        for factor in
            std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation))
        {
            if let ast::TableFactor::Table { name, alias, .. } = factor {
                let last = name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase());
                inner.extend(last);
                inner.extend(alias.as_ref().map(|a| a.name.value.to_lowercase()));
            }
        }
    }
    let mut conjuncts = Vec::new();
    if let Some(selection) = &select.selection {
        split_and(selection, &mut conjuncts);
    }
    let outer_of = |e: &ast::Expr| qualifiers(e).into_iter().filter(|q| !inner.contains(q)).count();
    let projection_outer: usize = select
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                outer_of(e)
            }
            _ => 0,
        })
        .sum();
    if projection_outer + conjuncts.iter().map(&outer_of).sum::<usize>() == 0 {
        return None;
    }
    let simple = select.from.len() == 1 && select.from[0].joins.is_empty() && projection_outer == 0;
    if !simple {
        return null;
    }
    let mut outer_only = Vec::new();
    let mut kept = Vec::new();
    for conjunct in conjuncts {
        let names = qualifiers(&conjunct);
        let outer = names.iter().filter(|q| !inner.contains(q)).count();
        if outer == 0 {
            kept.push(conjunct);
        } else if outer == names.len() {
            outer_only.push(conjunct);
        } else if matches!(&conjunct, ast::Expr::BinaryOp { op: ast::BinaryOperator::Eq, left, right }
            if outer_of(left) + outer_of(right) == 1 && qualifiers(left).len() == 1 && qualifiers(right).len() == 1)
        {
            kept.push(conjunct);
        } else {
            return null;
        }
    }
    let mut query = subquery.clone();
    if let ast::SetExpr::Select(select) = query.body.as_mut() {
        select.selection = kept.into_iter().reduce(|a, b| ast::Expr::BinaryOp {
            left: Box::new(a),
            op: ast::BinaryOperator::And,
            right: Box::new(b),
        });
    }
    let sub = ast::Expr::Subquery(Box::new(query));
    if outer_only.is_empty() {
        return Some(sub);
    }
    let condition = outer_only.iter().map(ToString::to_string).collect::<Vec<_>>().join(" AND ");
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("CASE WHEN {condition} THEN {sub} END"))
        .and_then(|mut p| p.parse_expr())
        .ok()
        .or(null)
}

/// The conjuncts of `expr` (`a AND b AND c`).
fn split_and(expr: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match expr {
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            split_and(left, out);
            split_and(right, out);
        }
        ast::Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other.clone()),
    }
}

/// Whether `expr` calls an aggregate function (of those catalog queries use).
fn is_aggregate_call(expr: &ast::Expr) -> bool {
    const AGGREGATES: &[&str] = &[
        "count",
        "sum",
        "min",
        "max",
        "avg",
        "array_agg",
        "string_agg",
        "bool_and",
        "bool_or",
        "first_value",
        "last_value",
    ];
    matches!(expr, ast::Expr::Function(f)
    if f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|name| {
        AGGREGATES.iter().any(|a| name.value.eq_ignore_ascii_case(a))
    }))
}

/// The `array_agg` form of the subquery of `ARRAY(query)`, when it selects one expression.
fn array_agg_subquery(query: &ast::Query) -> Option<ast::Expr> {
    // psql's `\d+` lists a TOAST table's storage options with `ARRAY(SELECT 'toast.' || x FROM
    // unnest(tc.reloptions) x)`; DataFusion cannot unnest a column of the outer query. Sluice's
    // relations have no storage options (`reloptions` is NULL), so the array is empty.
    if query.to_string().to_ascii_lowercase().contains("unnest(tc.reloptions)") {
        return Some(ast::Expr::Value(ast::Value::Null.into()));
    }
    let mut query = query.clone();
    let order = query.order_by.take().map(|o| format!(" {o}")).unwrap_or_default();
    let ast::SetExpr::Select(select) = query.body.as_mut() else { return None };
    let [item] = select.projection.as_slice() else { return None };
    let element = match item {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return None,
    };
    let aggregate = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("array_agg({element}{order})"))
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    select.projection = vec![ast::SelectItem::UnnamedExpr(aggregate)];
    Some(ast::Expr::Subquery(Box::new(query)))
}

/// The login role's functions, written without parentheses: all read the session's user.
const USER_FUNCTIONS: &[&str] = &["current_user", "session_user", "user", "current_role"];

/// Names the output columns of `current_user`, `session_user`, `user` and `current_role` as
/// Postgres names them, and calls all four `session_user`, the one DataFusion has (which Sluice
/// answers with the login role, see `engine::query`).
pub fn name_user_functions(statement: &mut ast::Statement) {
    use std::ops::ControlFlow;

    // Reserved words in Postgres, so never a column: the parser reads `user` and
    // `current_role` as names, the others as functions.
    let user_function = |expr: &ast::Expr| match expr {
        ast::Expr::Function(f) if matches!(f.args, ast::FunctionArguments::None) => {
            let name = f.name.to_string().to_lowercase();
            USER_FUNCTIONS.contains(&name.as_str()).then_some(name)
        }
        ast::Expr::Identifier(ident) if ident.quote_style.is_none() => {
            let name = ident.value.to_lowercase();
            USER_FUNCTIONS.contains(&name.as_str()).then_some(name)
        }
        _ => None,
    };
    let Ok(session_user) = Parser::new(&PostgreSqlDialect {})
        .try_with_sql("session_user")
        .and_then(|mut p| p.parse_expr())
    else {
        return;
    };
    if let ast::Statement::Query(query) = statement
        && let ast::SetExpr::Select(select) = query.body.as_mut()
    {
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(expr) = item
                && let Some(name) = user_function(expr)
            {
                let alias = ast::Ident::with_quote('"', name);
                *item = ast::SelectItem::ExprWithAlias { expr: expr.clone(), alias };
            }
        }
    }
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if user_function(expr).is_some() {
            *expr = session_user.clone();
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Writes numeric literals with an exponent (`1e10`, `2.5E-3`) out in full (`10000000000`,
/// `0.0025`). Postgres reads them as exact `numeric`; DataFusion would read them as decimals
/// of negative scale (`1e10` as `Decimal128(1, -10)`), which compare and convert wrongly
/// (`1e10 = 1e10` was false, `1e15::float8` was `999999999999999.9`). Literals too long to
/// write out within a numeric's 76 digits become doubles.
fn expand_exponent_literals(statement: &mut ast::Statement) {
    use std::ops::ControlFlow;

    let _ = ast::visit_expressions_mut(statement, |expr| {
        let ast::Expr::Value(ast::ValueWithSpan { value: ast::Value::Number(text, _), .. }) = expr
        else {
            return ControlFlow::<()>::Continue(());
        };
        if !text.contains(['e', 'E']) {
            return ControlFlow::Continue(());
        }
        match without_exponent(text) {
            Some(plain) => *text = plain,
            // Beyond a numeric's 76 digits (`1e300`): a double, which holds it; Postgres's
            // numeric would hold it exactly, Sluice's cannot.
            None => {
                let literal = ast::Value::SingleQuotedString(text.clone());
                *expr = ast::Expr::Cast {
                    kind: ast::CastKind::DoubleColon,
                    expr: Box::new(ast::Expr::Value(literal.into())),
                    data_type: ast::DataType::DoublePrecision,
                    array: false,
                    format: None,
                };
            }
        }
        ControlFlow::Continue(())
    });
}

/// Casts to `numeric` without a precision cast to Sluice's unconstrained numeric
/// ([`crate::types::DEFAULT_NUMERIC`], 76 digits), as a column declared `numeric` holds, rather
/// than DataFusion's 38 digits.
fn unconstrained_numeric_casts(statement: &mut ast::Statement) {
    use std::ops::ControlFlow;
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Cast { data_type, .. } = expr
            && let ast::DataType::Numeric(info)
            | ast::DataType::Decimal(info)
            | ast::DataType::Dec(info) = data_type
            && *info == ast::ExactNumberInfo::None
        {
            let (precision, scale) = crate::types::DEFAULT_NUMERIC;
            *info = ast::ExactNumberInfo::PrecisionAndScale(precision as u64, scale as i64);
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `text` (a number literal) written without its exponent, if it has one and the result has
/// at most 76 digits.
fn without_exponent(text: &str) -> Option<String> {
    let (mantissa, exponent) = text.split_once(['e', 'E'])?;
    let exponent: i64 = exponent.parse().ok()?;
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if !(int_part.bytes().chain(frac_part.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some("0".to_owned());
    }
    // Where the decimal point falls, counted in digits from the first significant one.
    let leading_zeros = int_part.len() + frac_part.len() - digits.len();
    let point = int_part.len() as i64 - leading_zeros as i64 + exponent;
    let written = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    let significant = written.bytes().filter(u8::is_ascii_digit).count();
    (significant <= crate::types::numeric::MAX_PRECISION as usize).then_some(written)
}

/// The deepest bracket nesting that the compatibility parser re-parses. It parses with the plain
/// Postgres dialect, whose work doubles with each level of nested function calls.
const MAX_COMPAT_PARSE_DEPTH: usize = 12;

/// `queries` (all of `sql`) as the compatibility parser rewrites them.
///
/// The compatibility parser replaces some clients' catalog queries whole, by their tokens; all
/// of them read `pg_catalog` tables or `current_setting`, so only such input is parsed again by
/// it. Other queries get its rewrites of the syntax tree.
pub fn rewrite_queries(
    sql: &str,
    depth: usize,
    queries: Vec<ast::Statement>,
) -> Vec<ast::Statement> {
    let lower = sql.to_ascii_lowercase();
    if depth <= MAX_COMPAT_PARSE_DEPTH
        && (lower.contains("pg_") || lower.contains("current_setting"))
        && let Ok(rewritten) = PG_COMPAT.parse(sql)
        && rewritten.len() == queries.len()
        && let Ok(plain) = Parser::parse_sql(&PostgreSqlDialect {}, sql)
    {
        // `parse` replaced a client's query whole when its result differs from the rules
        // applied to the plain parse; otherwise Sluice's rules apply to the plain parse.
        let replaced = plain.iter().cloned().map(|s| PG_COMPAT.rewrite(s)).ne(rewritten.clone());
        return match replaced {
            true => rewritten,
            false => plain.into_iter().map(compat_rewrite).collect(),
        };
    }
    queries.into_iter().map(compat_rewrite).collect()
}

/// Sluice's own rewrites of a parsed statement, after the compatibility parser's.
pub fn rewrite(stmt: &mut ast::Statement) {
    expand_exponent_literals(stmt);
    unconstrained_numeric_casts(stmt);
    crate::sql::interval::rewrite(stmt);
    array_subqueries(stmt);
    let _ = ast::VisitMut::visit(stmt, &mut QualifiedUnnest);
    catalog_scalar_subqueries(stmt);
    crate::sql::jsonb::rewrite_operators(stmt);
    if let ast::Statement::Query(query) = stmt {
        series_in_select_list(query);
        alias_output_columns(query);
    }
    crate::sql::math::rewrite(stmt);
    crate::sql::format::rewrite(stmt);
}

/// The compatibility parser's syntax rewrites, in its order, less `RemoveSubqueryFromProjection`:
/// that one replaced every correlated subquery of a select list by NULL, a wrong result
/// (`SELECT k, (SELECT max(v) FROM b WHERE b.k = a.k) FROM a` gave NULLs).
static COMPAT_RULES: LazyLock<Vec<Box<dyn SqlStatementRewriteRule>>> = LazyLock::new(|| {
    use datafusion_pg_catalog::sql::rules::*;
    vec![
        Box::new(AliasDuplicatedProjectionRewrite),
        Box::new(ResolveUnqualifiedIdentifier),
        Box::new(RewriteArrayAnyAllOperation),
        Box::new(PrependUnqualifiedPgTableName),
        Box::new(StripCallableQualifier),
        Box::new(FixArrayLiteral),
        Box::new(CurrentUserVariableToSessionUserFunctionCall),
        Box::new(StripCollate),
        Box::new(RewritePgCatalogOperator),
        Box::new(RewriteRegCastToSubquery::new()),
        Box::new(FixVersionColumnName),
    ]
});

/// Applies [`COMPAT_RULES`], after Sluice's reading of array literals (whose element lists
/// those rules would split at every comma).
fn compat_rewrite(mut statement: ast::Statement) -> ast::Statement {
    crate::sql::array_literals::rewrite(&mut statement);
    COMPAT_RULES.iter().fold(statement, |s, rule| rule.rewrite(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exponent_literals_out() {
        for (text, written) in [
            ("1e10", Some("10000000000")),
            ("1E+3", Some("1000")),
            ("2.5e-3", Some("0.0025")),
            ("12.5e1", Some("125")),
            ("0.0015e2", Some("0.15")),
            ("123.456e-1", Some("12.3456")),
            ("0e5", Some("0")),
            ("1e-4", Some("0.0001")),
            ("1e300", None),
            ("12.5", None),
        ] {
            assert_eq!(without_exponent(text).as_deref(), written, "{text}");
        }
    }
}
