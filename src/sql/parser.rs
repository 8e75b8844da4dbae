//! Sluice's statement parser: sqlparser's Postgres dialect plus Sluice's own statements.
//!
//! Statements sqlparser knows come back as [`Statement::Sql`]; the few that it does not are
//! recognised by their leading keywords before falling through to sqlparser, so Sluice extends
//! the grammar without forking the parser.

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;

use std::sync::LazyLock;

use datafusion_pg_catalog::sql::PostgresCompatibilityParser;

use crate::error::{Error, Result};
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
    let mut statements = with_compat_rewrites(sql, parse_sluice(sql)?);
    for statement in &mut statements {
        if let Statement::Sql(stmt) = statement
            && let ast::Statement::Query(query) = stmt.as_mut()
        {
            alias_output_columns(query);
        }
    }
    Ok(statements)
}

/// Replaces statements by their Postgres-compatibility rewrite when all of them are queries.
fn with_compat_rewrites(sql: &str, statements: Vec<Statement>) -> Vec<Statement> {
    let only_queries = statements
        .iter()
        .all(|s| matches!(s, Statement::Sql(s) if matches!(**s, ast::Statement::Query(_))));
    if only_queries
        && !statements.is_empty()
        && let Ok(rewritten) = PG_COMPAT.parse(sql)
        && rewritten.len() == statements.len()
    {
        return rewritten.into_iter().map(|s| Statement::Sql(Box::new(s))).collect();
    }
    statements
}

fn parse_sluice(sql: &str) -> Result<Vec<Statement>> {
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect).try_with_sql(sql)?;
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
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
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
    fn reports_syntax_errors() {
        assert!(matches!(parse("SELEC 1"), Err(Error::Parse(_))));
        assert!(matches!(parse("FLUSH now"), Err(Error::Parse(_))));
    }
}
