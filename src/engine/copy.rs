//! `COPY`: its options; for `COPY .. FROM STDIN` its two data formats (CSV and Postgres text),
//! read into batches of text columns that `engine::dml` casts to the table's types. `COPY ..
//! TO STDOUT` runs a batch query whose rows the frontend encodes (text, CSV or binary).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType as ArrowType;
use datafusion::sql::sqlparser::ast;

use crate::catalog::TableCatalog;
use crate::error::{Error, Result};
use crate::{invalid, unsupported};

/// The format of a `COPY`.
#[derive(Debug, Clone)]
pub struct CopyFormat {
    /// CSV (true) or Postgres text format (false).
    pub csv: bool,
    /// Postgres binary format.
    pub binary: bool,
    /// Field separator.
    pub delimiter: u8,
    /// CSV quote character.
    pub quote: u8,
    /// Whether the first CSV line is a header to skip.
    pub header: bool,
    /// The text that stands for NULL.
    pub null: String,
}

/// Where a `COPY .. FROM STDIN` writes.
#[derive(Debug, Clone)]
pub struct CopyTarget {
    /// The table.
    pub table: Arc<TableCatalog>,
    /// Storage indices of the columns the data provides, in data order.
    pub columns: Vec<usize>,
    /// How the data is formatted.
    pub format: CopyFormat,
}

/// Reads COPY options, modern (`WITH (FORMAT csv, ..)`) and legacy (`CSV HEADER`).
pub(crate) fn format(
    options: &[ast::CopyOption],
    legacy: &[ast::CopyLegacyOption],
) -> Result<CopyFormat> {
    let mut format = CopyFormat {
        csv: false,
        binary: false,
        delimiter: b'\t',
        quote: b'"',
        header: false,
        null: "\\N".into(),
    };
    let mut delimiter = None;
    let mut null = None;
    for option in options {
        match option {
            ast::CopyOption::Format(f) => match f.value.to_lowercase().as_str() {
                "csv" => (format.csv, format.binary) = (true, false),
                "text" => (format.csv, format.binary) = (false, false),
                "binary" => (format.csv, format.binary) = (false, true),
                other => return Err(unsupported!("COPY format {other}")),
            },
            ast::CopyOption::Delimiter(c) => delimiter = Some(ascii(*c)?),
            ast::CopyOption::Null(s) => null = Some(s.clone()),
            ast::CopyOption::Header(h) => format.header = *h,
            ast::CopyOption::Quote(c) => format.quote = ascii(*c)?,
            other => return Err(unsupported!("COPY option {other}")),
        }
    }
    for option in legacy {
        match option {
            ast::CopyLegacyOption::Csv(csv_options) => {
                format.csv = true;
                for o in csv_options {
                    match o {
                        ast::CopyLegacyCsvOption::Header => format.header = true,
                        ast::CopyLegacyCsvOption::Quote(c) => format.quote = ascii(*c)?,
                        other => return Err(unsupported!("COPY option {other}")),
                    }
                }
            }
            ast::CopyLegacyOption::Binary => format.binary = true,
            ast::CopyLegacyOption::Delimiter(c) => delimiter = Some(ascii(*c)?),
            ast::CopyLegacyOption::Null(s) => null = Some(s.clone()),
            other => return Err(unsupported!("COPY option {other}")),
        }
    }
    if format.binary && (delimiter.is_some() || null.is_some() || format.header) {
        return Err(invalid!("COPY in binary format takes no DELIMITER, NULL or HEADER"));
    }
    if format.csv {
        format.delimiter = b',';
        format.null = String::new();
    }
    format.delimiter = delimiter.unwrap_or(format.delimiter);
    format.null = null.unwrap_or(format.null);
    Ok(format)
}

fn ascii(c: char) -> Result<u8> {
    u8::try_from(c)
        .ok()
        .filter(u8::is_ascii)
        .ok_or_else(|| invalid!("COPY delimiter and quote must be one ASCII character"))
}

