//! Parameters of the extended protocol: inferring their types, and binding their values.
//!
//! Types come from the statement: a placeholder in INSERT's VALUES or in an UPDATE assignment
//! takes its column's type; placeholders in queries and WHERE clauses take the type DataFusion
//! infers. Values are bound by replacing each `$n` with a typed literal, after which the
//! statement runs exactly like one from the simple protocol.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::sql::dialect::SluiceDialect;
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, visit_expressions, visit_expressions_mut};
use datafusion::sql::sqlparser::parser::Parser;
use pgwire::api::portal::Portal;
use pgwire::error::PgWireResult;
use std::sync::Arc;

use crate::batch::DML_SCHEMA;
use crate::engine::Engine;
use crate::engine::ddl::{normalize_ident, relation_name};
use crate::engine::session::Session;
use crate::error::{Error, Result};
use crate::frontend::sqlstate::pg_error;
use crate::sql::parser::Statement;

/// A prepared statement of the extended protocol.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// The parsed statement; `None` for an empty query.
    pub statement: Option<Statement>,
    /// Types of `$1`, `$2`, ... as inferred (Arrow) or `None` when unknown.
    pub param_types: Vec<Option<ArrowType>>,
    /// The result schema, for statements that return rows.
    pub schema: Option<SchemaRef>,
}

/// The parameter types and result schema of a statement of `session`.
pub async fn describe(
    engine: &Engine,
    session: &Session,
    statement: &Statement,
) -> Result<(Vec<Option<ArrowType>>, Option<SchemaRef>)> {
    let Statement::Sql(stmt) = statement else {
        return Ok((Vec::new(), None));
    };
    let mut types = vec![None; max_placeholder(stmt)];
    let schema = match stmt.as_ref() {
        ast::Statement::Query(_) | ast::Statement::Explain { .. } => {
            let state = engine.query_state();
            let plan = engine.plan(&state, (**stmt).clone()).await?;
            merge(&mut types, plan.get_parameter_types()?);
            Some(plan.schema().inner().clone())
        }
        ast::Statement::Insert(insert) => {
            insert_types(engine, insert, &mut types)?;
            None
        }
        ast::Statement::Update(update) => {
            update_types(engine, update, &mut types).await?;
            None
        }
        ast::Statement::Delete(delete) => {
            let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
                &delete.from;
            if let Some(from) = from.first() {
                where_types(engine, &from.relation, delete.selection.as_ref(), &mut types).await?;
            }
            None
        }
        ast::Statement::ShowVariable { variable } => {
            let name = variable.last().map_or(String::new(), |i| i.value.to_lowercase());
            Some(text_schema(&[&name]))
        }
        ast::Statement::ShowTables { .. } => Some(text_schema(&["Name"])),
        ast::Statement::Fetch { name, .. } => {
            Some(engine.cursor_schema(session, &name.value).await?)
        }
        ast::Statement::ExplainTable { .. } => Some(text_schema(&["Name", "Type", "Is Hidden"])),
        _ => None,
    };
    cast_types(stmt, &mut types);
    Ok((types, schema))
}

/// The Arrow type of a parameter cast to `ty`: a Sluice type, `oid`, or an array of one.
fn cast_type(ty: &ast::DataType) -> Option<ArrowType> {
    match ty {
        ast::DataType::Array(
            ast::ArrayElemTypeDef::SquareBracket(element, _)
            | ast::ArrayElemTypeDef::AngleBracket(element),
        ) => Some(ArrowType::new_list(cast_type(element)?, true)),
        // Sluice has no oid type; UInt32 marks one, for the parameter to be described as oid.
        ast::DataType::Custom(name, _) if name.to_string().eq_ignore_ascii_case("oid") => {
            Some(ArrowType::UInt32)
        }
        other => crate::types::DataType::from_sql(other).ok().map(|t| t.to_arrow()),
    }
}

