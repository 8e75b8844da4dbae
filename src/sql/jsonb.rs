//! The jsonb operators over Sluice's jsonb (stored as its text): `->`, `->>`, `#>`, `#>>`,
//! `@>`, `<@` and `?`.
//!
//! The parser rewrites each operator into a call of one of the functions here
//! ([`rewrite_operators`]); they parse their left operand, walk it, and answer as Postgres
//! does: `->` gives jsonb printed as Postgres prints jsonb (keys ordered shortest first, `", "`
//! and `": "` between items, numbers as numerics: `1.50` stays `1.50`, `1e2` is `100`), `->>`
//! gives text (a string unquoted, JSON `null` as SQL NULL), `@>` is containment with Postgres's
//! rules (an array contains another whose every element some element of it contains; a
//! top-level array contains a scalar it has), `?` whether a key (or an array's string element)
//! is there. A left operand that is not JSON is an error (22P02).

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast;

/// A parsed JSON value; numbers keep their text (normalized as a Postgres numeric).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Keys in Postgres's jsonb order (shortest first, then by bytes), each once (the last wins).
    Object(Vec<(String, Json)>),
}

/// Parses JSON text.
fn parse(text: &str) -> Result<Json, String> {
    let mut parser = JsonParser { text: text.as_bytes(), at: 0 };
    let value = parser.value(0)?;
    parser.space();
    if parser.at != parser.text.len() {
        return Err(format!("unexpected text after the JSON value at byte {}", parser.at));
    }
    Ok(value)
}

/// How deep arrays and objects may nest.
const MAX_DEPTH: usize = 256;

struct JsonParser<'a> {
    text: &'a [u8],
    at: usize,
}

impl JsonParser<'_> {
    fn space(&mut self) {
        while self.text.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.space();
        match self.text.get(self.at) {
            Some(&b) if b == byte => {
                self.at += 1;
                Ok(())
            }
            _ => Err(format!("expected '{}' at byte {}", byte as char, self.at)),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err("JSON nests too deep".into());
        }
        self.space();
        let rest = &self.text[self.at..];
        let word = |w: &str| rest.starts_with(w.as_bytes());
        match rest.first() {
            Some(b'{') => {
                self.at += 1;
                let mut items: Vec<(String, Json)> = Vec::new();
                self.space();
                if self.text.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(items));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    self.expect(b':')?;
                    let value = self.value(depth + 1)?;
                    items.retain(|(k, _)| *k != key);
                    items.push((key, value));
                    self.space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            break;
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.at)),
                    }
                }
                items.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
                Ok(Json::Object(items))
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.text.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            break;
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.at)),
                    }
                }
                Ok(Json::Array(items))
            }
            Some(b'"') => Ok(Json::String(self.string()?)),
            _ if word("null") => {
                self.at += 4;
                Ok(Json::Null)
            }
            _ if word("true") => {
                self.at += 4;
                Ok(Json::Bool(true))
            }
            _ if word("false") => {
                self.at += 5;
                Ok(Json::Bool(false))
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while self.text.get(self.at).is_some_and(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.at += 1;
                }
                let lexeme = std::str::from_utf8(&self.text[start..self.at]).expect("ASCII");
                serde_json::from_str::<serde_json::Number>(lexeme)
                    .map_err(|e| format!("bad number {lexeme}: {e}"))?;
                Ok(Json::Number(numeric_text(lexeme)))
            }
            _ => Err(format!("unexpected input at byte {}", self.at)),
        }
    }

    /// A string literal, unescaped (serde_json reads the escapes).
    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        if self.text.get(self.at) != Some(&b'"') {
            return Err(format!("expected a string at byte {}", self.at));
        }
        self.at += 1;
        loop {
            match self.text.get(self.at) {
                Some(b'\\') => self.at += 2,
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(_) => self.at += 1,
                None => return Err("unterminated string".into()),
            }
        }
        let lexeme = std::str::from_utf8(&self.text[start..self.at]).map_err(|e| e.to_string())?;
        serde_json::from_str(lexeme).map_err(|e| format!("bad string: {e}"))
    }
}