/// The rows of COPY `data` (`width` columns) as batches of text columns.
pub(crate) fn parse(data: &[u8], width: usize, format: &CopyFormat) -> Result<Vec<RecordBatch>> {
    if format.csv { parse_csv(data, width, format) } else { parse_text(data, width, format) }
}

/// The rows of a binary COPY stream as text columns (see
/// [`text_columns`](crate::connector::postgres::copy::text_columns)); malformed data is 22P04.
pub(crate) fn parse_binary(
    data: &[u8],
    types: &[crate::types::DataType],
) -> Result<Vec<RecordBatch>> {
    let columns =
        crate::connector::postgres::copy::text_columns(data, types).map_err(|e| match e {
            Error::Upstream { message, .. } => Error::BadCopyData(message),
            other => other,
        })?;
    let fields: Vec<arrow::datatypes::Field> = (0..types.len())
        .map(|i| arrow::datatypes::Field::new(format!("c{i}"), ArrowType::Utf8, true))
        .collect();
    let arrays = columns
        .into_iter()
        .map(|c| Arc::new(arrow::array::StringArray::from(c)) as ArrayRef)
        .collect();
    Ok(vec![RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), arrays)?])
}

/// Rows of CSV as text columns.
fn parse_csv(data: &[u8], width: usize, format: &CopyFormat) -> Result<Vec<RecordBatch>> {
    use arrow::csv::ReaderBuilder;
    let fields: Vec<arrow::datatypes::Field> = (0..width)
        .map(|i| arrow::datatypes::Field::new(format!("c{i}"), ArrowType::Utf8, true))
        .collect();
    let null = regex::Regex::new(&format!("^{}$", regex::escape(&format.null)))
        .map_err(|e| invalid!("bad NULL string: {e}"))?;
    let reader = ReaderBuilder::new(Arc::new(arrow::datatypes::Schema::new(fields)))
        .with_header(format.header)
        .with_delimiter(format.delimiter)
        .with_quote(format.quote)
        .with_null_regex(null)
        .with_batch_size(8192)
        .build(data)
        .map_err(|e| Error::InvalidInput(format!("COPY data: {e}")))?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidInput(format!("COPY data: {e}")))
}

/// Rows of Postgres text format (tab-separated, `\N` for NULL, backslash escapes) as text
/// columns.
fn parse_text(data: &[u8], width: usize, format: &CopyFormat) -> Result<Vec<RecordBatch>> {
    let text = std::str::from_utf8(data)
        .map_err(|e| Error::InvalidInput(format!("COPY data is not UTF-8: {e}")))?;
    let mut columns: Vec<Vec<Option<String>>> = vec![Vec::new(); width];
    for (line_no, line) in text.lines().enumerate() {
        if line == "\\." {
            break;
        }
        let fields: Vec<&str> = line.split(format.delimiter as char).collect();
        if fields.len() != width {
            return Err(Error::InvalidInput(format!(
                "COPY line {}: expected {width} columns, found {}",
                line_no + 1,
                fields.len()
            )));
        }
        for (column, field) in columns.iter_mut().zip(fields) {
            column.push((field != format.null).then(|| unescape_text(field)));
        }
    }
    let fields: Vec<arrow::datatypes::Field> = (0..width)
        .map(|i| arrow::datatypes::Field::new(format!("c{i}"), ArrowType::Utf8, true))
        .collect();
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    let arrays = columns
        .into_iter()
        .map(|c| Arc::new(arrow::array::StringArray::from(c)) as ArrayRef)
        .collect();
    Ok(vec![RecordBatch::try_new(schema, arrays)?])
}

/// Undoes the backslash escapes of the text COPY format.
fn unescape_text(field: &str) -> String {
    if !field.contains('\\') {
        return field.to_owned();
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};

    use super::*;

    #[test]
    fn copy_text_format_unescapes_and_reads_nulls() {
        let format = format(&[], &[]).unwrap();
        let batches = parse_text(b"1\ta\\tb\n2\t\\N\n\\.\n", 2, &format).unwrap();
        let col = batches[0].column(1).as_string::<i32>();
        assert_eq!(col.value(0), "a\tb");
        assert!(col.is_null(1));
    }
}