/// A placeholder cast to a type (`$1::date`) that nothing else typed takes that type, as in
/// Postgres (drivers then send it as a date, not as text).
fn cast_types(stmt: &ast::Statement, types: &mut [Option<ArrowType>]) {
    let _ = visit_expressions(stmt, |expr| {
        if let ast::Expr::Cast { expr: inner, data_type, .. } = expr
            && let Some(i) = placeholder_index(inner)
            && types.get(i).is_some_and(Option::is_none)
            && let Some(ty) = cast_type(data_type)
        {
            types[i] = Some(ty);
        }
        ControlFlow::<()>::Continue(())
    });
}

fn text_schema(names: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(
        names.iter().map(|n| Field::new(*n, ArrowType::Utf8, true)).collect::<Vec<_>>(),
    ))
}

/// The number of the highest `$n` placeholder in a statement.
fn max_placeholder(stmt: &ast::Statement) -> usize {
    let mut max = 0;
    let _ = visit_expressions(stmt, |e| {
        if let Some(n) = placeholder_index(e) {
            max = max.max(n + 1);
        }
        ControlFlow::<()>::Continue(())
    });
    max
}

/// `Some(n - 1)` for the placeholder `$n`.
fn placeholder_index(expr: &ast::Expr) -> Option<usize> {
    match expr {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => {
                p.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)
            }
            _ => None,
        },
        _ => None,
    }
}

fn merge(types: &mut [Option<ArrowType>], inferred: HashMap<String, Option<ArrowType>>) {
    for (name, ty) in inferred {
        let index = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        if let (Some(i), Some(ty)) = (index, ty)
            && i < types.len()
            && types[i].is_none()
        {
            types[i] = Some(ty);
        }
    }
}

fn set_type(types: &mut [Option<ArrowType>], expr: &ast::Expr, ty: ArrowType) {
    if let Some(i) = placeholder_index(expr)
        && i < types.len()
    {
        types[i] = Some(ty);
    }
}

/// Placeholders of `INSERT .. VALUES` take their column's type.
fn insert_types(
    engine: &Engine,
    insert: &ast::Insert,
    types: &mut [Option<ArrowType>],
) -> Result<()> {
    let ast::TableObject::TableName(name) = &insert.table else {
        return Ok(());
    };
    let table = engine.table(name)?;
    let targets: Vec<usize> = if insert.columns.is_empty() {
        table.visible_indices()
    } else {
        let names: Vec<String> = insert
            .columns
            .iter()
            .map(|c| c.0.last().and_then(|p| p.as_ident()).map(normalize_ident).unwrap_or_default())
            .collect();
        names.iter().filter_map(|n| table.columns.iter().position(|c| &c.name == n)).collect()
    };
    let Some(source) = &insert.source else {
        return Ok(());
    };
    let ast::SetExpr::Values(values) = source.body.as_ref() else {
        return Ok(());
    };
    for row in &values.rows {
        for (expr, &col) in row.iter().zip(&targets) {
            set_type(types, expr, table.columns[col].data_type.to_arrow());
        }
    }
    Ok(())
}

/// Placeholders assigned to a column take its type; those in WHERE are inferred.
async fn update_types(
    engine: &Engine,
    update: &ast::Update,
    types: &mut [Option<ArrowType>],
) -> Result<()> {
    let ast::TableFactor::Table { name, .. } = &update.table.relation else {
        return Ok(());
    };
    let table = engine.table(name)?;
    for assignment in &update.assignments {
        let ast::AssignmentTarget::ColumnName(col) = &assignment.target else {
            continue;
        };
        let col = col.0.last().and_then(|p| p.as_ident()).map(normalize_ident).unwrap_or_default();
        if let Some(c) = table.columns.iter().find(|c| c.name == col) {
            set_type(types, &assignment.value, c.data_type.to_arrow());
        }
    }
    where_types(engine, &update.table.relation, update.selection.as_ref(), types).await
}

