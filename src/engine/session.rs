//! Per-connection session variables: `SET`, `SHOW`.
//!
//! Any variable can be set; `SHOW` of a variable never set answers its default, and an unknown
//! one is an error, as in Postgres.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::engine::{CommandTag, Output};
use crate::error::{Error, Result};

/// Defaults of the variables `SHOW` knows, by lower-case name.
const DEFAULTS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("client_encoding", "UTF8"),
    ("datestyle", "ISO, YMD"),
    ("intervalstyle", "postgres"),
    ("timezone", "UTC"),
    ("search_path", "public"),
    ("server_encoding", "UTF8"),
    ("server_version", "16.6"),
    ("server_version_num", "160006"),
    ("standard_conforming_strings", "on"),
    ("transaction_isolation", "read committed"),
    ("transaction isolation level", "read committed"),
    ("extra_float_digits", "1"),
    ("integer_datetimes", "on"),
    ("max_identifier_length", "63"),
    ("statement_timeout", "0"),
    ("background_ddl", "false"),
    ("eager_aggregation", "on"),
    ("backfill_rate_limit", "-1"),
    ("client_min_messages", "notice"),
    ("progress_notice_interval", "5"),
];

/// The variables of a session, shared with the functions of its queries that set them.
#[derive(Debug, Clone)]
pub struct SessionVariables(Arc<Mutex<HashMap<String, String>>>);

impl SessionVariables {
    /// Sets a variable as `SET` does (see [`Session::set_value`]).
    pub fn set(&self, name: &str, value: String) -> Result<()> {
        let session = Session { vars: self.0.clone(), ..Session::default() };
        session.set_value(name, value)
    }

    /// [`SessionVariables::set`] as the function `set_config` calls.
    pub fn setter(self) -> crate::sql::functions::SetVariable {
        Arc::new(move |name, value| self.set(name, value))
    }
}

/// One open cursor (see [`cursor`](crate::engine::cursor)): the rest of its query's rows.
pub struct Cursor {
    pub(crate) schema: SchemaRef,
    pub(crate) stream: SendableRecordBatchStream,
    /// Rows of a batch a `FETCH` did not take.
    pub(crate) rest: Option<RecordBatch>,
}

/// A session's open cursors, by name.
#[derive(Default)]
pub struct Cursors(pub(crate) tokio::sync::Mutex<HashMap<String, Cursor>>);

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cursors")
    }
}

/// One connection's state.
#[derive(Debug, Default)]
pub struct Session {
    vars: Arc<Mutex<HashMap<String, String>>>,
    /// Where notices of the running statement go, while one runs.
    notices: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Open cursors.
    cursors: Cursors,
    /// The role the client logged in as.
    user: Option<String>,
}

impl Session {
    /// A session whose variables start from the client's startup parameters.
    pub fn with_startup_parameters<'a>(
        params: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Self {
        let mut user = None;
        let vars = params
            .into_iter()
            .filter(|(k, v)| match k.as_str() {
                "user" => {
                    user = Some(v.to_string());
                    false
                }
                "database" => false,
                _ => true,
            })
            .map(|(k, v)| (k.to_lowercase(), v.clone()))
            .collect();
        Self {
            vars: Arc::new(Mutex::new(vars)),
            notices: Mutex::default(),
            cursors: Cursors::default(),
            user,
        }
    }

    /// The role the client logged in as (`current_user`).
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The session's open cursors.
    pub fn cursors(&self) -> &Cursors {
        &self.cursors
    }

    /// Sends the notices of the statements run from now on to `sink` (`None`: drops them).
    pub fn set_notice_sink(&self, sink: Option<mpsc::UnboundedSender<String>>) {
        *self.notices.lock() = sink;
    }

    /// Sends a `NOTICE` to the client, unless `client_min_messages` asks for fewer messages.
    pub fn notice(&self, message: String) {
        let wanted = self.get("client_min_messages").is_none_or(|level| {
            matches!(
                level.to_lowercase().as_str(),
                "debug5" | "debug4" | "debug3" | "debug2" | "debug1" | "debug" | "log" | "notice"
            )
        });
        if let (true, Some(sink)) = (wanted, self.notices.lock().as_ref()) {
            let _ = sink.send(message);
        }
    }

