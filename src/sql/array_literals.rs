//! Postgres's array literals in queries, read as Postgres reads them: `'{1,2,NULL}'::int[]`,
//! `CAST('{"a,b",c}' AS text[])` and `x = ANY('{a,b}')` become `ARRAY[..]` expressions whose
//! elements are the literal's, each cast to the element type.
//!
//! The text goes through [`crate::types::array_text::parse`], the reader of arrays written to
//! tables, so a quoted element may hold a comma, a brace or a quote, an unquoted `NULL` is a
//! NULL and `"NULL"` the word. This runs before the compatibility parser's rules, whose own
//! reading of such literals splits the text at every comma and reads unquoted elements as
//! numbers (`'{t,f}'::boolean[]` failed, `'{"x,y"}'::text[]` gave two elements).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast;

use crate::types::array_text;

/// Rewrites every array literal of `statement` (see the module's doc); a literal that is not a
/// well-formed one-dimensional array is left as written, for the planner's error.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        match expr {
            ast::Expr::Cast { expr: inner, data_type: ast::DataType::Array(def), .. } => {
                if let (Some(text), Some(element)) = (text_of(inner), element_type(def))
                    && let Some(array) = array_of(text, Some(element))
                {
                    **inner = array;
                }
            }
            ast::Expr::AnyOp { right, .. } | ast::Expr::AllOp { right, .. } => {
                if let Some(array) = text_of(right).and_then(|text| array_of(text, None)) {
                    **right = array;
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The text of a string literal.
fn text_of(expr: &ast::Expr) -> Option<&str> {
    match expr {
        ast::Expr::Value(ast::ValueWithSpan {
            value: ast::Value::SingleQuotedString(s), ..
        }) => Some(s),
        _ => None,
    }
}

/// The element type of an array type, if it is not an array itself.
fn element_type(def: &ast::ArrayElemTypeDef) -> Option<&ast::DataType> {
    let element = match def {
        ast::ArrayElemTypeDef::SquareBracket(element, _)
        | ast::ArrayElemTypeDef::AngleBracket(element)
        | ast::ArrayElemTypeDef::Parenthesis(element) => element.as_ref(),
        ast::ArrayElemTypeDef::None => return None,
    };
    (!matches!(element, ast::DataType::Array(_))).then_some(element)
}

/// `ARRAY[..]` of the elements of the array literal `text`, each cast to `element` when given
/// (a NULL element too, so that the array has its type even when all are NULL); `None` when
/// `text` is not a well-formed one-dimensional array literal.
fn array_of(text: &str, element: Option<&ast::DataType>) -> Option<ast::Expr> {
    let elements = array_text::parse(text).ok()?;
    let elem = elements
        .into_iter()
        .map(|value| {
            let value: ast::Expr = ast::Expr::Value(
                match value {
                    Some(text) => ast::Value::SingleQuotedString(text),
                    None => ast::Value::Null,
                }
                .into(),
            );
            match element {
                Some(ty) => ast::Expr::Cast {
                    kind: ast::CastKind::Cast,
                    expr: Box::new(value),
                    data_type: ty.clone(),
                    array: false,
                    format: None,
                },
                None => value,
            }
        })
        .collect();
    Some(ast::Expr::Array(ast::Array { elem, named: true }))
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        super::rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn array_literals_become_arrays_of_their_elements() {
        assert_eq!(
            rewritten(r#"SELECT '{"x,y",z,NULL,"NULL"}'::text[]"#),
            "SELECT ARRAY[CAST('x,y' AS TEXT), CAST('z' AS TEXT), CAST(NULL AS TEXT), \
             CAST('NULL' AS TEXT)]::TEXT[]"
        );
        assert_eq!(
            rewritten("SELECT CAST('{t, f}' AS boolean[]), '{}'::int[]"),
            "SELECT CAST(ARRAY[CAST('t' AS BOOLEAN), CAST('f' AS BOOLEAN)] AS BOOLEAN[]), \
             ARRAY[]::INT[]"
        );
        assert_eq!(
            rewritten("SELECT 1 WHERE x = ANY('{a,\"b c\"}') AND y <> ALL('{NULL}')"),
            "SELECT 1 WHERE x = ANY(ARRAY['a', 'b c']) AND y <> ALL(ARRAY[NULL])"
        );
        // Not array literals: left as written.
        for sql in [
            "SELECT '{{1,2},{3,4}}'::int[]",
            "SELECT '{a'::text[]",
            "SELECT s::int[] FROM t",
            "SELECT '[1:2]={1,2}'::int[]",
            "SELECT '{1}'::int",
        ] {
            assert_eq!(rewritten(sql), rewritten_as_parsed(sql), "{sql}");
        }
    }

    fn rewritten_as_parsed(sql: &str) -> String {
        Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0).to_string()
    }
}
