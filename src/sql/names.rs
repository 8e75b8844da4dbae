//! Postgres' names for unaliased output columns.
//!
//! DataFusion names an output column after its whole expression (`sum(orders.amount)`);
//! Postgres names it after the function or column (`sum`, `amount`) and `?column?` otherwise.
//! Clients show these names as headers, so Sluice gives the top-level SELECT list Postgres'
//! names as aliases. Postgres allows two output columns of one name (`SELECT v, v`) and
//! DataFusion does not: a repeated name gets a hidden suffix ([`DUPLICATE_MARK`] and a number),
//! which the wire protocol drops from the column headers.

use std::collections::HashMap;

use datafusion::sql::sqlparser::ast;

/// The SELECT whose list names a query's columns: the first of a UNION, EXCEPT or INTERSECT.
fn leftmost_select(body: &mut ast::SetExpr) -> Option<&mut ast::Select> {
    match body {
        ast::SetExpr::Select(select) => Some(select),
        ast::SetExpr::SetOperation { left, .. } => leftmost_select(left),
        _ => None,
    }
}

fn leftmost_select_ref(body: &ast::SetExpr) -> Option<&ast::Select> {
    match body {
        ast::SetExpr::Select(select) => Some(select),
        ast::SetExpr::SetOperation { left, .. } => leftmost_select_ref(left),
        ast::SetExpr::Query(query) => leftmost_select_ref(query.body.as_ref()),
        _ => None,
    }
}

/// Adds Postgres-style aliases to the unaliased items of the query's top-level SELECT list.
pub fn alias_output_columns(query: &mut ast::Query) {
    let Some(select) = leftmost_select(query.body.as_mut()) else {
        return;
    };
    let names: Vec<Option<String>> = select
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::UnnamedExpr(expr) => Some(postgres_name(expr)),
            ast::SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            _ => None,
        })
        .collect();
    // Wildcards expand to columns whose names are unknown here; leave such lists alone.
    if names.iter().any(Option::is_none) {
        return;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (item, name) in select.projection.iter_mut().zip(names.into_iter().flatten()) {
        // A repeated name (`SELECT v, v`, `SELECT 1, 2`) gets a suffix DataFusion keeps apart
        // and the wire protocol drops.
        let repeats = seen.entry(name.clone()).or_default();
        let alias = match *repeats {
            0 => name,
            n => format!("{name}{DUPLICATE_MARK}{n}"),
        };
        *repeats += 1;
        match item {
            ast::SelectItem::UnnamedExpr(expr) => {
                let named =
                    matches!(expr, ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_));
                if named && !alias.contains(DUPLICATE_MARK) {
                    continue;
                }
                let alias = ast::Ident::with_quote('"', alias);
                *item = ast::SelectItem::ExprWithAlias { expr: expr.clone(), alias };
            }
            ast::SelectItem::ExprWithAlias { alias: given, .. }
                if alias.contains(DUPLICATE_MARK) =>
            {
                *given = ast::Ident::with_quote('"', alias);
            }
            _ => {}
        }
    }
}

/// Separates a repeated output column name from the number that keeps it apart inside Sluice
/// (`v`, `v\u{1f}1`); clients see `v` twice, as Postgres shows it.
pub const DUPLICATE_MARK: char = '\u{1f}';

/// The name Postgres gives an output column computed by `expr`.
/// The name Postgres gives a type in `pg_type` (`integer` is `int4`), which names the column of
/// a cast.
fn type_name(ty: &ast::DataType) -> String {
    use ast::DataType as S;
    let name = match ty {
        S::SmallInt(_) | S::Int2(_) => "int2",
        S::Int(_) | S::Integer(_) | S::Int4(_) => "int4",
        S::BigInt(_) | S::Int8(_) => "int8",
        S::Real | S::Float4 => "float4",
        S::Double(_) | S::DoublePrecision | S::Float8 => "float8",
        S::Float(ast::ExactNumberInfo::Precision(p)) if *p <= 24 => "float4",
        S::Float(_) => "float8",
        S::Numeric(_) | S::Decimal(_) | S::Dec(_) => "numeric",
        S::Text | S::String(_) => "text",
        S::Varchar(_) | S::CharacterVarying(_) => "varchar",
        S::Char(_) | S::Character(_) => "bpchar",
        S::Bool | S::Boolean => "bool",
        S::Date => "date",
        S::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => "timestamptz",
        S::Timestamp(..) => "timestamp",
        S::Time(..) => "time",
        S::Interval { .. } => "interval",
        S::JSONB => "jsonb",
        S::JSON => "json",
        S::Bytea => "bytea",
        S::Array(ast::ArrayElemTypeDef::SquareBracket(element, _))
        | S::Array(ast::ArrayElemTypeDef::AngleBracket(element)) => return type_name(element),
        S::Custom(name, _) => {
            return name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map_or_else(|| "?column?".to_owned(), |i| i.value.to_lowercase());
        }
        _ => "?column?",
    };
    name.to_owned()
}

