//! sqlparser's Postgres dialect with a bound on how much work one statement may take to parse.
//!
//! sqlparser is a recursive-descent parser that tries alternatives: a keyword is first parsed as
//! the construct it introduces (`CAST(..)`, `POSITION(.. IN ..)`) and, when that fails, again as
//! a plain function call. Each level of nesting whose first attempt fails re-parses everything
//! inside it, so a malformed statement nested 20 deep takes seconds and 40 deep takes hours.
//! [`SluiceDialect`] parses function arguments without such a retry, and counts the expressions and statements the parser starts; past a budget
//! proportional to the statement's length every further attempt fails at once, unwinding the
//! search, and the statement is refused as too complex (54001).

use std::any::TypeId;
use std::cell::Cell;

use datafusion::sql::sqlparser::ast::{Expr, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// Parse attempts allowed for any statement, however short.
const BASE_BUDGET: usize = 1_000;

/// Further parse attempts allowed per token. A well-formed statement starts at most one
/// expression per token, plus a few alternatives tried and dropped.
const BUDGET_PER_TOKEN: usize = 8;

/// sqlparser's [`PostgreSqlDialect`] with a budget of parse attempts.
///
/// It is the Postgres dialect to the parser (`dialect_of!` checks see [`PostgreSqlDialect`]),
/// and it answers every question the Postgres dialect answers differently from the default,
/// the same way except for named function arguments.
#[derive(Debug)]
pub struct SluiceDialect {
    postgres: PostgreSqlDialect,
    budget: Cell<usize>,
    exhausted: Cell<bool>,
}

impl SluiceDialect {
    /// A dialect for parsing a statement of `tokens` tokens.
    pub fn for_tokens(tokens: usize) -> Self {
        let budget = BASE_BUDGET.saturating_add(tokens.saturating_mul(BUDGET_PER_TOKEN));
        SluiceDialect {
            postgres: PostgreSqlDialect {},
            budget: Cell::new(budget),
            exhausted: Cell::new(false),
        }
    }

    /// A dialect for parsing `sql`, budgeted by its length.
    pub fn for_sql(sql: &str) -> Self {
        // A token takes at least one character: the length bounds the token count.
        Self::for_tokens(sql.len())
    }

    /// Whether parsing ran out of budget, so the parser's answer, if an error, is not the
    /// statement's fault but its complexity's.
    pub fn exhausted(&self) -> bool {
        self.exhausted.get()
    }

    /// Takes one attempt from the budget; false once none is left.
    fn spend(&self) -> bool {
        match self.budget.get() {
            0 => {
                self.exhausted.set(true);
                false
            }
            left => {
                self.budget.set(left - 1);
                true
            }
        }
    }
}

/// Delegates flag questions to the Postgres dialect.
macro_rules! postgres_flags {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool { self.postgres.$name() })*
    };
}

