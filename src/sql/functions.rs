//! Scalar functions Sluice defines in place of DataFusion's.
//!
//! [`version_udf`]: `version()` answered `Apache DataFusion 55.2.0, ...`; client libraries that
//! parse `PostgreSQL X.Y` from it refused to connect. It now names the Postgres version whose
//! protocol and catalog Sluice speaks, and Sluice's own, as RisingWave does.
//!
//! [`bytea_in_udf`]: text to `bytea` as Postgres reads it (`'\x00ff'` is two bytes, other text
//! its own bytes); DataFusion's cast took the bytes of the text, so `'\x00ff'::bytea` was six
//! bytes and `WHERE b = '\x..'` never matched. Casts of text to `bytea` are planned as calls
//! of it (see `sql::analyzer`).
//!
//! [`PgTypeof`]: `pg_typeof(value)`, the name of the value's Postgres type.
//!
//! [`OctetLength`]: `octet_length` of text or `bytea` (DataFusion's took text only), which is
//! also what `length(bytea)` is, as in Postgres.
//!
//! [`NumericCast`]: a numeric cast to text, a float or another numeric as Postgres casts it:
//! `NaN` and the infinities stay themselves (see [`crate::types::numeric`]; Arrow's cast took them for
//! the large numbers that stand for them), and text has the value's digits (`1.5`, not the
//! unconstrained numeric's `1.50000000000000000000`); text cast to a numeric reads `NaN` and
//! `Infinity` (`WHERE x = 'NaN'`). Text cast to a date or timestamp is read as Postgres reads
//! it too ([`crate::types::datetime_text`]: `'2024-01-01 10:00'`, an offset ignored by a
//! `timestamp`).

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility, create_udf,
};
use datafusion::scalar::ScalarValue;

use crate::types::{CastMode, cast_to};

/// What `version()` returns.
pub const VERSION: &str = concat!("PostgreSQL 16.6 (Sluice ", env!("CARGO_PKG_VERSION"), ")");

/// `version()`.
pub fn version_udf() -> ScalarUDF {
    create_udf(
        "version",
        Vec::new(),
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|_| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(VERSION.to_owned()))))),
    )
}

/// `pg_typeof(value)`: the name of the value's Postgres type, as Postgres prints a regtype.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgTypeof {
    signature: Signature,
}

impl Default for PgTypeof {
    fn default() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }
}

/// The Postgres name of the type of values of `field` (its jsonb and varchar marks included).
fn postgres_type_name(field: &arrow::datatypes::Field) -> String {
    use arrow::datatypes::DataType as A;
    let name = match field.data_type() {
        A::Null => "unknown",
        A::Boolean => "boolean",
        A::Int16 | A::Int8 => "smallint",
        A::Int32 => "integer",
        A::Int64 => "bigint",
        A::UInt32 => "oid",
        A::Float32 => "real",
        A::Float64 => "double precision",
        A::Decimal128(..) | A::Decimal256(..) => "numeric",
        A::Utf8 | A::LargeUtf8 | A::Utf8View if crate::sql::jsonb::is_marked(field) => "jsonb",
        A::Utf8 | A::LargeUtf8 | A::Utf8View => match crate::types::varchar_mark(field) {
            Some(_) => "character varying",
            None => "text",
        },
        A::Date32 | A::Date64 => "date",
        A::Timestamp(_, None) => "timestamp without time zone",
        A::Timestamp(_, Some(_)) => "timestamp with time zone",
        A::Time32(_) | A::Time64(_) => "time without time zone",
        A::Interval(_) | A::Duration(_) => "interval",
        A::Binary | A::LargeBinary | A::BinaryView => "bytea",
        A::List(element) | A::LargeList(element) => {
            return format!("{}[]", postgres_type_name(element));
        }
        other => return other.to_string(),
    };
    name.to_owned()
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let name = postgres_type_name(&args.arg_fields[0]);
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

/// `session_user` (and `current_user`, `user`, `current_role`, which Sluice's parser writes so):
/// `user`, the role the session logged in as.
pub fn session_user_udf(user: &str) -> ScalarUDF {
    let user = user.to_owned();
    create_udf(
        "session_user",
        Vec::new(),
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |_| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(user.clone()))))),
    )
}

/// `out`, one value per row of `arg`, as the result of a function of `arg`: a scalar when `arg`
/// was one.
pub fn shaped_like(
    arg: &ColumnarValue,
    out: arrow::array::ArrayRef,
) -> datafusion::error::Result<ColumnarValue> {
    Ok(match arg {
        ColumnarValue::Scalar(_) => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
        ColumnarValue::Array(_) => ColumnarValue::Array(out),
    })
}

