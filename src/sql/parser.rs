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

use crate::error::{Error, Result};
use crate::sql::compat;
use crate::sql::dialect::SluiceDialect;

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
    /// `CREATE TABLE FROM source TABLES 'schema.pattern' [WITH (..)]`: a CDC table for each
    /// upstream table matching the pattern (`*` any characters, `?` one), now and as they
    /// are created upstream.
    CreateTablesFrom {
        /// The source to read from.
        source: ast::ObjectName,
        /// The pattern of upstream tables, schema-qualified.
        pattern: String,
        /// The `WITH (..)` options: the tables' own, and `discovery.interval`.
        options: Vec<(String, String)>,
    },
    /// `SHOW SOURCES`.
    ShowSources,
    /// `EXPLAIN CREATE TABLE .. FROM source TABLE '..'`.
    ExplainCreateTableFrom(Box<Statement>),
    /// `SHOW JOBS`: the jobs still creating.
    ShowJobs,
    /// `WAIT`: block until no job is creating.
    Wait,
    /// `ALTER TABLE name RESNAPSHOT`: a CDC table reads its upstream table again over the rows
    /// it holds.
    Resnapshot(ast::ObjectName),
    /// `ALTER TABLE name REFRESH SCHEMA`: a CDC table is built again from its upstream table
    /// as it is now.
    RefreshSchema(ast::ObjectName),
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

/// Parses a string of `;`-separated statements.
///
/// Input made only of queries additionally goes through the Postgres compatibility rewrites, so
/// clients' catalog queries plan in DataFusion.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let sql = compat::client_query_replacement(sql).unwrap_or(sql);
    let (mut statements, depth) = parse_sluice(sql)?;
    for statement in &mut statements {
        if let Statement::Sql(stmt) = statement {
            check_depth(stmt)?;
            check_scalar_subqueries(stmt)?;
            compat::name_user_functions(stmt);
        }
    }
    let mut statements = with_compat_rewrites(sql, statements, depth);
    for statement in &mut statements {
        if let Statement::Sql(stmt) = statement {
            compat::rewrite(stmt);
            crate::sql::fetch::rewrite(stmt)?;
            crate::sql::not_in::rewrite(stmt);
            crate::sql::exists::rewrite(stmt);
            crate::sql::json_agg::rewrite(stmt);
        }
    }
    Ok(statements)
}

