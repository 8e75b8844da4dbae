//! Postgres's text form of one-dimensional arrays: `{1,2,NULL}`, `{"a b","q\"z"}`, `{}`.
//!
//! Read when a user writes an array as text (`INSERT .. VALUES ('{a,b}')`) and from an
//! upstream's text; printed values go out through the wire encoder.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, ListArray, StringArray};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::Field;

use crate::error::{Error, Result};
use crate::types::{CastMode, DataType, cast_to};

/// The elements of an array literal (`None` for an unquoted `NULL`), as Postgres reads them:
/// elements separated by commas inside braces, each quoted (with `\` escapes) or not (trimmed,
/// `\` escapes too). A nested array or a dimension decoration is refused.
pub fn parse(text: &str) -> Result<Vec<Option<String>>> {
    let malformed =
        |why: &str| Error::InvalidInput(format!("malformed array literal: \"{text}\": {why}"));
    let inner = text.trim();
    let inner = inner
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| malformed("an array value must start with \"{\" and end with \"}\""))?;
    let mut elements = Vec::new();
    if inner.trim().is_empty() {
        return Ok(elements);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        let mut quoted = false;
        if chars.next_if_eq(&'"').is_some() {
            quoted = true;
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => {
                        value.push(chars.next().ok_or_else(|| malformed("unexpected end"))?)
                    }
                    Some(c) => value.push(c),
                    None => return Err(malformed("unterminated quoted element")),
                }
            }
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
        } else {
            let mut trailing = 0;
            while let Some(&c) = chars.peek() {
                match c {
                    ',' => break,
                    '{' | '}' => {
                        return Err(malformed("multi-dimensional arrays are not supported"));
                    }
                    '"' => return Err(malformed("unexpected \" character")),
                    '\\' => {
                        chars.next();
                        value.push(chars.next().ok_or_else(|| malformed("unexpected end"))?);
                        trailing = 0;
                        continue;
                    }
                    c if c.is_whitespace() => trailing += c.len_utf8(),
                    _ => trailing = 0,
                }
                value.push(c);
                chars.next();
            }
            value.truncate(value.len() - trailing);
            if value.is_empty() {
                return Err(malformed("an element is empty"));
            }
        }
        let null = !quoted && value.eq_ignore_ascii_case("NULL");
        elements.push((!null).then_some(value));
        match chars.next() {
            Some(',') => continue,
            None => return Ok(elements),
            Some(c) => return Err(malformed(&format!("unexpected \"{c}\" character"))),
        }
    }
}

/// Arrays of `element`s from their text forms, each element read as a value of its type is
/// (`mode` as for [`cast_to`]). In [`CastMode::Upstream`] a value that does not convert (a
/// multi-dimensional array, an element its type cannot hold) becomes a NULL array, as other
/// upstream values that do not convert become NULL, for the caller to find and name.
pub fn arrays_from_text(text: &StringArray, element: DataType, mode: CastMode) -> Result<ArrayRef> {
    let mut offsets = vec![0i32];
    let mut values: Vec<Option<String>> = Vec::new();
    let mut valid = Vec::with_capacity(text.len());
    for value in text.iter() {
        let parsed = match value {
            None => None,
            Some(value) => match (parse(value), mode) {
                (Ok(elements), _) => Some(elements),
                (Err(_), CastMode::Upstream) => None,
                (Err(e), CastMode::Strict) => return Err(e),
            },
        };
        valid.push(parsed.is_some());
        values.extend(parsed.into_iter().flatten());
        offsets.push(values.len() as i32);
    }
    let strings: ArrayRef = Arc::new(StringArray::from(values));
    let elements = cast_to(&strings, element, mode)?;
    if mode == CastMode::Upstream && elements.null_count() > strings.null_count() {
        // An element that did not convert: its whole array did not.
        for (row, range) in offsets.windows(2).enumerate() {
            let range = range[0] as usize..range[1] as usize;
            if range.clone().any(|i| elements.is_null(i) && !strings.is_null(i)) {
                valid[row] = false;
            }
        }
    }
    let field = Arc::new(Field::new_list_field(elements.data_type().clone(), true));
    let nulls = valid.iter().any(|v| !v).then(|| NullBuffer::from(valid));
    Ok(Arc::new(ListArray::new(field, OffsetBuffer::new(offsets.into()), elements, nulls)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> String {
        match parse(text) {
            Ok(elements) => {
                let shown: Vec<String> = elements
                    .iter()
                    .map(|e| e.as_ref().map_or("<null>".to_owned(), |v| format!("[{v}]")))
                    .collect();
                shown.join(" ")
            }
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn array_literals_read_as_postgres_reads_them() {
        assert_eq!(read("{1,2,3}"), "[1] [2] [3]");
        assert_eq!(read(" { a , b c ,NULL, null,\"NULL\"} "), "[a] [b c] <null> <null> [NULL]");
        assert_eq!(read(r#"{"x y","q\"z",a\,b,"\\"}"#), r#"[x y] [q"z] [a,b] [\]"#);
        assert_eq!(read("{}"), "");
        assert_eq!(read("{ }"), "");
        assert!(read("1,2").contains("malformed array literal"));
        assert!(read("{{1},{2}}").contains("multi-dimensional"));
        assert!(read("{1,,2}").contains("empty"));
        assert!(read("{\"a\"b}").contains("unexpected"));
    }
}