/// Infers the placeholders of a WHERE clause by planning `SELECT * FROM t WHERE ..`.
async fn where_types(
    engine: &Engine,
    relation: &ast::TableFactor,
    selection: Option<&ast::Expr>,
    types: &mut [Option<ArrowType>],
) -> Result<()> {
    let (Some(selection), ast::TableFactor::Table { name, alias, .. }) = (selection, relation)
    else {
        return Ok(());
    };
    let table = relation_name(name)?;
    let alias = alias.as_ref().map_or(table.clone(), |a| normalize_ident(&a.name));
    let quoted = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let sql = format!("SELECT * FROM \"{DML_SCHEMA}\".{} AS {}", quoted(&table), quoted(&alias));
    let mut stmt =
        Parser::new(&SluiceDialect::for_sql(&sql)).try_with_sql(&sql)?.parse_statement()?;
    if let ast::Statement::Query(query) = &mut stmt
        && let ast::SetExpr::Select(select) = query.body.as_mut()
    {
        select.selection = Some(selection.clone());
    }
    let state = engine.query_state();
    let plan = engine.plan(&state, stmt).await?;
    merge(types, plan.get_parameter_types()?);
    Ok(())
}

/// Replaces every `$n` of the statement with the bound value of parameter n.
pub fn substitute(
    portal: &Portal<Prepared>,
    prepared: &Prepared,
    statement: Statement,
) -> PgWireResult<Statement> {
    let count = portal.parameter_len();
    if count == 0 {
        return Ok(statement);
    }
    let Statement::Sql(mut stmt) = statement else {
        return Ok(statement);
    };
    let mut inferred: Vec<Option<&ArrowType>> =
        prepared.param_types.iter().map(Option::as_ref).collect();
    inferred.resize(count, None);
    let original = portal;
    let numeric: Vec<bool> = (0..count).map(|i| is_numeric(portal, &inferred, i)).collect();
    let infinite: Vec<Option<&str>> =
        (0..count).map(|i| infinite_temporal(portal, inferred[i], i)).collect();
    let own: Vec<bool> = numeric.iter().zip(&infinite).map(|(n, i)| *n || i.is_some()).collect();
    // Numerics and infinite dates and timestamps are read below, from the original bytes; the
    // library reads them as NULL.
    let narrow = ArrowType::Decimal128(38, 0);
    let library_types: Vec<Option<&ArrowType>> = inferred
        .iter()
        .zip(&numeric)
        .map(|(t, &numeric)| if numeric { Some(&narrow) } else { *t })
        .collect();
    let readable = readable_parameters(portal, &inferred, &own);
    let portal = readable.as_ref().unwrap_or(portal);
    let values = match arrow_pg::datatypes::df::deserialize_parameters(portal, &library_types)? {
        datafusion::common::ParamValues::List(values) => values,
        datafusion::common::ParamValues::Map(_) => {
            return Err(pg_error(&Error::Unsupported("named parameters".into())));
        }
    };
    let mut literals: Vec<ast::Expr> = values
        .iter()
        .map(|v| literal(&v.value))
        .collect::<Result<_>>()
        .map_err(|e| pg_error(&e))?;
    // NUMERIC values are read here, as text: the library's path goes through a 28-digit
    // decimal that silently drops digits when it rescales a larger value to the column's scale.
    for (i, literal) in literals.iter_mut().enumerate() {
        if let Some(infinite) = infinite[i] {
            *literal = ast::Expr::Value(ast::Value::SingleQuotedString(infinite.into()).into());
            continue;
        }
        let Some(Some(bytes)) = original.parameters.get(i).filter(|_| numeric[i]) else {
            continue;
        };
        let text = match original.parameter_format.is_binary(i) {
            true => numeric_text(bytes).map_err(|e| pg_error(&e))?,
            false => String::from_utf8_lossy(bytes).into_owned(),
        };
        let ty = match inferred[i] {
            Some(ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s)) => {
                format!("NUMERIC({p},{s})")
            }
            _ => {
                let (p, s) = crate::types::DEFAULT_NUMERIC;
                format!("NUMERIC({p},{s})")
            }
        };
        let sql = format!("CAST('{}' AS {ty})", text.replace('\'', "''"));
        *literal = Parser::new(&SluiceDialect::for_sql(&sql))
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| pg_error(&Error::from(e)))?;
    }
    let _ = visit_expressions_mut(stmt.as_mut(), |expr| {
        if let Some(value) = placeholder_index(expr).and_then(|i| literals.get(i)) {
            *expr = value.clone();
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(Statement::Sql(stmt))
}

/// `portal` with the parameters arrow-pg cannot read as sent rewritten into ones it can; `None`
/// when there are none:
/// - `json` and `jsonb` become `text` (a binary jsonb value is a version byte, 1, and the
///   text), which the columns and casts they go to read as JSON;
/// - a binary `oid[]` (a parameter cast to `oid[]`, see [`cast_type`]) becomes the `int4[]` of
///   the same numbers: the arrays differ only in the element type named in their header.
fn readable_parameters(
    portal: &Portal<Prepared>,
    inferred: &[Option<&ArrowType>],
    numeric: &[bool],
) -> Option<Portal<Prepared>> {
    use pgwire::api::Type;
    let types = &portal.statement.parameter_types;
    let is_json = |t: &Option<Type>| matches!(t, Some(t) if *t == Type::JSON || *t == Type::JSONB);
    let count = portal.parameter_len();
    let oid_array = |i: usize| {
        portal.parameter_format.is_binary(i)
            && match types.get(i).cloned().flatten() {
                Some(t) => t == Type::OID_ARRAY,
                None => inferred.get(i).copied().flatten().is_some_and(is_oid_array),
            }
    };
    let oid_arrays: Vec<usize> = (0..count).filter(|&i| oid_array(i)).collect();
    if !types.iter().any(is_json) && oid_arrays.is_empty() && !numeric.contains(&true) {
        return None;
    }
    let mut text = Portal::default();
    text.name = portal.name.clone();
    text.parameter_format = portal.parameter_format.clone();
    text.result_column_format = portal.result_column_format.clone();
    text.parameters = portal.parameters.clone();
    for (i, ty) in types.iter().enumerate() {
        let jsonb_binary =
            matches!(ty, Some(t) if *t == Type::JSONB) && portal.parameter_format.is_binary(i);
        if let (true, Some(Some(bytes))) = (jsonb_binary, text.parameters.get_mut(i))
            && bytes.first() == Some(&1)
        {
            *bytes = bytes.slice(1..);
        }
    }
    // The header of a binary array: dimensions, has-nulls flag, element type OID, ...
    const ELEMENT_TYPE: std::ops::Range<usize> = 8..12;
    for &i in &oid_arrays {
        if let Some(Some(bytes)) = text.parameters.get_mut(i)
            && bytes.len() >= ELEMENT_TYPE.end
        {
            let mut patched = bytes.to_vec();
            patched[ELEMENT_TYPE].copy_from_slice(&Type::INT4.oid().to_be_bytes());
            *bytes = bytes::Bytes::from(patched);
        }
    }
    for (i, _) in numeric.iter().enumerate().filter(|(_, n)| **n) {
        if let Some(value) = text.parameters.get_mut(i) {
            *value = None;
        }
    }
    let mut types: Vec<Option<Type>> =
        types.iter().map(|t| if is_json(t) { Some(Type::TEXT) } else { t.clone() }).collect();
    types.resize(count, None);
    for &i in &oid_arrays {
        types[i] = Some(Type::INT4_ARRAY);
    }
    let statement = &portal.statement;
    text.statement = std::sync::Arc::new(pgwire::api::stmt::StoredStatement::new(
        statement.id.clone(),
        statement.statement.clone(),
        types,
    ));
    Some(text)
}

/// Whether parameter `i` is a numeric, which Sluice reads itself from its text or binary
/// form (the library reads numerics through a 28-digit decimal without `NaN`): the client
/// says so, or the statement's planning inferred a numeric.
fn is_numeric(portal: &Portal<Prepared>, inferred: &[Option<&ArrowType>], i: usize) -> bool {
    match (portal.statement.parameter_types.get(i).cloned().flatten(), inferred[i]) {
        (Some(ty), _) => ty == pgwire::api::Type::NUMERIC,
        (None, Some(ty)) => matches!(ty, ArrowType::Decimal128(..) | ArrowType::Decimal256(..)),
        (None, None) => false,
    }
}

/// `infinity` or `-infinity` when parameter `i` is a date or timestamp in binary form holding
/// one (the extremes of its integer, as Postgres and asyncpg write them; the library's date
/// types cannot hold them).
fn infinite_temporal(
    portal: &Portal<Prepared>,
    inferred: Option<&ArrowType>,
    i: usize,
) -> Option<&'static str> {
    use pgwire::api::Type;
    let ty = match (portal.statement.parameter_types.get(i).cloned().flatten(), inferred) {
        (Some(ty), _) => ty,
        (None, Some(ArrowType::Date32)) => Type::DATE,
        (None, Some(ArrowType::Timestamp(_, None))) => Type::TIMESTAMP,
        (None, Some(ArrowType::Timestamp(_, Some(_)))) => Type::TIMESTAMPTZ,
        (None, _) => return None,
    };
    let bytes = portal.parameters.get(i)?.as_ref()?;
    if !portal.parameter_format.is_binary(i) {
        return None;
    }
    let positive = match (ty, bytes.len()) {
        (t, 4) if t == Type::DATE => match i32::from_be_bytes(bytes[..4].try_into().ok()?) {
            i32::MAX => true,
            i32::MIN => false,
            _ => return None,
        },
        (t, 8) if t == Type::TIMESTAMP || t == Type::TIMESTAMPTZ => {
            match i64::from_be_bytes(bytes[..8].try_into().ok()?) {
                i64::MAX => true,
                i64::MIN => false,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(if positive { "infinity" } else { "-infinity" })
}

/// Whether a parameter's Arrow type stands for `oid[]` (see [`cast_type`]).
pub fn is_oid_array(ty: &ArrowType) -> bool {
    matches!(ty, ArrowType::List(f) if f.data_type() == &ArrowType::UInt32)
}

/// A `numeric` in Postgres's binary format as text: `ndigits`, `weight`, `sign` and `dscale`
/// (16 bits each), then `ndigits` base-10000 digits, the first worth 10000^weight.
fn numeric_text(bytes: &[u8]) -> Result<String> {
    let bad = || Error::InvalidParameter("a binary numeric parameter is malformed".into());
    let word = |at: usize| -> Result<u16> {
        let pair = bytes.get(at..at + 2).ok_or_else(bad)?;
        Ok(u16::from_be_bytes([pair[0], pair[1]]))
    };
    let (ndigits, weight, sign, dscale) =
        (word(0)? as usize, word(2)? as i16 as i64, word(4)?, word(6)? as usize);
    let digits: Vec<u16> = (0..ndigits).map(|k| word(8 + 2 * k)).collect::<Result<_>>()?;
    let sign = match sign {
        0x0000 => "",
        0x4000 => "-",
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        _ => return Err(bad()),
    };
    let digit = |k: i64| if k < 0 { 0 } else { digits.get(k as usize).copied().unwrap_or(0) };
    let mut integer = String::new();
    for k in 0..=weight {
        match integer.is_empty() {
            true => integer = digit(k).to_string(),
            false => integer.push_str(&format!("{:04}", digit(k))),
        }
    }
    if integer.is_empty() {
        integer.push('0');
    }
    let mut fraction = String::new();
    let mut k = weight + 1;
    while fraction.len() < dscale {
        fraction.push_str(&format!("{:04}", digit(k)));
        k += 1;
    }
    fraction.truncate(dscale);
    Ok(match fraction.is_empty() {
        true => format!("{sign}{integer}"),
        false => format!("{sign}{integer}.{fraction}"),
    })
}

/// A SQL literal with the value and type of `value`.
/// A timestamp as ISO 8601 text, with its offset when it has a time zone.
fn timestamp_text(value: &ScalarValue) -> Result<String> {
    let array = value.to_array()?;
    Ok(arrow::util::display::array_value_to_string(&array, 0)?)
}

fn literal(value: &ScalarValue) -> Result<ast::Expr> {
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let sql = match value {
        v if v.is_null() => "NULL".to_owned(),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => quoted(s),
        ScalarValue::Boolean(Some(b)) => b.to_string(),
        ScalarValue::Binary(Some(b)) | ScalarValue::LargeBinary(Some(b)) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            quoted(&format!("\\x{hex}"))
        }
        ScalarValue::Int16(Some(_)) => format!("CAST({value} AS SMALLINT)"),
        ScalarValue::Int32(Some(_)) => format!("CAST({value} AS INT)"),
        ScalarValue::Int64(Some(_)) => format!("CAST({value} AS BIGINT)"),
        ScalarValue::Float32(Some(_)) => format!("CAST({} AS REAL)", quoted(&value.to_string())),
        ScalarValue::Float64(Some(_)) => {
            format!("CAST({} AS DOUBLE PRECISION)", quoted(&value.to_string()))
        }
        ScalarValue::Decimal128(Some(_), p, s) | ScalarValue::Decimal256(Some(_), p, s) => {
            format!("CAST({} AS NUMERIC({p},{s}))", quoted(&value.to_string()))
        }
        ScalarValue::Date32(Some(_)) => format!("CAST({} AS DATE)", quoted(&value.to_string())),
        // A timestamp scalar prints as its number; its array prints the time.
        ScalarValue::TimestampMicrosecond(Some(_), None)
        | ScalarValue::TimestampNanosecond(Some(_), None) => {
            format!("CAST({} AS TIMESTAMP)", quoted(&timestamp_text(value)?))
        }
        ScalarValue::TimestampMicrosecond(Some(_), Some(_))
        | ScalarValue::TimestampNanosecond(Some(_), Some(_)) => {
            format!("CAST({} AS TIMESTAMPTZ)", quoted(&timestamp_text(value)?))
        }
        ScalarValue::List(list) if arrow::array::Array::len(list.as_ref()) == 1 => {
            let values = list.value(0);
            let elements = (0..arrow::array::Array::len(values.as_ref()))
                .map(|i| Ok(literal(&ScalarValue::try_from_array(&values, i)?)?.to_string()))
                .collect::<Result<Vec<_>>>()?;
            format!("ARRAY[{}]", elements.join(", "))
        }
        other => quoted(&other.to_string()),
    };
    Ok(Parser::new(&SluiceDialect::for_sql(&sql)).try_with_sql(&sql)?.parse_expr()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Postgres's binary form of a numeric: header words, then base-10000 digits.
    fn binary(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        for w in [ndigits, weight as u16, sign, dscale].iter().chain(digits) {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    #[test]
    fn binary_numerics_read_as_text() {
        let big = binary(6, 4, 0, 2, &[9999, 9999, 9999, 9999, 9999, 9900]);
        assert_eq!(numeric_text(&big).unwrap(), "99999999999999999999.99");
        assert_eq!(numeric_text(&binary(1, -1, 0, 4, &[1])).unwrap(), "0.0001");
        assert_eq!(numeric_text(&binary(1, -2, 0x4000, 8, &[1])).unwrap(), "-0.00000001");
        assert_eq!(numeric_text(&binary(2, 0, 0, 1, &[12, 5000])).unwrap(), "12.5");
        assert_eq!(numeric_text(&binary(0, 0, 0, 0, &[])).unwrap(), "0");
        assert_eq!(numeric_text(&binary(1, 1, 0, 0, &[3])).unwrap(), "30000");
        assert_eq!(numeric_text(&binary(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
        assert!(numeric_text(&[0, 1]).is_err());
    }
}
