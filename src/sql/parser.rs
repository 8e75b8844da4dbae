//! Sluice's statement parser: sqlparser's Postgres dialect plus Sluice's own statements.
//!
//! Statements sqlparser knows come back as [`Statement::Sql`]; the few that it does not are
//! recognised by their leading keywords before falling through to sqlparser, so Sluice extends
//! the grammar without forking the parser.

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use std::sync::LazyLock;

use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;

use crate::error::{Error, Result};
use crate::sql::dialect::SluiceDialect;
use crate::sql::names::alias_output_columns;

/// One parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// A statement of sqlparser's Postgres grammar.
    Sql(Box<ast::Statement>),
    /// `FLUSH`: force a checkpoint and wait until it is committed.
    Flush,
    /// `SHOW INTERNAL TABLES`: the state tables of streaming jobs.
    ShowInternalTables,
    /// `CREATE SOURCE [IF NOT EXISTS] name WITH (key = value, ..)`; keys may be dotted.
    CreateSource {
        /// The source's name.
        name: ast::ObjectName,
        /// `IF NOT EXISTS` was given.
        if_not_exists: bool,
        /// Options in the order written, values unquoted.
        options: Vec<(String, String)>,
    },
    /// `DROP SOURCE [IF EXISTS] name`.
    DropSource {
        /// The source's name.
        name: ast::ObjectName,
        /// `IF EXISTS` was given.
        if_exists: bool,
    },
    /// `CREATE TABLE name (columns | *) [WITH (..)] FROM source TABLE 'schema.table'`.
    CreateTableFrom {
        /// The table as declared; no columns when declared with `(*)`.
        table: Box<ast::CreateTable>,
        /// The source to read from.
        source: ast::ObjectName,
        /// The upstream table, schema-qualified.
        external: String,
    },
    /// `SHOW SOURCES`.
    ShowSources,
    /// `EXPLAIN CREATE TABLE .. FROM source TABLE '..'`.
    ExplainCreateTableFrom(Box<Statement>),
    /// `SHOW JOBS`: the jobs still creating.
    ShowJobs,
    /// `WAIT`: block until no job is creating.
    Wait,
    /// `CANCEL JOBS id, ..` (also `CANCEL JOB id`).
    CancelJobs(Vec<u32>),
    /// `ALTER {TABLE | MATERIALIZED VIEW} name SET setting {= | TO} {n | DEFAULT}`.
    AlterSet {
        /// `TABLE` or `MATERIALIZED VIEW`.
        materialized_view: bool,
        /// The relation.
        name: ast::ObjectName,
        /// What is set.
        setting: AlterSetting,
        /// The value; `None` for `DEFAULT`.
        value: Option<i64>,
    },
}

/// A setting of a streaming job that `ALTER .. SET` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterSetting {
    /// `BACKFILL_RATE_LIMIT`: snapshot rows per second per actor.
    BackfillRateLimit,
    /// `PARALLELISM`: actors per fragment.
    Parallelism,
}

/// Rewrites Postgres-specific query syntax (psql's catalog queries, `OPERATOR(pg_catalog.~)`,
/// `::regclass`, ...) into forms DataFusion plans.
static PG_COMPAT: LazyLock<PostgresCompatibilityParser> =
    LazyLock::new(PostgresCompatibilityParser::new);