    /// `progress_notice_interval`: seconds between the progress notices of a foreground
    /// `CREATE`; `None` (0) sends none.
    pub fn progress_notice_interval(&self) -> Result<Option<std::time::Duration>> {
        let Some(value) = self.vars.lock().get("progress_notice_interval").cloned() else {
            return Ok(Some(std::time::Duration::from_secs(5)));
        };
        if value.eq_ignore_ascii_case("default") {
            return Ok(Some(std::time::Duration::from_secs(5)));
        }
        match value.parse::<f64>() {
            Ok(0.0) => Ok(None),
            Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(Some(std::time::Duration::from_secs_f64(s))),
            _ => Err(Error::InvalidStatement(format!(
                "progress_notice_interval is a number of seconds (0: no progress notices), not \
                 {value}"
            ))),
        }
    }

    /// The current value of a variable, if it has one.
    pub fn get(&self, name: &str) -> Option<String> {
        let name = name.to_lowercase();
        if let Some(value) = self.vars.lock().get(&name) {
            return Some(value.clone());
        }
        match name.as_str() {
            "streaming_parallelism" => Some(default_parallelism().to_string()),
            _ => default_of(&name).map(str::to_owned),
        }
    }

    /// Every variable `SHOW` knows, with its current value.
    pub fn settings(&self) -> HashMap<String, String> {
        let mut all: HashMap<String, String> =
            DEFAULTS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        all.insert("streaming_parallelism".into(), default_parallelism().to_string());
        all.extend(self.vars.lock().iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }

    /// Actors per fragment for views created in this session: `streaming_parallelism`, by
    /// default the number of cores.
    pub fn streaming_parallelism(&self) -> Result<usize> {
        let Some(value) = self.vars.lock().get("streaming_parallelism").cloned() else {
            return Ok(default_parallelism());
        };
        match value.to_lowercase().as_str() {
            "default" | "0" | "" => Ok(default_parallelism()),
            text => text.parse::<usize>().ok().filter(|n| (1..=256).contains(n)).ok_or_else(|| {
                Error::InvalidStatement(format!(
                    "streaming_parallelism must be a number from 1 to 256 or DEFAULT, not {value}"
                ))
            }),
        }
    }

    /// `background_ddl`: whether `CREATE MATERIALIZED VIEW` and `CREATE TABLE .. FROM` return
    /// as soon as their job has started.
    pub fn background_ddl(&self) -> Result<bool> {
        self.flag("background_ddl", "true or false")
    }

    /// `eager_aggregation`: whether new views may pre-aggregate a join side
    /// ([`crate::sql::eager`]); on unless set off (docs/backfill.md says when it pays).
    pub fn eager_aggregation(&self) -> Result<bool> {
        self.flag("eager_aggregation", "on or off")
    }

    /// A boolean variable: its value if set, else (also after `SET .. = DEFAULT`) its default;
    /// `values` names the accepted words in errors.
    fn flag(&self, name: &str, values: &str) -> Result<bool> {
        let value = match self.get(name) {
            Some(value) if !value.eq_ignore_ascii_case("default") => value,
            _ => default_of(name).unwrap_or("off").to_owned(),
        };
        match value.to_lowercase().as_str() {
            "true" | "on" | "1" | "yes" => Ok(true),
            "false" | "off" | "0" | "no" => Ok(false),
            _ => Err(Error::InvalidStatement(format!("{name} must be {values}, not {value}"))),
        }
    }

    /// `backfill_rate_limit`: snapshot rows per second per actor for new backfills; `None`
    /// when unset, `-1` or `DEFAULT` (no limit), `Some(0)` pauses them.
    pub fn backfill_rate_limit(&self) -> Result<Option<u64>> {
        let Some(value) = self.vars.lock().get("backfill_rate_limit").cloned() else {
            return Ok(None);
        };
        if value.eq_ignore_ascii_case("default") {
            return Ok(None);
        }
        parse_rate_limit(Some(value.parse::<i64>().map_err(|_| {
            Error::InvalidStatement(format!(
                "backfill_rate_limit must be an integer (-1: no limit, 0: paused), not {value}"
            ))
        })?))
    }

    /// Runs a `SET` statement.
    pub fn set(&self, set: ast::Set) -> Result<Output> {
        let (name, values) = match set {
            ast::Set::SingleAssignment { variable, values, .. } => (variable.to_string(), values),
            ast::Set::SetTimeZone { value, .. } => ("timezone".to_owned(), vec![value]),
            other => return Err(Error::Unsupported(format!("SET form {other}"))),
        };
        let value = values.iter().map(value_text).collect::<Vec<_>>().join(", ");
        self.set_value(&name, value)?;
        Ok(Output::Command(CommandTag::new("SET")))
    }

    /// A handle on the session's variables, for `set_config` (see [`Session::set_value`]).
    pub fn variables(&self) -> SessionVariables {
        SessionVariables(self.vars.clone())
    }

    /// Sets variable `name`, as `SET` does: Sluice's own variables are checked first.
    pub fn set_value(&self, name: &str, value: String) -> Result<()> {
        let name = name.to_lowercase();
        let previous = self.vars.lock().insert(name.clone(), value);
        // Sluice's own variables are checked when set, not when first used.
        let checked = match name.as_str() {
            "background_ddl" => self.background_ddl().map(drop),
            "eager_aggregation" => self.eager_aggregation().map(drop),
            "backfill_rate_limit" => self.backfill_rate_limit().map(drop),
            "streaming_parallelism" => self.streaming_parallelism().map(drop),
            "progress_notice_interval" => self.progress_notice_interval().map(drop),
            _ => Ok(()),
        };
        if let Err(e) = checked {
            let mut vars = self.vars.lock();
            match previous {
                Some(previous) => vars.insert(name, previous),
                None => vars.remove(&name),
            };
            return Err(e);
        }
        Ok(())
    }

    /// Runs a `SHOW` statement: one row, one column named after the variable.
    pub fn show(&self, variable: &[ast::Ident]) -> Result<Output> {
        let name = variable.iter().map(|i| i.value.to_lowercase()).collect::<Vec<_>>().join(" ");
        let value = self.get(&name).ok_or_else(|| Error::UnknownSetting(name.clone()))?;
        let column = variable.last().map_or(name.clone(), |i| i.value.to_lowercase());
        Ok(single_text_row(&column, &value))
    }
}

/// A rate limit as written (`None`: DEFAULT) as a limit: -1 and DEFAULT mean none.
pub fn parse_rate_limit(value: Option<i64>) -> Result<Option<u64>> {
    match value {
        None | Some(-1) => Ok(None),
        Some(n) if n >= 0 => Ok(Some(n as u64)),
        Some(n) => Err(Error::InvalidStatement(format!(
            "a backfill rate limit is -1 (none), 0 (paused) or a positive number of rows per \
             second, not {n}"
        ))),
    }
}

/// The number of cores, at least 1.
pub fn default_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn default_of(name: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

/// The text of a SET value: strings unquoted, everything else as written.
fn value_text(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string(),
    }
}

/// An output of one text column and one row.
pub fn single_text_row(column: &str, value: &str) -> Output {
    text_rows(&[column], vec![vec![value.to_owned()]])
}

/// An output of text columns, built from rows of strings.
pub fn text_rows(columns: &[&str], rows: Vec<Vec<String>>) -> Output {
    let fields: Vec<Field> = columns.iter().map(|c| Field::new(*c, DataType::Utf8, true)).collect();
    let schema = Arc::new(Schema::new(fields));
    let arrays = (0..columns.len())
        .map(|i| Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r[i].as_str()))) as _)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).expect("columns match schema");
    let stream = RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter([Ok(batch)]));
    Output::Rows { schema, stream: Box::pin(stream) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parser::{Statement, parse};

    fn set(session: &Session, sql: &str) {
        let Statement::Sql(stmt) = parse(sql).unwrap().remove(0) else { panic!() };
        let ast::Statement::Set(s) = *stmt else { panic!("not a SET") };
        session.set(s).unwrap();
    }

    #[test]
    fn set_then_show() {
        let session = Session::default();
        assert_eq!(session.get("TimeZone").as_deref(), Some("UTC"));
        set(&session, "SET application_name = 'psql'");
        assert_eq!(session.get("application_name").as_deref(), Some("psql"));
        set(&session, "SET search_path TO public, other");
        assert_eq!(session.get("search_path").as_deref(), Some("public, other"));
        assert_eq!(session.get("no_such_thing"), None);
    }

    #[test]
    fn a_flag_not_set_or_set_to_default_has_its_default_value() {
        let session = Session::default();
        assert!(session.eager_aggregation().unwrap(), "eager aggregation is on by default");
        assert!(!session.background_ddl().unwrap(), "background DDL is off by default");
        set(&session, "SET eager_aggregation = off");
        set(&session, "SET background_ddl = true");
        assert!(!session.eager_aggregation().unwrap());
        assert!(session.background_ddl().unwrap());
        set(&session, "SET eager_aggregation = DEFAULT");
        set(&session, "SET background_ddl = DEFAULT");
        assert!(session.eager_aggregation().unwrap());
        assert!(!session.background_ddl().unwrap());
    }
}