/// A JSON number's text as Postgres prints the numeric it reads it as: without an exponent,
/// leading zeros or a minus on zero, keeping the fraction digits it has (`1.50`, `1e2` is `100`).
fn numeric_text(lexeme: &str) -> String {
    let (negative, unsigned) = match lexeme.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, lexeme),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().unwrap_or(0)),
        None => (unsigned, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_part}{frac_part}");
    // The decimal point sits `point` digits into `digits`; the scale is what follows it.
    let point = int_part.len() as i64 + exponent;
    let scale = (frac_part.len() as i64 - exponent).max(0) as usize;
    let mut int_digits: String = if point <= 0 {
        "0".into()
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        digits[..point as usize].to_owned()
    };
    let mut frac_digits: String = if point < 0 {
        format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        digits.get(point as usize..).unwrap_or_default().to_owned()
    };
    frac_digits.truncate(scale);
    while frac_digits.len() < scale {
        frac_digits.push('0');
    }
    let trimmed = int_digits.trim_start_matches('0');
    int_digits = if trimmed.is_empty() { "0".into() } else { trimmed.to_owned() };
    let zero = int_digits == "0" && frac_digits.bytes().all(|b| b == b'0');
    let sign = if negative && !zero { "-" } else { "" };
    match frac_digits.is_empty() {
        true => format!("{sign}{int_digits}"),
        false => format!("{sign}{int_digits}.{frac_digits}"),
    }
}

/// The field metadata key that marks a text column as holding jsonb.
pub const TYPE_KEY: &str = "sluice.type";

/// `field` marked as holding jsonb text.
pub fn mark(field: Field) -> Field {
    let mut metadata = field.metadata().clone();
    metadata.insert(TYPE_KEY.to_owned(), "jsonb".to_owned());
    field.with_metadata(metadata)
}

/// Whether `field` holds jsonb text (see [`mark`]).
pub fn is_marked(field: &Field) -> bool {
    field.metadata().get(TYPE_KEY).is_some_and(|t| t == "jsonb")
}

/// JSON text as Postgres stores and prints it as jsonb; an error for text that is not JSON.
pub fn normalize(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    print(&parse(text)?, &mut out);
    Ok(out)
}

/// `value` as Postgres prints jsonb.
fn print(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => out.push_str(&serde_json::to_string(s).expect("a string serializes")),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                print(item, out);
            }
            out.push(']');
        }
        Json::Object(items) => {
            out.push('{');
            for (i, (key, item)) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(key).expect("a string serializes"));
                out.push_str(": ");
                print(item, out);
            }
            out.push('}');
        }
    }
}

/// One step of a path: an object's key, or an array's index (negative: from the end).
fn step<'a>(value: &'a Json, key: &Key) -> Option<&'a Json> {
    match (value, key) {
        (Json::Object(items), Key::Text(k)) => {
            items.iter().find(|(name, _)| name == k).map(|x| &x.1)
        }
        (Json::Array(items), Key::Index(i)) => {
            let at = if *i < 0 { items.len() as i64 + i } else { *i };
            usize::try_from(at).ok().and_then(|at| items.get(at))
        }
        // A path given as text reads array indices from it (`#> '{a,0}'`).
        (Json::Array(_), Key::Text(k)) => {
            k.parse::<i64>().ok().and_then(|i| step(value, &Key::Index(i)))
        }
        _ => None,
    }
}

enum Key {
    Text(String),
    Index(i64),
}

/// Whether `a` contains `b`, as jsonb `@>` decides.
fn contains(a: &Json, b: &Json, top: bool) -> bool {
    match (a, b) {
        (Json::Object(a), Json::Object(b)) => b.iter().all(|(key, bv)| {
            a.iter().find(|(k, _)| k == key).is_some_and(|(_, av)| contains(av, bv, false))
        }),
        (Json::Array(a), Json::Array(b)) => {
            b.iter().all(|bv| a.iter().any(|av| contains(av, bv, false)))
        }
        (Json::Array(a), scalar) if top && !matches!(scalar, Json::Object(_)) => {
            a.iter().any(|av| same_scalar(av, scalar))
        }
        (a, b) => same_scalar(a, b),
    }
}

