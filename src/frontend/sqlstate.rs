//! The one place where errors become Postgres SQLSTATE codes.

use datafusion::error::DataFusionError;
use pgwire::error::{ErrorInfo, PgWireError};

use crate::error::Error;

/// The SQLSTATE that tells a client what kind of failure `error` is.
pub fn sqlstate(error: &Error) -> &'static str {
    match error {
        Error::Parse(_) => "42601",
        Error::UnknownRelation { .. } => "42P01",
        Error::UnknownColumn(_) => "42703",
        Error::DuplicateRelation(_) => "42P07",
        Error::DuplicateKey { .. } => "23505",
        Error::NotNull(_) => "23502",
        Error::InvalidInput(_) => "22P02",
        Error::TypeMismatch(_) => "42804",
        Error::UnknownSetting(_) => "42704",
        Error::UnknownCursor(_) => "34000",
        Error::DuplicateCursor(_) => "42P03",
        Error::WrongObjectType(_) => "42809",
        Error::DependentObjects(_) => "2BP01",
        Error::Unsupported(_) => "0A000",
        Error::InvalidStatement(_) => "42601",
        Error::DataFusion(e) => datafusion_sqlstate(e),
        Error::Arrow(arrow::error::ArrowError::DivideByZero) => "22012",
        Error::Arrow(arrow::error::ArrowError::ArithmeticOverflow(_)) => "22003",
        Error::Arrow(
            arrow::error::ArrowError::CastError(msg)
            | arrow::error::ArrowError::InvalidArgumentError(msg),
        ) if cast_out_of_range(msg) => "22003",
        Error::Arrow(_) => "22P02",
        Error::Upstream { code, .. } => code,
        Error::ObjectState(_) => "55000",
        Error::InvalidParameter(_) => "22023",
        Error::Canceled(_) => "57014",
        Error::Storage(_) | Error::Stream(_) => "XX000",
        Error::Recovered(_) => "40001",
        Error::ProgramLimit(_) => "54001",
        Error::OutOfRange(_) => "22003",
        Error::StringTooLong(_) => "22001",
        Error::BadCopyData(_) => "22P04",
        Error::Shutdown => "57P01",
    }
}

fn datafusion_sqlstate(error: &DataFusionError) -> &'static str {
    match error.find_root() {
        DataFusionError::SQL(..) => "42601",
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::SchemaError(e, _) => match e.as_ref() {
            datafusion::common::SchemaError::FieldNotFound { .. } => "42703",
            _ => "42P01",
        },
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            arrow::error::ArrowError::DivideByZero => "22012",
            arrow::error::ArrowError::ArithmeticOverflow(_) => "22003",
            arrow::error::ArrowError::CastError(msg)
            | arrow::error::ArrowError::InvalidArgumentError(msg)
                if cast_out_of_range(msg) =>
            {
                "22003"
            }
            _ => "22P02",
        },
        DataFusionError::Plan(msg) if msg.contains("not found") && msg.starts_with("table") => {
            "42P01"
        }
        DataFusionError::Plan(msg) if msg.contains("No field named") => "42703",
        DataFusionError::Plan(msg) if msg.contains("failed to match any signature") => "42883",
        DataFusionError::Plan(_) => "42804",
        DataFusionError::Execution(msg) if cast_out_of_range(msg) => "22003",
        DataFusionError::Execution(msg) if msg.contains("Cast error") => "22P02",
        DataFusionError::Execution(msg) if msg.contains("Divide by zero") => "22012",
        DataFusionError::Execution(_) => "22000",
        // Type errors DataFusion reports as internal ones.
        DataFusionError::Internal(msg) if msg.starts_with("Failed to coerce types") => "42804",
        // No overload of the function takes these argument types (Postgres: undefined_function,
        // "You might need to add explicit type casts").
        DataFusionError::Internal(msg) if msg.contains("failed to match any signature") => "42883",

        DataFusionError::External(e) => match e.downcast_ref::<Error>() {
            Some(e) => sqlstate(e),
            None => "XX000",
        },
        _ => "XX000",
    }
}

/// Whether a cast failed because the number does not fit the target type (22003), rather than
/// because its input does not parse (22P02).
fn cast_out_of_range(msg: &str) -> bool {
    msg.contains("is out of range")
        || msg.contains("Can't cast value")
        || msg.contains("Overflow")
        || msg.contains("is too large to store in a Decimal")
}

/// An `ErrorResponse` for a failed statement; the connection stays usable.
pub fn error_info(error: &Error) -> ErrorInfo {
    let message = match error {
        Error::DataFusion(e) => datafusion_message(e.find_root()),
        other => other.to_string(),
    };
    // A message travels as a C string: a NUL in it (an upstream's bytes quoted in a message)
    // would end it early and break the client's framing of the whole response.
    let message = match message.contains('\0') {
        true => message.replace('\0', "\\0"),
        false => message,
    };
    let mut info = ErrorInfo::new("ERROR".to_owned(), sqlstate(error).to_owned(), message);
    if let Error::DuplicateKey { key, .. } = error {
        info.detail = Some(format!("Key ({key}) already exists."));
    }
    info
}

/// DataFusion's message, reworded as Postgres words it where users rely on the wording.
fn datafusion_message(error: &DataFusionError) -> String {
    match error {
        DataFusionError::Plan(msg)
            if msg.starts_with("table '") && msg.ends_with("' not found") =>
        {
            let name = &msg["table '".len()..msg.len() - "' not found".len()];
            let name = name.rsplit('.').next().unwrap_or(name);
            format!("relation \"{name}\" does not exist")
        }
        DataFusionError::External(e) if e.downcast_ref::<Error>().is_some() => e.to_string(),
        DataFusionError::ArrowError(e, _)
            if matches!(**e, arrow::error::ArrowError::DivideByZero) =>
        {
            "division by zero".to_owned()
        }
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            arrow::error::ArrowError::ArithmeticOverflow(what) => {
                format!(
                    "integer out of range: {}",
                    what.trim_start_matches("Overflow happened on: ")
                )
            }
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// A [`PgWireError`] carrying the error's SQLSTATE.
pub fn pg_error(error: &Error) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_errors_map_to_their_codes() {
        let unknown = Error::UnknownRelation { kind: "table", name: "t".into() };
        assert_eq!(sqlstate(&unknown), "42P01");
        assert_eq!(sqlstate(&Error::Parse("x".into())), "42601");
        let dup = Error::DuplicateKey { table: "t".into(), key: "id)=(1".into() };
        assert_eq!(sqlstate(&dup), "23505");
        assert_eq!(error_info(&dup).message, dup.to_string());
        let df = Error::DataFusion(DataFusionError::Plan("table 'dev.public.x' not found".into()));
        assert_eq!(sqlstate(&df), "42P01");
        assert_eq!(error_info(&df).message, "relation \"x\" does not exist");
        // A NUL would end the message's C string early on the wire.
        let bytes = Error::OutOfRange("the upstream value \0\0ab".into());
        assert!(!error_info(&bytes).message.contains('\0'));
    }
}