/// Parses a string of `;`-separated statements.
///
/// Input made only of queries additionally goes through the Postgres compatibility rewrites, so
/// clients' catalog queries plan in DataFusion.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let sql = client_query_replacement(sql).unwrap_or(sql);
    let (statements, depth) = parse_sluice(sql)?;
    for statement in &statements {
        if let Statement::Sql(stmt) = statement {
            check_depth(stmt)?;
            check_scalar_subqueries(stmt)?;
        }
    }
    let mut statements = statements;
    for statement in &mut statements {
        if let Statement::Sql(stmt) = statement {
            name_user_functions(stmt);
        }
    }
    let mut statements = with_compat_rewrites(sql, statements, depth);
    for statement in &mut statements {
        if let Statement::Sql(stmt) = statement {
            expand_exponent_literals(stmt);
            unconstrained_numeric_casts(stmt);
            array_subqueries(stmt);
            let _ = ast::VisitMut::visit(stmt.as_mut(), &mut QualifiedUnnest);
            catalog_scalar_subqueries(stmt);
            crate::sql::jsonb::rewrite_operators(stmt);
            if let ast::Statement::Query(query) = stmt.as_mut() {
                series_in_select_list(query);
                alias_output_columns(query);
            }
        }
    }
    Ok(statements)
}

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
fn client_query_replacement(sql: &str) -> Option<&'static str> {
    sql.trim_start().starts_with(ASYNCPG_INTROSPECTION).then_some(ASYNCPG_INTROSPECTION_ANSWER)
}

/// The deepest nesting of expressions a statement may have. Planning and evaluating recurse
/// over expressions; far deeper ones (a chain of thousands of `OR`s) would overflow the stack.
pub const MAX_EXPR_DEPTH: usize = 500;

/// The deepest nesting of parentheses and brackets a statement may have. The parser backtracks
/// through nested constructs; near its own recursion limit that takes exponential time.
pub const MAX_BRACKET_DEPTH: usize = 40;