fn same_scalar(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            x == y || x.parse::<f64>().ok().zip(y.parse::<f64>().ok()).is_some_and(|(x, y)| x == y)
        }
        (Json::Array(_) | Json::Object(_), _) | (_, Json::Array(_) | Json::Object(_)) => false,
        (a, b) => a == b,
    }
}

/// Whether `key` is a key of an object, a string element of an array, or the string itself.
fn exists(value: &Json, key: &str) -> bool {
    match value {
        Json::Object(items) => items.iter().any(|(k, _)| k == key),
        Json::Array(items) => items.iter().any(|v| matches!(v, Json::String(s) if s == key)),
        Json::String(s) => s == key,
        _ => false,
    }
}

/// The jsonb functions the operators become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    /// `->`, `#>`: the value at a key, index or path, as jsonb.
    Get,
    /// `->>`, `#>>`: the same as text.
    GetText,
    /// `@>`.
    Contains,
    /// `?`.
    Exists,
}

/// A jsonb operator as a function (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonbFunction {
    op: Op,
    path: bool,
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for JsonbFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::Get | Op::GetText => DataType::Utf8,
            Op::Contains | Op::Exists => DataType::Boolean,
        })
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = Field::new(self.name, self.return_type(&[])?, true);
        Ok(Arc::new(match self.op {
            // `->` gives jsonb, which clients are told.
            Op::Get => mark(field),
            _ => field,
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let list = |a: &ArrayRef| matches!(a.data_type(), DataType::List(_));
        if self.op == Op::Contains && arrays.iter().any(list) {
            // Arrays' `@>` and `<@` (the syntax tree could not tell them from jsonb's).
            return crate::sql::array_ops::contains(&arrays[0], &arrays[1])
                .map(ColumnarValue::Array);
        }
        let left = as_text(&arrays[0])?;
        let right = &arrays[1];
        let key = |row: usize| -> DfResult<Option<Vec<Key>>> {
            if right.is_null(row) {
                return Ok(None);
            }
            let integer = arrow::compute::cast(&right.slice(row, 1), &DataType::Int64).ok();
            Ok(Some(match right.data_type() {
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                    let value = integer.expect("an integer casts to Int64");
                    vec![Key::Index(value.as_primitive::<arrow::datatypes::Int64Type>().value(0))]
                }
                _ => {
                    let text = as_text(right)?;
                    let text = text.value(row);
                    match self.path {
                        true => path_keys(text)?,
                        false => vec![Key::Text(text.to_owned())],
                    }
                }
            }))
        };
        let parsed = |row: usize| -> DfResult<Option<Json>> {
            if left.is_null(row) {
                return Ok(None);
            }
            parse(left.value(row)).map(Some).map_err(not_json)
        };
        let result: ArrayRef = match self.op {
            Op::Get | Op::GetText => {
                let mut out = StringBuilder::with_capacity(rows, rows * 8);
                for row in 0..rows {
                    let (Some(value), Some(keys)) = (parsed(row)?, key(row)?) else {
                        out.append_null();
                        continue;
                    };
                    let found = keys.iter().try_fold(&value, |v, k| step(v, k));
                    match (found, self.op) {
                        (None, _) | (Some(Json::Null), Op::GetText) => out.append_null(),
                        (Some(Json::String(s)), Op::GetText) => out.append_value(s),
                        (Some(v), _) => {
                            let mut text = String::new();
                            print(v, &mut text);
                            out.append_value(text);
                        }
                    }
                }
                Arc::new(out.finish())
            }
            Op::Contains | Op::Exists => {
                let mut out = BooleanBuilder::with_capacity(rows);
                let right_text = as_text(right)?;
                for row in 0..rows {
                    let Some(value) = parsed(row)? else {
                        out.append_null();
                        continue;
                    };
                    if right_text.is_null(row) {
                        out.append_null();
                        continue;
                    }
                    let answer = match self.op {
                        Op::Contains => {
                            let other = parse(right_text.value(row)).map_err(not_json)?;
                            contains(&value, &other, true)
                        }
                        _ => exists(&value, right_text.value(row)),
                    };
                    out.append_value(answer);
                }
                Arc::new(out.finish())
            }
        };
        Ok(ColumnarValue::Array(result))
    }
}