/// `current_setting(name [, missing_ok])`: the value `SHOW name` gives, from `settings`; an
/// unknown name is an error (42704), or NULL when `missing_ok`.
pub fn current_setting_udf(settings: std::collections::HashMap<String, String>) -> ScalarUDF {
    let signature = Signature::one_of(
        vec![
            TypeSignature::Exact(vec![DataType::Utf8]),
            TypeSignature::Exact(vec![DataType::Utf8, DataType::Boolean]),
        ],
        Volatility::Stable,
    );
    let fun: datafusion::logical_expr::ScalarFunctionImplementation =
        Arc::new(move |args: &[ColumnarValue]| {
            let names = args[0].to_array(1)?;
            let missing_ok = match args.get(1) {
                Some(ColumnarValue::Scalar(ScalarValue::Boolean(Some(ok)))) => *ok,
                _ => false,
            };
            let mut out = arrow::array::StringBuilder::new();
            for name in names.as_string::<i32>().iter() {
                let Some(name) = name else {
                    out.append_null();
                    continue;
                };
                match settings.get(&name.to_lowercase()) {
                    Some(value) => out.append_value(value),
                    None if missing_ok => out.append_null(),
                    None => {
                        return Err(DataFusionError::External(Box::new(
                            crate::error::Error::UnknownSetting(name.to_owned()),
                        )));
                    }
                }
            }
            shaped_like(&args[0], Arc::new(out.finish()))
        });
    ScalarUDF::from(datafusion::logical_expr::SimpleScalarUDF::new_with_signature(
        "current_setting",
        signature,
        DataType::Utf8,
        fun,
    ))
}

/// Sets a session variable by name, as `SET` does (see [`set_config_udf`]).
pub type SetVariable = Arc<dyn Fn(&str, String) -> crate::error::Result<()> + Send + Sync>;

/// `set_config(name, value, is_local)`: `SET name = value` from a query, returning the value.
/// With `is_local` the setting lasts to the end of the transaction, which in Sluice is the
/// statement, so it changes nothing after it. `set` sets a variable of the session, as `SET`
/// does.
pub fn set_config_udf(set: SetVariable) -> ScalarUDF {
    let fun: datafusion::logical_expr::ScalarFunctionImplementation =
        Arc::new(move |args: &[ColumnarValue]| {
            let rows = args.iter().find_map(|a| match a {
                ColumnarValue::Array(a) => Some(a.len()),
                ColumnarValue::Scalar(_) => None,
            });
            let arrays: Vec<arrow::array::ArrayRef> =
                args.iter().map(|a| a.to_array(rows.unwrap_or(1))).collect::<Result<_, _>>()?;
            let (names, values) = (arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>());
            let local = arrays[2].as_boolean();
            let mut out = arrow::array::StringBuilder::new();
            for row in 0..names.len() {
                if names.is_null(row) {
                    return Err(DataFusionError::Execution(
                        "set_config: the setting name is NULL".into(),
                    ));
                }
                let value = (!values.is_null(row)).then(|| values.value(row).to_owned());
                if !(local.is_valid(row) && local.value(row)) {
                    let text = value.clone().unwrap_or_default();
                    set(names.value(row), text)
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                }
                out.append_option(value);
            }
            let out = out.finish();
            Ok(match rows {
                None => ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?),
                Some(_) => ColumnarValue::Array(Arc::new(out)),
            })
        });
    ScalarUDF::from(datafusion::logical_expr::SimpleScalarUDF::new_with_signature(
        "set_config",
        Signature::exact(
            vec![DataType::Utf8, DataType::Utf8, DataType::Boolean],
            Volatility::Volatile,
        ),
        DataType::Utf8,
        fun,
    ))
}

/// The name of [`bytea_in_udf`]; not meant to be called by users.
pub const BYTEA_IN: &str = "sluice_bytea_in";

/// Text to `bytea`, as Postgres reads it: `\x` and hex digits, or the text's own bytes.
pub fn bytea_in_udf() -> ScalarUDF {
    create_udf(
        BYTEA_IN,
        vec![DataType::Utf8],
        DataType::Binary,
        Volatility::Immutable,
        Arc::new(|args| {
            let decode = |array: &arrow::array::ArrayRef| {
                cast_to(array, crate::types::DataType::Bytea, CastMode::Strict)
                    .map_err(|e| DataFusionError::External(Box::new(e)))
            };
            match &args[0] {
                ColumnarValue::Array(array) => Ok(ColumnarValue::Array(decode(array)?)),
                ColumnarValue::Scalar(scalar) => {
                    let decoded = decode(&scalar.to_array()?)?;
                    Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&decoded, 0)?))
                }
            }
        }),
    )
}