fn postgres_name(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Identifier(ident) => ident.value.to_lowercase(),
        ast::Expr::CompoundIdentifier(parts) => {
            parts.last().map_or_else(String::new, |i| i.value.to_lowercase())
        }
        ast::Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map_or_else(|| "?column?".to_owned(), |i| i.value.to_lowercase()),
        ast::Expr::Nested(inner) => postgres_name(inner),
        // A cast is named after what it casts, if that has a name, else after the type.
        ast::Expr::Cast { expr, data_type, .. } => match postgres_name(expr) {
            name if name != "?column?" => name,
            _ => type_name(data_type),
        },
        ast::Expr::Case { .. } => "case".to_owned(),
        // Calls the parser reads as syntax of their own, named as Postgres names the function.
        ast::Expr::Ceil { .. } => "ceil".to_owned(),
        ast::Expr::Floor { .. } => "floor".to_owned(),
        ast::Expr::Extract { .. } => "extract".to_owned(),
        ast::Expr::Position { .. } => "position".to_owned(),
        ast::Expr::Substring { .. } => "substring".to_owned(),
        ast::Expr::Overlay { .. } => "overlay".to_owned(),
        ast::Expr::Trim { trim_where, .. } => match trim_where {
            Some(ast::TrimWhereField::Leading) => "ltrim",
            Some(ast::TrimWhereField::Trailing) => "rtrim",
            _ => "btrim",
        }
        .to_owned(),
        ast::Expr::AtTimeZone { .. } => "timezone".to_owned(),
        ast::Expr::Exists { .. } => "exists".to_owned(),
        ast::Expr::Interval(_) => "interval".to_owned(),
        ast::Expr::TypedString(typed) => type_name(&typed.data_type),
        // A scalar subquery is named after its one output column.
        ast::Expr::Subquery(query) => match leftmost_select_ref(query.body.as_ref()) {
            Some(select) => match select.projection.as_slice() {
                [ast::SelectItem::UnnamedExpr(expr)] => postgres_name(expr),
                [ast::SelectItem::ExprWithAlias { alias, .. }] => alias.value.clone(),
                _ => "?column?".to_owned(),
            },
            None => "?column?".to_owned(),
        },
        _ => "?column?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::parser::{Statement, parse};

    fn names_of(sql: &str) -> String {
        let Statement::Sql(stmt) = parse(sql).unwrap().remove(0) else { panic!() };
        stmt.to_string()
    }

    #[test]
    fn functions_and_expressions_get_postgres_names() {
        assert_eq!(
            names_of("SELECT customer, sum(amount), 1 + 1 FROM orders"),
            "SELECT customer, sum(amount) AS \"sum\", 1 + 1 AS \"?column?\" FROM orders"
        );
        // Repeated names stay apart inside Sluice; the client sees `sum` twice.
        assert_eq!(
            names_of("SELECT sum(a), sum(b) FROM t"),
            "SELECT sum(a) AS \"sum\", sum(b) AS \"sum\u{1f}1\" FROM t"
        );
        assert_eq!(names_of("SELECT v, v FROM t"), "SELECT v, v AS \"v\u{1f}1\" FROM t");
        assert_eq!(
            names_of("SELECT v, v::text AS v FROM t"),
            "SELECT v, v::TEXT AS \"v\u{1f}1\" FROM t"
        );
        assert_eq!(names_of("SELECT *, count(*) FROM t"), "SELECT *, count(*) FROM t");
        // Calls the parser reads as syntax of their own, and a scalar subquery.
        let named = names_of(
            "SELECT ceil(x), floor(x), extract(year FROM d), trim(s), trim(LEADING ' ' FROM s), \
             substring(s FROM 2), (SELECT max(v) FROM u), date '2024-01-01' FROM t",
        );
        for name in ["ceil", "floor", "extract", "btrim", "ltrim", "substring", "max", "date"] {
            assert!(named.contains(&format!("AS \"{name}\"")), "{name}: {named}");
        }
    }
}