impl Dialect for SluiceDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }

    /// `SELECT * EXCLUDE col`: what `FETCH .. WITH TIES` is written as (see
    /// [`crate::sql::fetch`]) must read back from a view's stored query.
    fn supports_select_wildcard_exclude(&self) -> bool {
        true
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        if self.spend() {
            self.postgres.parse_prefix(parser)
        } else {
            Some(Err(ParserError::RecursionLimitExceeded))
        }
    }

    /// `a IS [NOT] DISTINCT FROM b` takes as `b` what binds at least as tightly as `IS`, as in
    /// Postgres: sqlparser reads a whole expression there, so `x IS DISTINCT FROM y OR z` was
    /// `x IS DISTINCT FROM (y OR z)` and failed to plan (a boolean `OR` of a number).
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        _precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        let negated = if parser.parse_keywords(&[Keyword::IS, Keyword::DISTINCT, Keyword::FROM]) {
            false
        } else if parser.parse_keywords(&[
            Keyword::IS,
            Keyword::NOT,
            Keyword::DISTINCT,
            Keyword::FROM,
        ]) {
            true
        } else {
            return None;
        };
        let right = match parser.parse_subexpr(self.prec_value(Precedence::Is)) {
            Ok(right) => Box::new(right),
            Err(e) => return Some(Err(e)),
        };
        let left = Box::new(expr.clone());
        Some(Ok(match negated {
            false => Expr::IsDistinctFrom(left, right),
            true => Expr::IsNotDistinctFrom(left, right),
        }))
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if self.spend() {
            self.postgres.parse_statement(parser)
        } else {
            Some(Err(ParserError::RecursionLimitExceeded))
        }
    }

    /// Named arguments are `name => value` with `name` an identifier, as in Postgres. The
    /// Postgres dialect accepts any expression as the name: it parses every argument as one,
    /// and re-parses it as the value when no `=>` follows, which doubles the work at each level
    /// of nested calls (`f(f(f(..)))` 24 deep took 25 s).
    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        false
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.postgres.identifier_quote_style(identifier)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.postgres.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.postgres.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.postgres.is_identifier_part(ch)
    }

    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        self.postgres.is_reserved_for_identifier(kw)
    }

    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.postgres.is_custom_operator_part(ch)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        self.postgres.get_next_precedence(parser)
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        self.postgres.prec_value(prec)
    }

    postgres_flags!(
        supports_unicode_string_literal,
        supports_filter_during_aggregation,
        supports_group_by_expr,
        allow_extract_custom,
        allow_extract_single_quotes,
        supports_create_index_with_clause,
        supports_explain_with_utility_options,
        supports_listen_notify,
        supports_factorial_operator,
        supports_bitwise_shift_operators,
        supports_comment_on,
        supports_load_extension,
        supports_named_fn_args_with_colon_operator,
        supports_empty_projections,
        supports_nested_comments,
        supports_string_escape_constant,
        supports_numeric_literal_underscores,
        supports_array_typedef_with_brackets,
        supports_geometric_types,
        supports_set_names,
        supports_alter_column_type_using,
        supports_notnull_operator,
        supports_interval_options,
        supports_insert_table_alias,
        supports_create_table_like_parenthesized,
        supports_select_wildcard_with_alias,
        supports_comma_separated_trim,
        supports_xml_expressions,
        supports_comment_optimizer_hint,
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::error::Error;
    use crate::sql::parser::parse;

    #[test]
    fn is_distinct_from_takes_what_binds_as_tightly_as_is() {
        let parsed = |sql: &str| {
            let dialect = SluiceDialect::for_sql(sql);
            Parser::new(&dialect).try_with_sql(sql).unwrap().parse_expr().unwrap()
        };
        let Expr::BinaryOp { left, op, .. } = parsed("a IS DISTINCT FROM b OR c") else {
            panic!("OR at the top");
        };
        assert_eq!(op.to_string(), "OR");
        assert!(matches!(*left, Expr::IsDistinctFrom(..)));
        let Expr::BinaryOp { left, .. } = parsed("a IS NOT DISTINCT FROM b AND c") else {
            panic!("AND at the top");
        };
        assert!(matches!(*left, Expr::IsNotDistinctFrom(..)));
        let Expr::IsDistinctFrom(left, right) = parsed("a = b IS DISTINCT FROM c + 1") else {
            panic!("IS DISTINCT FROM at the top");
        };
        assert!(matches!((*left, *right), (Expr::BinaryOp { .. }, Expr::BinaryOp { .. })));
    }

    /// The statements of the sqllogictest files under `dir`.
    fn slt_statements(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                slt_statements(&path, out);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let mut lines = text.lines();
            while let Some(line) = lines.next() {
                if !(line.starts_with("statement ") || line.starts_with("query ")) {
                    continue;
                }
                let sql: Vec<&str> =
                    lines.by_ref().take_while(|l| !l.is_empty() && *l != "----").collect();
                out.push(sql.join("\n"));
            }
        }
    }

    #[test]
    fn parses_as_the_postgres_dialect_does() {
        let mut statements = Vec::new();
        slt_statements(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sql_tests")),
            &mut statements,
        );
        assert!(statements.len() > 200, "found {} statements", statements.len());
        // Deeper statements are refused before parsing; the Postgres dialect alone takes hours
        // over some of them.
        let shallow = |sql: &str| {
            let mut depth = 0i32;
            sql.chars().all(|c| {
                depth += i32::from(c == '(') - i32::from(c == ')');
                depth <= crate::sql::parser::MAX_BRACKET_DEPTH as i32
            })
        };
        // Named arguments and IS [NOT] DISTINCT FROM are parsed differently on purpose (see
        // `parse_infix` and `supports_named_fn_args_with_expr_name`).
        let same = |sql: &str| !sql.contains("=>") && !sql.contains("DISTINCT FROM");
        for sql in statements.iter().filter(|sql| shallow(sql) && same(sql)) {
            let postgres = Parser::parse_sql(&PostgreSqlDialect {}, sql);
            let sluice = Parser::parse_sql(&SluiceDialect::for_sql(sql), sql);
            assert_eq!(postgres, sluice, "{sql}");
        }
        let sql = "SELECT f(a => 1)";
        let named = Parser::parse_sql(&SluiceDialect::for_sql(sql), sql).unwrap();
        assert!(format!("{named:?}").contains("Named {"), "{named:?}");
        let dialect = SluiceDialect::for_sql("");
        let dialect: &dyn Dialect = &dialect;
        assert!(dialect.is::<PostgreSqlDialect>());
    }

    /// Parses on another thread, failing the test if no answer comes within a minute (without
    /// the budget, each of these takes from minutes to years). The thread has the stack of the
    /// server's runtime threads (32 MiB): an unoptimised build recurses deeper than the default
    /// 2 MiB allows.
    fn parse_within_a_minute(sql: String) -> crate::error::Result<()> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .stack_size(32 << 20)
            .spawn(move || tx.send(parse(&sql).map(|_| ())))
            .expect("a thread starts");
        rx.recv_timeout(Duration::from_secs(60)).expect("the parse did not end")
    }

    #[test]
    fn refuses_malformed_nesting_without_backtracking_for_ever() {
        let malformed = [
            format!("SELECT {}1 AS int INTO{}", "CAST(".repeat(38), " AS int)".repeat(37)),
            format!("SELECT {}1 INTO{}", "f(".repeat(38), ")".repeat(38)),
            format!("SELECT {}1{} INTO", "position(".repeat(38), ", 2".repeat(38)),
        ];
        for sql in malformed {
            let err = parse_within_a_minute(sql.clone()).unwrap_err();
            assert!(matches!(err, Error::Parse(_) | Error::ProgramLimit(_)), "{sql}: {err:?}");
        }
        for function in ["abs(", "f("] {
            let nested_calls = format!("SELECT {}1{}", function.repeat(38), ")".repeat(38));
            parse_within_a_minute(nested_calls).unwrap();
        }
        let nested_positions =
            format!("SELECT {}'a'{}", "position(".repeat(20), " IN 'b')".repeat(20));
        parse_within_a_minute(nested_positions).unwrap();
    }
}