/// The name of [`round_half_even_udf`], which queries cannot call by name.
pub const ROUND_HALF_EVEN: &str = "sluice_round_half_even";

/// A `double precision` rounded half to even (`2.5` is 2, `3.5` is 4), as Postgres's `rint`
/// rounds a float cast to an integer type. One call: an expression that repeated its argument
/// would grow exponentially with nested casts.
pub fn round_half_even_udf() -> ScalarUDF {
    create_udf(
        ROUND_HALF_EVEN,
        vec![DataType::Float64],
        DataType::Float64,
        Volatility::Immutable,
        Arc::new(|args| {
            let round = |array: &arrow::array::ArrayRef| -> datafusion::error::Result<arrow::array::ArrayRef> {
                let values = array.as_primitive::<arrow::datatypes::Float64Type>();
                let rounded: arrow::array::Float64Array = values.unary(f64::round_ties_even);
                Ok(Arc::new(rounded))
            };
            match &args[0] {
                ColumnarValue::Array(array) => Ok(ColumnarValue::Array(round(array)?)),
                ColumnarValue::Scalar(scalar) => {
                    let rounded = round(&scalar.to_array()?)?;
                    Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&rounded, 0)?))
                }
            }
        }),
    )
}

/// `octet_length(text | bytea)`: the number of bytes.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OctetLength {
    signature: Signature,
}

impl Default for OctetLength {
    fn default() -> Self {
        let types = [DataType::Utf8, DataType::LargeUtf8, DataType::Binary, DataType::LargeBinary];
        let one_of = types.into_iter().map(|t| TypeSignature::Exact(vec![t])).collect();
        Self { signature: Signature::one_of(one_of, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for OctetLength {
    fn name(&self) -> &str {
        "octet_length"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(match args.first() {
            Some(DataType::LargeUtf8 | DataType::LargeBinary) => DataType::Int64,
            _ => DataType::Int32,
        })
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let length = |array: &arrow::array::ArrayRef| {
            Ok::<_, DataFusionError>(arrow::compute::kernels::length::length(array)?)
        };
        match &args.args[0] {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(length(array)?)),
            ColumnarValue::Scalar(scalar) => {
                let lengths = length(&scalar.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&lengths, 0)?))
            }
        }
    }
}

/// A numeric cast to text, a float or another numeric, or text cast to a numeric (see the
/// module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericCast {
    signature: Signature,
    to: DataType,
}

impl NumericCast {
    /// The cast of a numeric to `to`.
    pub fn new(to: DataType) -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable), to }
    }

    /// Whether a cast from `from` to `to` is one of these.
    pub fn applies(from: &DataType, to: &DataType) -> bool {
        let numeric =
            |t: &DataType| matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..));
        let to_text_or_float = matches!(to, DataType::Utf8 | DataType::Float32 | DataType::Float64);
        let datetime = matches!(to, DataType::Date32 | DataType::Timestamp(..));
        from != to
            && ((numeric(from) && (numeric(to) || to_text_or_float))
                || (from == &DataType::Utf8 && (numeric(to) || datetime)))
    }

    fn cast(
        &self,
        array: &arrow::array::ArrayRef,
    ) -> datafusion::error::Result<arrow::array::ArrayRef> {
        let external = |e: crate::error::Error| DataFusionError::External(Box::new(e));
        match &self.to {
            DataType::Utf8 => Ok(Arc::new(crate::types::numeric::texts(array.as_ref()))),
            DataType::Float32 | DataType::Float64 => {
                let floats = crate::types::numeric::floats(array.as_ref());
                Ok(arrow::compute::cast(&floats, &self.to)?)
            }
            to => {
                let target = crate::types::DataType::from_arrow(to).map_err(external)?;
                let cast = cast_to(array, target, CastMode::Strict).map_err(external)?;
                // Sluice's timestamps are microseconds; a literal's may be nanoseconds.
                match cast.data_type() == to {
                    true => Ok(cast),
                    false => Ok(arrow::compute::cast(&cast, to)?),
                }
            }
        }
    }
}

impl ScalarUDFImpl for NumericCast {
    fn name(&self) -> &str {
        "sluice_numeric_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        match &args.args[0] {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(self.cast(array)?)),
            ColumnarValue::Scalar(scalar) => {
                let cast = self.cast(&scalar.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&cast, 0)?))
            }
        }
    }
}