/// Applies the compatibility parser's rewrites ([`compat::rewrite_queries`]) when all
/// statements are queries.
fn with_compat_rewrites(sql: &str, statements: Vec<Statement>, depth: usize) -> Vec<Statement> {
    let queries: Option<Vec<ast::Statement>> = statements
        .iter()
        .map(|s| match s {
            Statement::Sql(s) if matches!(**s, ast::Statement::Query(_)) => Some((**s).clone()),
            _ => None,
        })
        .collect();
    match queries {
        Some(queries) => compat::rewrite_queries(sql, depth, queries)
            .into_iter()
            .map(|s| Statement::Sql(Box::new(s)))
            .collect(),
        None => statements,
    }
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

/// Refuses a query (not a view) whose one `SELECT` has aggregates with different `ORDER BY`s
/// (`string_agg(s, ',' ORDER BY id), array_agg(s ORDER BY id DESC)`): DataFusion's batch plan
/// orders all of them by the first one's order, without a word. Views maintain each call in
/// its own order, so they are not refused.
pub fn check_ordered_aggregates(statement: &ast::Statement) -> Result<()> {
    use std::ops::ControlFlow;

    use datafusion::sql::sqlparser::ast::{Visit, Visitor};

    struct Orders;
    impl Visitor for Orders {
        type Break = String;
        fn pre_visit_query(&mut self, query: &ast::Query) -> ControlFlow<String> {
            let ast::SetExpr::Select(select) = query.body.as_ref() else {
                return ControlFlow::Continue(());
            };
            let mut orders: Vec<String> = Vec::new();
            for item in &select.projection {
                let (ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. }) = item
                else {
                    continue;
                };
                // This query's own calls: its subqueries are visited on their own.
                let mut e = e.clone();
                let _ = ast::visit_expressions_mut(&mut e, |e| {
                    if matches!(e, ast::Expr::Subquery(_)) {
                        *e = ast::Expr::Value(ast::Value::Null.into());
                    }
                    ControlFlow::<()>::Continue(())
                });
                let _ = ast::visit_expressions(&e, |e| {
                    if let ast::Expr::Function(f) = e
                        && f.over.is_none()
                        && let ast::FunctionArguments::List(list) = &f.args
                    {
                        for clause in &list.clauses {
                            if let ast::FunctionArgumentClause::OrderBy(items) = clause {
                                let order: Vec<String> =
                                    items.iter().map(ToString::to_string).collect();
                                orders.push(order.join(", "));
                            }
                        }
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
            orders.dedup();
            orders.sort();
            orders.dedup();
            match orders.len() > 1 {
                true => ControlFlow::Break(orders.join("; ")),
                false => ControlFlow::Continue(()),
            }
        }
    }
    match statement.visit(&mut Orders) {
        ControlFlow::Break(found) => Err(Error::Unsupported(format!(
            "aggregates ordered in different ways in one query ({found}); compute each in its \
             own subquery, or in a materialized view, which orders each as written"
        ))),
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
    if let Some((name, refresh)) = parse_resnapshot(parser)? {
        return Ok(match refresh {
            true => Statement::RefreshSchema(name),
            false => Statement::Resnapshot(name),
        });
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
    if is_word(parser, 0, "CREATE") && is_word(parser, 1, "TABLE") && is_word(parser, 2, "FROM") {
        for _ in 0..3 {
            parser.next_token();
        }
        let source = parser.parse_object_name(false)?;
        if !parser.parse_keyword(Keyword::TABLES) {
            return Err(Error::InvalidStatement(
                "CREATE TABLE FROM source needs TABLES 'schema.pattern' (or name the table: \
                 CREATE TABLE name (*) FROM source TABLE 'schema.table')"
                    .into(),
            ));
        }
        let pattern = parser.parse_literal_string()?;
        let options =
            if parser.parse_keyword(Keyword::WITH) { parse_options(parser)? } else { Vec::new() };
        return Ok(Statement::CreateTablesFrom { source, pattern, options });
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
/// `ALTER TABLE name RESNAPSHOT` or `ALTER TABLE name REFRESH SCHEMA`: the name, and whether
/// it is the latter, if the statement is one of them.
fn parse_resnapshot(parser: &mut Parser<'_>) -> Result<Option<(ast::ObjectName, bool)>> {
    let word = |n: usize| match &parser.peek_nth_token(n).token {
        Token::Word(w) => w.value.to_uppercase(),
        _ => String::new(),
    };
    if word(0) != "ALTER" || word(1) != "TABLE" {
        return Ok(None);
    }
    let mut i = 3;
    while parser.peek_nth_token(i).token == Token::Period {
        i += 2;
    }
    let refresh = word(i) == "REFRESH" && word(i + 1) == "SCHEMA";
    if word(i) != "RESNAPSHOT" && !refresh {
        return Ok(None);
    }
    parser.next_token();
    parser.next_token();
    let name = parser.parse_object_name(false)?;
    parser.next_token();
    if refresh {
        parser.next_token();
    }
    Ok(Some((name, refresh)))
}

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
        let resnapshot =
            parse("ALTER TABLE public.orders RESNAPSHOT; alter table t resnapshot").unwrap();
        let names: Vec<String> = resnapshot
            .iter()
            .map(|s| match s {
                Statement::Resnapshot(name) => name.to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["public.orders", "t"]);
        let refresh =
            parse("ALTER TABLE s.t REFRESH SCHEMA; alter table u refresh schema").unwrap();
        assert_eq!(
            refresh,
            [
                Statement::RefreshSchema(ast::ObjectName::from(vec![
                    ast::Ident::new("s"),
                    ast::Ident::new("t")
                ])),
                Statement::RefreshSchema(ast::ObjectName::from(vec![ast::Ident::new("u")])),
            ]
        );
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
    fn reports_syntax_errors() {
        assert!(matches!(parse("SELEC 1"), Err(Error::Parse(_))));
        assert!(matches!(parse("FLUSH now"), Err(Error::Parse(_))));
    }
}