/// Refuses statements nesting brackets deeper than [`MAX_BRACKET_DEPTH`] (54001); returns the
/// deepest nesting.
fn check_brackets(tokens: &[TokenWithSpan]) -> Result<usize> {
    let mut depth = 0usize;
    let mut deepest = 0;
    for token in tokens {
        match token.token {
            Token::LParen | Token::LBracket => {
                depth += 1;
                deepest = deepest.max(depth);
                if depth > MAX_BRACKET_DEPTH {
                    return Err(Error::ProgramLimit(format!(
                        "parentheses nest deeper than {MAX_BRACKET_DEPTH} levels; split the \
                         statement"
                    )));
                }
            }
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(deepest)
}

/// The deepest nesting of queries (subqueries in subqueries) a statement may have: planning
/// time grows exponentially with it (16 levels take longer than a client waits).
pub const MAX_QUERY_DEPTH: usize = 10;

/// Refuses a statement whose expressions nest deeper than [`MAX_EXPR_DEPTH`] or whose queries
/// nest deeper than [`MAX_QUERY_DEPTH`] (54001, as Postgres's `stack depth limit exceeded`).
/// A scalar subquery that selects no column (`(SELECT FROM t)`) is refused as Postgres refuses
/// it (42601); DataFusion's planner panicked on it.
fn check_scalar_subqueries(statement: &ast::Statement) -> Result<()> {
    use std::ops::ControlFlow;
    let empty = ast::visit_expressions(statement, |expr| match expr {
        ast::Expr::Subquery(query) if matches!(query.body.as_ref(), ast::SetExpr::Select(s) if s.projection.is_empty()) => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    });
    match empty {
        ControlFlow::Break(()) => {
            Err(Error::InvalidStatement("subquery must return only one column".into()))
        }
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn check_depth(statement: &ast::Statement) -> Result<()> {
    use std::ops::ControlFlow;

    use datafusion::sql::sqlparser::ast::{Visit, Visitor};

    #[derive(Default)]
    struct Depth {
        exprs: usize,
        queries: usize,
    }
    enum TooDeep {
        Exprs,
        Queries,
    }
    impl Visitor for Depth {
        type Break = TooDeep;
        fn pre_visit_expr(&mut self, _: &ast::Expr) -> ControlFlow<TooDeep> {
            self.exprs += 1;
            match self.exprs > MAX_EXPR_DEPTH {
                true => ControlFlow::Break(TooDeep::Exprs),
                false => ControlFlow::Continue(()),
            }
        }
        fn post_visit_expr(&mut self, _: &ast::Expr) -> ControlFlow<TooDeep> {
            self.exprs -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<TooDeep> {
            self.queries += 1;
            match self.queries > MAX_QUERY_DEPTH {
                true => ControlFlow::Break(TooDeep::Queries),
                false => ControlFlow::Continue(()),
            }
        }
        fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<TooDeep> {
            self.queries -= 1;
            ControlFlow::Continue(())
        }
    }
    match statement.visit(&mut Depth::default()) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(TooDeep::Exprs) => Err(Error::ProgramLimit(format!(
            "expressions nest deeper than {MAX_EXPR_DEPTH} levels; use IN (..) instead of long \
             chains of OR, or split the expression"
        ))),
        ControlFlow::Break(TooDeep::Queries) => Err(Error::ProgramLimit(format!(
            "subqueries nest deeper than {MAX_QUERY_DEPTH} levels; flatten the query"
        ))),
    }
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
fn qualifiers(expr: &ast::Expr) -> Vec<String> {
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
fn name_user_functions(statement: &mut ast::Statement) {
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
    (significant <= crate::numeric::MAX_PRECISION as usize).then_some(written)
}

/// The deepest bracket nesting that the compatibility parser re-parses. It parses with the plain
/// Postgres dialect, whose work doubles with each level of nested function calls.
const MAX_COMPAT_PARSE_DEPTH: usize = 12;

/// Applies the Postgres-compatibility rewrites when all statements are queries.
///
/// The compatibility parser replaces some clients' catalog queries whole, by their tokens; all
/// of them read `pg_catalog` tables or `current_setting`, so only such input is parsed again by
/// it. Other queries get its rewrites of the syntax tree.
fn with_compat_rewrites(sql: &str, statements: Vec<Statement>, depth: usize) -> Vec<Statement> {
    let only_queries = statements
        .iter()
        .all(|s| matches!(s, Statement::Sql(s) if matches!(**s, ast::Statement::Query(_))));
    if !only_queries {
        return statements;
    }
    let lower = sql.to_ascii_lowercase();
    if depth <= MAX_COMPAT_PARSE_DEPTH
        && (lower.contains("pg_") || lower.contains("current_setting"))
        && let Ok(rewritten) = PG_COMPAT.parse(sql)
        && rewritten.len() == statements.len()
        && let Ok(plain) = Parser::parse_sql(&PostgreSqlDialect {}, sql)
    {
        // `parse` replaced a client's query whole when its result differs from the rules
        // applied to the plain parse; otherwise Sluice's rules apply to the plain parse.
        let replaced = plain.iter().cloned().map(|s| PG_COMPAT.rewrite(s)).ne(rewritten.clone());
        let statements = match replaced {
            true => rewritten,
            false => plain.into_iter().map(compat_rewrite).collect(),
        };
        return statements.into_iter().map(|s| Statement::Sql(Box::new(s))).collect();
    }
    statements
        .into_iter()
        .map(|s| match s {
            Statement::Sql(s) => Statement::Sql(Box::new(compat_rewrite(*s))),
            other => other,
        })
        .collect()
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

/// Applies [`COMPAT_RULES`].
fn compat_rewrite(statement: ast::Statement) -> ast::Statement {
    COMPAT_RULES.iter().fold(statement, |s, rule| rule.rewrite(s))
}

/// Parses with Sluice's statements and dialect; also returns the deepest bracket nesting.
fn parse_sluice(sql: &str) -> Result<(Vec<Statement>, usize)> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| Error::Parse(e.to_string()))?;
    let depth = check_brackets(&tokens)?;
    let dialect = SluiceDialect::for_tokens(tokens.len());
    let parser = Parser::new(&dialect).with_tokens_with_locations(join_dotted_option_keys(tokens));
    let statements = parse_all(parser).map_err(|e| match e {
        _ if dialect.exhausted() => too_complex(),
        Error::Parse(m) if m.contains("recursion limit exceeded") => too_complex(),
        e => e,
    })?;
    Ok((statements, depth))
}

/// The error for a statement whose parse would take too long or nest too deep (54001).
fn too_complex() -> Error {
    Error::ProgramLimit("statement too complex to parse; split it into smaller ones".into())
}

/// Parses statements until the end of the input.
fn parse_all(mut parser: Parser<'_>) -> Result<Vec<Statement>> {
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        statements.push(parse_one(&mut parser)?);
        let next = parser.peek_token();
        if !matches!(next.token, Token::SemiColon | Token::EOF) {
            return Err(Error::Parse(format!("expected end of statement, found: {next}")));
        }
    }
    Ok(statements)
}

fn parse_one(parser: &mut Parser<'_>) -> Result<Statement> {
    if parser.parse_keyword(Keyword::FLUSH) {
        return Ok(Statement::Flush);
    }
    if parse_words(parser, &["SHOW", "INTERNAL", "TABLES"]) {
        return Ok(Statement::ShowInternalTables);
    }
    if parse_words(parser, &["SHOW", "SOURCES"]) {
        return Ok(Statement::ShowSources);
    }
    if parse_words(parser, &["SHOW", "JOBS"]) {
        return Ok(Statement::ShowJobs);
    }
    if parse_words(parser, &["WAIT"]) {
        return Ok(Statement::Wait);
    }
    if parse_words(parser, &["CANCEL", "JOBS"]) || parse_words(parser, &["CANCEL", "JOB"]) {
        let mut ids = Vec::new();
        loop {
            let token = parser.next_token();
            match &token.token {
                Token::Number(n, _) => ids.push(n.parse::<u32>().map_err(|_| {
                    Error::Parse(format!("a job id is a positive integer, not {n}"))
                })?),
                other => return Err(Error::Parse(format!("expected a job id, found: {other}"))),
            }
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        return Ok(Statement::CancelJobs(ids));
    }
    if let Some(statement) = parse_alter_set(parser)? {
        return Ok(statement);
    }
    if parse_words(parser, &["CREATE", "SOURCE"]) {
        let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        let name = parser.parse_object_name(false)?;
        parser.expect_keyword(Keyword::WITH)?;
        let options = parse_options(parser)?;
        return Ok(Statement::CreateSource { name, if_not_exists, options });
    }
    if parse_words(parser, &["DROP", "SOURCE"]) {
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_object_name(false)?;
        return Ok(Statement::DropSource { name, if_exists });
    }
    if let Some(statement) = parse_create_table_star(parser)? {
        return Ok(statement);
    }
    let is_word = |parser: &Parser<'_>, n: usize, word: &str| matches!(&parser.peek_nth_token(n).token, Token::Word(w) if w.value.eq_ignore_ascii_case(word));
    if is_word(parser, 0, "EXPLAIN") && is_word(parser, 1, "CREATE") && is_word(parser, 2, "TABLE")
    {
        parser.next_token();
        let inner = parse_one(parser)?;
        return match inner {
            Statement::CreateTableFrom { .. } => {
                Ok(Statement::ExplainCreateTableFrom(Box::new(inner)))
            }
            _ => Err(Error::Unsupported("EXPLAIN of a CREATE TABLE without FROM a source".into())),
        };
    }
    let statement = parser.parse_statement()?;
    if let ast::Statement::CreateTable(table) = &statement
        && parser.parse_keyword(Keyword::FROM)
    {
        let (source, external) = parse_from_source(parser)?;
        return Ok(Statement::CreateTableFrom { table: Box::new(table.clone()), source, external });
    }
    Ok(Statement::Sql(Box::new(statement)))
}

/// Inside `WITH ( .. )`, turns dotted option keys (`database.name = ..`) into one quoted
/// identifier, so sqlparser's option parsing (one identifier per key) accepts them.
fn join_dotted_option_keys(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant = |t: &TokenWithSpan| !matches!(t.token, Token::Whitespace(_));
    let tokens: Vec<TokenWithSpan> = tokens.into_iter().filter(significant).collect();
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut in_options = false;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i].token;
        let after_with = matches!(out.last().map(|t| &t.token), Some(Token::Word(w)) if w.keyword == Keyword::WITH);
        if *token == Token::LParen && after_with {
            in_options = true;
        } else if *token == Token::RParen {
            in_options = false;
        }
        let starts_key = matches!(out.last().map(|t| &t.token), Some(Token::LParen | Token::Comma));
        if in_options && starts_key && matches!(token, Token::Word(_)) {
            let mut parts = Vec::new();
            let mut j = i;
            while let Token::Word(w) = &tokens[j].token {
                parts.push(w.value.clone());
                if tokens.get(j + 1).map(|t| &t.token) == Some(&Token::Period)
                    && j + 2 < tokens.len()
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if parts.len() > 1 && tokens.get(j + 1).map(|t| &t.token) == Some(&Token::Eq) {
                let word = Token::make_word(&parts.join("."), Some('"'));
                out.push(TokenWithSpan::new(word, tokens[i].span));
                i = j + 1;
                continue;
            }
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// `FROM` has been read: `source TABLE 'schema.table'`.
fn parse_from_source(parser: &mut Parser<'_>) -> Result<(ast::ObjectName, String)> {
    let source = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::TABLE)?;
    let external = parser.parse_literal_string()?;
    Ok((source, external))
}

/// `CREATE TABLE [IF NOT EXISTS] name (*) [WITH (..)] FROM source TABLE '..'`, which sqlparser
/// cannot read because of the `(*)`.
fn parse_create_table_star(parser: &mut Parser<'_>) -> Result<Option<Statement>> {
    let words = |n: usize| match &parser.peek_nth_token(n).token {
        Token::Word(w) => w.value.to_uppercase(),
        _ => String::new(),
    };
    if words(0) != "CREATE" || words(1) != "TABLE" {
        return Ok(None);
    }
    // Find `( * )` right after the name, without consuming anything otherwise.
    let mut at = 2;
    if words(2) == "IF" && words(3) == "NOT" && words(4) == "EXISTS" {
        at = 5;
    }
    // The name: word (. word)*
    let mut i = at + 1;
    while parser.peek_nth_token(i).token == Token::Period {
        i += 2;
    }
    let star = parser.peek_nth_token(i).token == Token::LParen
        && parser.peek_nth_token(i + 1).token == Token::Mul
        && parser.peek_nth_token(i + 2).token == Token::RParen;
    if !star {
        return Ok(None);
    }
    parser.next_token();
    parser.next_token();
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    for _ in 0..3 {
        parser.next_token();
    }
    let with_options =
        if parser.parse_keyword(Keyword::WITH) { parse_options(parser)? } else { Vec::new() };
    parser.expect_keyword(Keyword::FROM)?;
    let (source, external) = parse_from_source(parser)?;
    // Re-express as a column-less CREATE TABLE carrying the options.
    let options: Vec<String> = with_options
        .iter()
        .map(|(k, v)| format!("\"{k}\" = '{}'", v.replace('\'', "''")))
        .collect();
    let with =
        if options.is_empty() { String::new() } else { format!(" WITH ({})", options.join(", ")) };
    let sql = format!(
        "CREATE TABLE {}{name} (){with}",
        if if_not_exists { "IF NOT EXISTS " } else { "" }
    );
    let ast::Statement::CreateTable(table) =
        Parser::new(&SluiceDialect::for_sql(&sql)).try_with_sql(&sql)?.parse_statement()?
    else {
        unreachable!("a CREATE TABLE parses as one")
    };
    Ok(Some(Statement::CreateTableFrom { table: Box::new(table), source, external }))
}

/// `ALTER {TABLE | MATERIALIZED VIEW} name SET {BACKFILL_RATE_LIMIT | PARALLELISM} {= | TO}
/// {n | DEFAULT}`; other ALTER statements are left to sqlparser.
fn parse_alter_set(parser: &mut Parser<'_>) -> Result<Option<Statement>> {
    let word = |n: usize| match &parser.peek_nth_token(n).token {
        Token::Word(w) => w.value.to_uppercase(),
        _ => String::new(),
    };
    if word(0) != "ALTER" {
        return Ok(None);
    }
    let (materialized_view, name_at) = match (word(1).as_str(), word(2).as_str()) {
        ("TABLE", _) => (false, 2),
        ("MATERIALIZED", "VIEW") => (true, 3),
        _ => return Ok(None),
    };
    // The name: word (. word)*, then SET and the setting.
    let mut i = name_at + 1;
    while parser.peek_nth_token(i).token == Token::Period {
        i += 2;
    }
    let setting = match (word(i).as_str(), word(i + 1).as_str()) {
        ("SET", "BACKFILL_RATE_LIMIT") => AlterSetting::BackfillRateLimit,
        ("SET", "PARALLELISM") => AlterSetting::Parallelism,
        _ => return Ok(None),
    };
    for _ in 0..name_at {
        parser.next_token();
    }
    let name = parser.parse_object_name(false)?;
    parser.next_token();
    parser.next_token();
    if !parser.consume_token(&Token::Eq) && !parser.parse_keyword(Keyword::TO) {
        return Err(Error::Parse(format!("expected = or TO, found: {}", parser.peek_token())));
    }
    let value = if parser.parse_keyword(Keyword::DEFAULT) {
        None
    } else {
        let negative = parser.consume_token(&Token::Minus);
        let token = parser.next_token();
        let Token::Number(n, _) = &token.token else {
            return Err(Error::Parse(format!("expected a number or DEFAULT, found: {token}")));
        };
        let n: i64 =
            n.parse().map_err(|_| Error::Parse(format!("expected an integer, found: {n}")))?;
        Some(if negative { -n } else { n })
    };
    Ok(Some(Statement::AlterSet { materialized_view, name, setting, value }))
}

/// `( key = value, .. )` with dotted keys; values are literals, returned unquoted.
fn parse_options(parser: &mut Parser<'_>) -> Result<Vec<(String, String)>> {
    parser.expect_token(&Token::LParen)?;
    let mut options = Vec::new();
    loop {
        let key = parser.parse_identifier()?.value.to_lowercase();
        parser.expect_token(&Token::Eq)?;
        let value = match parser.parse_value()?.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s,
            other => other.to_string(),
        };
        options.push((key, value));
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}

/// Consumes `words` (keywords or not, any case) if the next tokens are exactly them.
fn parse_words(parser: &mut Parser<'_>, words: &[&str]) -> bool {
    let matches = words.iter().enumerate().all(|(i, word)| {
        matches!(&parser.peek_nth_token(i).token, Token::Word(w) if w.value.eq_ignore_ascii_case(word))
    });
    if matches {
        for _ in words {
            parser.next_token();
        }
    }
    matches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sluice_and_postgres_statements() {
        let stmts = parse("FLUSH; SELECT 1;; create table t (a int primary key)").unwrap();
        assert_eq!(stmts.len(), 3);
        assert_eq!(stmts[0], Statement::Flush);
        assert!(matches!(&stmts[1], Statement::Sql(s) if matches!(**s, ast::Statement::Query(_))));
        assert!(
            matches!(&stmts[2], Statement::Sql(s) if matches!(**s, ast::Statement::CreateTable(_)))
        );
        assert!(parse("   ").unwrap().is_empty());
    }

    #[test]
    fn parses_sources_and_tables_from_sources() {
        let sql = "CREATE SOURCE pg WITH (connector = 'postgres-cdc', hostname = 'h', port = '5432', \
                   database.name = 'shop', slot.name = 's')";
        let Statement::CreateSource { options, .. } = parse(sql).unwrap().remove(0) else {
            panic!()
        };
        assert_eq!(options[3], ("database.name".to_owned(), "shop".to_owned()));
        assert_eq!(options.len(), 5);

        let sql = "CREATE TABLE person (id int, name varchar, PRIMARY KEY (id)) \
                   WITH (snapshot.batch_size = '10') FROM pg TABLE 'public.person'";
        let Statement::CreateTableFrom { table, source, external } = parse(sql).unwrap().remove(0)
        else {
            panic!()
        };
        assert_eq!((source.to_string(), external.as_str()), ("pg".to_owned(), "public.person"));
        assert_eq!(table.columns.len(), 2);
        assert!(table.to_string().contains("snapshot.batch_size"), "{table}");

        let sql = "CREATE TABLE IF NOT EXISTS t (*) WITH (snapshot = 'false') FROM pg TABLE 'public.\"T\"'";
        let Statement::CreateTableFrom { table, external, .. } = parse(sql).unwrap().remove(0)
        else {
            panic!()
        };
        assert!(table.columns.is_empty() && table.if_not_exists);
        assert_eq!(external, "public.\"T\"");
        assert!(matches!(
            parse("DROP SOURCE IF EXISTS pg").unwrap()[0],
            Statement::DropSource { if_exists: true, .. }
        ));
        // Qualified names in a view's query are untouched.
        assert!(parse("CREATE MATERIALIZED VIEW v WITH (backfill_rate_limit = 1) AS SELECT t.a FROM t WHERE (t.a = 1)").is_ok());
    }

    #[test]
    fn parses_job_control() {
        let stmts = parse("SHOW JOBS; WAIT; CANCEL JOBS 7, 9; cancel job 3").unwrap();
        assert_eq!(stmts[0], Statement::ShowJobs);
        assert_eq!(stmts[1], Statement::Wait);
        assert_eq!(stmts[2], Statement::CancelJobs(vec![7, 9]));
        assert_eq!(stmts[3], Statement::CancelJobs(vec![3]));
        assert!(matches!(parse("CANCEL JOBS x"), Err(Error::Parse(_))));
        let Statement::AlterSet { materialized_view, name, setting, value } =
            parse("ALTER MATERIALIZED VIEW mv SET BACKFILL_RATE_LIMIT = 0").unwrap().remove(0)
        else {
            panic!()
        };
        assert!(materialized_view);
        assert_eq!(
            (name.to_string(), setting, value),
            ("mv".into(), AlterSetting::BackfillRateLimit, Some(0))
        );
        let Statement::AlterSet { materialized_view, setting, value, .. } =
            parse("alter table t set parallelism to default").unwrap().remove(0)
        else {
            panic!()
        };
        assert!(!materialized_view);
        assert_eq!((setting, value), (AlterSetting::Parallelism, None));
        let Statement::AlterSet { value, .. } =
            parse("ALTER TABLE t SET BACKFILL_RATE_LIMIT TO -1").unwrap().remove(0)
        else {
            panic!()
        };
        assert_eq!(value, Some(-1));
        assert!(matches!(parse("ALTER TABLE t SET PARALLELISM = many"), Err(Error::Parse(_))));
        // Other ALTERs still reach sqlparser.
        assert!(matches!(&parse("ALTER TABLE t ADD COLUMN c int").unwrap()[0], Statement::Sql(_)));
    }

    #[test]
    fn refuses_expressions_nested_too_deep() {
        let ok = format!("SELECT 1 WHERE 1 = 0{}", " OR 1 = 1".repeat(MAX_EXPR_DEPTH / 2 - 2));
        assert!(parse(&ok).is_ok());
        let deep = format!("SELECT 1{}", " + 1".repeat(3000));
        assert!(matches!(parse(&deep), Err(Error::ProgramLimit(_))));
        let nested = format!("SELECT {}1{}", "(".repeat(600), ")".repeat(600));
        assert!(matches!(parse(&nested), Err(Error::ProgramLimit(_))));
        let casts = format!("SELECT {}1{}", "CAST(".repeat(48), " AS int)".repeat(48));
        assert!(matches!(parse(&casts), Err(Error::ProgramLimit(_))));
        let fine = format!("SELECT {}1{}", "CAST(".repeat(30), " AS int)".repeat(30));
        assert!(parse(&fine).is_ok());
        let subqueries = |n: usize| format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n));
        assert!(parse(&subqueries(MAX_QUERY_DEPTH - 1)).is_ok());
        assert!(matches!(parse(&subqueries(MAX_QUERY_DEPTH + 1)), Err(Error::ProgramLimit(_))));
    }

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

    #[test]
    fn reports_syntax_errors() {
        assert!(matches!(parse("SELEC 1"), Err(Error::Parse(_))));
        assert!(matches!(parse("FLUSH now"), Err(Error::Parse(_))));
    }
}