/// The error of text that is not JSON (22P02).
fn not_json(e: String) -> DataFusionError {
    let error =
        crate::error::Error::InvalidInput(format!("invalid input syntax for type json: {e}"));
    DataFusionError::External(Box::new(error))
}

/// A text array as `StringArray` (casting other string types).
fn as_text(array: &ArrayRef) -> DfResult<arrow::array::StringArray> {
    let text = arrow::compute::cast(array, &DataType::Utf8)?;
    Ok(text.as_string::<i32>().clone())
}

/// A text-array path (`'{a,0,b}'`) as keys.
fn path_keys(text: &str) -> DfResult<Vec<Key>> {
    let inner =
        text.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(|| {
            DataFusionError::Execution(format!("malformed array literal: \"{text}\""))
        })?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    Ok(inner.split(',').map(|k| Key::Text(k.trim().trim_matches('"').to_owned())).collect())
}

/// `text::jsonb` (normalized) and `text::json` (checked, kept as written).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonIn {
    jsonb: bool,
    signature: Signature,
}

impl ScalarUDFImpl for JsonIn {
    fn name(&self) -> &str {
        if self.jsonb { JSONB_IN } else { JSON_IN }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = Field::new(self.name(), DataType::Utf8, true);
        Ok(Arc::new(if self.jsonb { mark(field) } else { field }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let text = as_text(&arrays[0])?;
        let mut out = StringBuilder::with_capacity(text.len(), text.value_data().len());
        for value in text.iter() {
            let Some(value) = value else {
                out.append_null();
                continue;
            };
            let checked = match self.jsonb {
                true => normalize(value),
                false => parse(value).map(|_| value.to_owned()),
            };
            let checked = checked.map_err(not_json)?;
            out.append_value(checked);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The functions the jsonb operators are written as.
pub fn udfs() -> Vec<ScalarUDF> {
    let function = |op, path, name| {
        ScalarUDF::new_from_impl(JsonbFunction {
            op,
            path,
            name,
            signature: Signature::any(2, Volatility::Immutable),
        })
    };
    vec![
        function(Op::Get, false, GET),
        function(Op::GetText, false, GET_TEXT),
        function(Op::Get, true, GET_PATH),
        function(Op::GetText, true, GET_PATH_TEXT),
        function(Op::Contains, false, CONTAINS),
        function(Op::Exists, false, EXISTS),
        ScalarUDF::new_from_impl(JsonIn {
            jsonb: true,
            signature: Signature::any(1, Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(JsonIn {
            jsonb: false,
            signature: Signature::any(1, Volatility::Immutable),
        }),
    ]
}

const GET: &str = "sluice_jsonb_get";
const GET_TEXT: &str = "sluice_jsonb_get_text";
const GET_PATH: &str = "sluice_jsonb_get_path";
const GET_PATH_TEXT: &str = "sluice_jsonb_get_path_text";
const CONTAINS: &str = "sluice_jsonb_contains";
const EXISTS: &str = "sluice_jsonb_exists";
const JSONB_IN: &str = "sluice_jsonb_in";
const JSON_IN: &str = "sluice_json_in";

/// Writes the jsonb operators and the casts to `jsonb` and `json` of `statement` as calls of
/// [`udfs`].
pub fn rewrite_operators(statement: &mut ast::Statement) {
    // A view's options are no expressions: `backfill_order = FIXED(a -> b)` keeps its arrows.
    let options = view_options_mut(statement).map(std::mem::take);
    rewrite_expressions(statement);
    if let (Some(options), Some(slot)) = (options, view_options_mut(statement)) {
        *slot = options;
    }
}

/// The `WITH (..)` options of a `CREATE MATERIALIZED VIEW`, explained or not.
fn view_options_mut(statement: &mut ast::Statement) -> Option<&mut ast::CreateTableOptions> {
    match statement {
        ast::Statement::CreateView(view) => Some(&mut view.options),
        ast::Statement::Explain { statement, .. } => view_options_mut(statement),
        _ => None,
    }
}

/// The rewriting of [`rewrite_operators`], over every expression of `statement`.
fn rewrite_expressions(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Cast { expr: inner, data_type, .. } = expr
            && let Some(name) = match data_type {
                ast::DataType::JSONB => Some(JSONB_IN),
                ast::DataType::JSON => Some(JSON_IN),
                _ => None,
            }
        {
            *expr = call(name, vec![inner.as_ref().clone()]);
            return ControlFlow::<()>::Continue(());
        }
        if let ast::Expr::BinaryOp { left, op, right } = expr {
            let (name, swap) = match op {
                ast::BinaryOperator::Arrow => (GET, false),
                ast::BinaryOperator::LongArrow => (GET_TEXT, false),
                ast::BinaryOperator::HashArrow => (GET_PATH, false),
                ast::BinaryOperator::HashLongArrow => (GET_PATH_TEXT, false),
                // Arrays have their own `@>` in DataFusion.
                ast::BinaryOperator::AtArrow | ast::BinaryOperator::ArrowAt
                    if [left.as_ref(), right.as_ref()]
                        .iter()
                        .any(|e| matches!(e, ast::Expr::Array(_))) =>
                {
                    return ControlFlow::<()>::Continue(());
                }
                ast::BinaryOperator::AtArrow => (CONTAINS, false),
                ast::BinaryOperator::ArrowAt => (CONTAINS, true),
                ast::BinaryOperator::Question => (EXISTS, false),
                ast::BinaryOperator::PGOverlap => (crate::sql::array_ops::OVERLAPS, false),
                _ => return ControlFlow::<()>::Continue(()),
            };
            let (first, second) = match swap {
                false => (left.as_ref().clone(), right.as_ref().clone()),
                true => (right.as_ref().clone(), left.as_ref().clone()),
            };
            *expr = call(name, vec![first, second]);
        }
        ControlFlow::Continue(())
    });
}

fn call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ast::ObjectName::from(vec![ast::Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(text: &str) -> String {
        let mut out = String::new();
        print(&parse(text).unwrap(), &mut out);
        out
    }

    #[test]
    fn jsonb_prints_as_postgres_prints_it() {
        // Expected values from PostgreSQL 15.
        assert_eq!(
            printed(r#"{"b":{"zz":1,"a":2,"bb":[true,false]},"a":1}"#),
            r#"{"a": 1, "b": {"a": 2, "bb": [true, false], "zz": 1}}"#
        );
        assert_eq!(printed(r#"{"a":1e2, "b": 0.1e1, "c": -0}"#), r#"{"a": 100, "b": 1, "c": 0}"#);
        assert_eq!(printed(r#"{"n":1.50,"n":2}"#), r#"{"n": 2}"#, "the last of a key wins");
        assert_eq!(printed(r#"["a\"b\\c é", null]"#), r#"["a\"b\\c é", null]"#);
        for (number, shown) in
            [("1.50", "1.50"), ("-1.5e-3", "-0.0015"), ("12e-1", "1.2"), ("-0.0", "0.0")]
        {
            assert_eq!(numeric_text(number), shown, "{number}");
        }
        assert!(parse("{\"a\": }").is_err() && parse("[1] x").is_err() && parse("nul").is_err());
    }

    #[test]
    fn containment_and_existence_follow_postgres() {
        let c = |a: &str, b: &str| contains(&parse(a).unwrap(), &parse(b).unwrap(), true);
        assert!(c(r#"{"a":1,"b":{"c":[1,2,3]}}"#, r#"{"b":{"c":[3]}}"#));
        assert!(c("[1,2,[3,4]]", "[[4]]"));
        assert!(c("[1,2]", "1"));
        assert!(c(r#"{"a":1.0}"#, r#"{"a":1}"#));
        assert!(!c(r#"{"a":[1]}"#, r#"{"a":1}"#));
        let e = |a: &str, k: &str| exists(&parse(a).unwrap(), k);
        assert!(e(r#"{"a":1,"b":2}"#, "b") && e(r#"["x","y"]"#, "y") && e(r#""foo""#, "foo"));
        assert!(!e(r#"{"a":{"b":1}}"#, "b") && !e("[1]", "1"));
    }
}
