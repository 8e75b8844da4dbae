//! The pgwire handlers: simple and extended query protocol, and `COPY .. FROM STDIN`.
//!
//! Each connection keeps its [`Session`] and any pending COPY in pgwire's per-connection
//! extensions. Statements arrive as text, are parsed by Sluice's parser and run by the engine;
//! only this module speaks the protocol.

use std::fmt::Debug;
use std::sync::Arc;

use arrow::datatypes::DataType as ArrowType;
use async_trait::async_trait;
use datafusion::sql::sqlparser::ast;
use futures::Sink;
use parking_lot::Mutex;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler, send_describe_response};
use pgwire::api::results::{CopyResponse, DescribePortalResponse, FieldInfo, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::extendedquery::{Describe, TARGET_TYPE_BYTE_PORTAL};

use crate::engine::copy::CopyTarget;
use crate::engine::{Engine, Output, Session};
use crate::error::Error;
use crate::frontend::encode;
use crate::frontend::params::{Prepared, describe, substitute};
use crate::frontend::sqlstate::{error_info, pg_error};
use crate::sql::parser::{Statement, parse};

/// A `COPY .. FROM STDIN` waiting for its data.
struct PendingCopy {
    target: CopyTarget,
    data: Vec<u8>,
}

type CopySlot = Mutex<Option<PendingCopy>>;

/// Serves every connection; one instance is shared.
pub struct Backend {
    engine: Arc<Engine>,
    parser: Arc<PreparedParser>,
}

impl Backend {
    /// A backend running statements on `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { parser: Arc::new(PreparedParser { engine: engine.clone() }), engine }
    }
}

fn session<C: ClientInfo>(client: &C) -> Arc<Session> {
    client
        .session_extensions()
        .get_or_insert_with(|| Session::with_startup_parameters(client.metadata().iter()))
}

impl NoopStartupHandler for Backend {}

#[async_trait]
impl SimpleQueryHandler for Backend {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match parse(query) {
            Ok(s) if s.is_empty() => return Ok(vec![Response::EmptyQuery]),
            Ok(s) => s,
            Err(e) => {
                self.engine.metrics().statement("invalid", false);
                return Ok(vec![Response::Error(Box::new(error_info(&e)))]);
            }
        };
        let session = session(client);
        let mut responses = Vec::with_capacity(statements.len());
        for statement in statements {
            if let Some(name) = deallocated(&statement) {
                // Prepared statements live in the connection, not in the engine.
                if !name.eq_ignore_ascii_case("all") {
                    client.portal_store().rm_statement(name);
                }
                responses.push(Response::Execution(Tag::new("DEALLOCATE")));
                continue;
            }
            let run = self.engine.execute(&session, statement);
            match with_notices(client, &session, run).await? {
                Ok(Output::CopyIn(target)) => {
                    responses.push(copy_in(client, target));
                    break;
                }
                Ok(output) => {
                    if let Some(notice) = transaction_notice(&output) {
                        send_notice(client, notice).await?;
                    }
                    responses.push(respond(output, &Format::UnifiedText)?);
                }
                Err(e) => {
                    responses.push(Response::Error(Box::new(error_info(&e))));
                    break;
                }
            }
        }
        Ok(responses)
    }
}

/// A notice telling the client that transaction blocks do not group statements: each
/// statement commits when it returns, and ROLLBACK undoes nothing.
fn transaction_notice(output: &Output) -> Option<ErrorInfo> {
    let (severity, message) = match output {
        Output::Transaction { start: true, .. } => (
            "NOTICE",
            "Sluice runs every statement in its own transaction: each commits when it returns",
        ),
        Output::Transaction { tag: "ROLLBACK", .. } => {
            ("WARNING", "ROLLBACK cannot undo statements: each was committed when it returned")
        }
        _ => return None,
    };
    Some(ErrorInfo::new(severity.to_owned(), "00000".to_owned(), message.to_owned()))
}

/// Runs a statement, sending the notices it raises to the client as they come (a foreground
/// `CREATE`'s progress), not when it returns.
async fn with_notices<C, R>(
    client: &mut C,
    session: &Session,
    run: impl Future<Output = R>,
) -> PgWireResult<R>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let (sink, mut notices) = tokio::sync::mpsc::unbounded_channel();
    session.set_notice_sink(Some(sink));
    let mut run = std::pin::pin!(run);
    let mut sent = Ok(());
    let result = loop {
        tokio::select! {
            result = &mut run => break result,
            Some(message) = notices.recv(), if sent.is_ok() => {
                sent = send_notice(client, notice(message)).await;
            }
        }
    };
    session.set_notice_sink(None);
    while let (Ok(()), Ok(message)) = (&sent, notices.try_recv()) {
        sent = send_notice(client, notice(message)).await;
    }
    sent.map(|()| result)
}

fn notice(message: String) -> ErrorInfo {
    ErrorInfo::new("NOTICE".to_owned(), "00000".to_owned(), message)
}

async fn send_notice<C>(client: &mut C, notice: ErrorInfo) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    futures::SinkExt::send(client, PgWireBackendMessage::NoticeResponse(notice.into())).await?;
    Ok(())
}

/// The prepared statement a `DEALLOCATE` names (`ALL` for every one).
fn deallocated(statement: &Statement) -> Option<&str> {
    match statement {
        Statement::Sql(stmt) => match stmt.as_ref() {
            ast::Statement::Deallocate { name, .. } => Some(&name.value),
            _ => None,
        },
        _ => None,
    }
}

/// The response of a finished statement.
fn respond(output: Output, format: &Format) -> PgWireResult<Response> {
    Ok(match output {
        Output::Rows { schema, stream } => encode::rows(schema, stream, format)?,
        Output::Command(tag) => Response::Execution(encode::tag(&tag)),
        Output::Transaction { tag, start: true } => Response::TransactionStart(Tag::new(tag)),
        Output::Transaction { tag, start: false } => Response::TransactionEnd(Tag::new(tag)),
        // Both protocols start it with `copy_in` before they come here.
        Output::CopyIn(_) => {
            return Err(pg_error(&Error::Unsupported("COPY FROM STDIN here".into())));
        }
        Output::CopyOut { schema, stream, format } => encode::copy_out(schema, stream, &format)?,
    })
}

/// Parses and describes statements of the extended protocol.
pub struct PreparedParser {
    engine: Arc<Engine>,
}

#[async_trait]
impl QueryParser for PreparedParser {
    type Statement = Prepared;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut statements = parse(sql).map_err(|e| pg_error(&e))?;
        if statements.len() > 1 {
            return Err(pg_error(&Error::Parse(
                "cannot insert multiple commands into a prepared statement".into(),
            )));
        }
        let Some(statement) = statements.pop() else {
            return Ok(None);
        };
        let (mut param_types, schema) =
            describe(&self.engine, &session(client), &statement).await.map_err(|e| pg_error(&e))?;
        for (i, client_type) in types.iter().enumerate() {
            if let Some(ty) = client_type.as_ref().and_then(arrow_of_pg) {
                if param_types.len() <= i {
                    param_types.resize(i + 1, None);
                }
                param_types[i] = Some(ty);
            }
        }
        Ok(Some(Prepared { statement: Some(statement), param_types, schema }))
    }

    fn get_parameter_types(&self, stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(stmt.param_types.iter().map(|t| encode::parameter_type(t.as_ref())).collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Prepared,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.schema {
            Some(schema) => encode::fields(schema, format.unwrap_or(&Format::UnifiedText)),
            None => Ok(Vec::new()),
        }
    }
}

/// The Arrow type for a parameter type the client declared.
fn arrow_of_pg(ty: &Type) -> Option<ArrowType> {
    Some(match *ty {
        Type::BOOL => ArrowType::Boolean,
        Type::INT2 => ArrowType::Int16,
        Type::INT4 => ArrowType::Int32,
        Type::INT8 => ArrowType::Int64,
        Type::FLOAT4 => ArrowType::Float32,
        Type::FLOAT8 => ArrowType::Float64,
        Type::TEXT | Type::VARCHAR => ArrowType::Utf8,
        Type::DATE => ArrowType::Date32,
        Type::BYTEA => ArrowType::Binary,
        _ => return None,
    })
}

#[async_trait]
impl ExtendedQueryHandler for Backend {
    type Statement = Prepared;
    type QueryParser = PreparedParser;

    fn query_parser(&self) -> Arc<PreparedParser> {
        self.parser.clone()
    }

    /// A cursor `DECLARE`d in SQL is a portal too: clients describe it by its name to learn its
    /// columns (psycopg's named cursors do).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_PORTAL {
            let name = message.name.as_deref().unwrap_or_default();
            if client.portal_store().get_portal(name).is_none()
                && let Ok(schema) = self.engine.cursor_schema(&session(client), name).await
            {
                let fields = encode::fields(&schema, &Format::UnifiedText)?;
                return send_describe_response(client, &DescribePortalResponse::new(fields)).await;
            }
        }
        self._on_describe(client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Prepared>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        let Some(statement) = prepared.statement.clone() else {
            return Ok(Response::EmptyQuery);
        };
        let statement = substitute(portal, prepared, statement)?;
        let session = session(client);
        let run = self.engine.execute(&session, statement);
        let output = with_notices(client, &session, run).await?.map_err(|e| pg_error(&e))?;
        match output {
            Output::CopyIn(target) => Ok(copy_in(client, target)),
            output => respond(output, &portal.result_column_format),
        }
    }
}

/// Starts a `COPY .. FROM STDIN`: the data the client sends next goes to `target`.
fn copy_in<C: ClientInfo>(client: &C, target: CopyTarget) -> Response {
    let columns = target.columns.len();
    let format_code = i8::from(target.format.binary);
    let slot: Arc<CopySlot> = client.session_extensions().get_or_insert_with(CopySlot::default);
    *slot.lock() = Some(PendingCopy { target, data: Vec::new() });
    Response::CopyIn(CopyResponse::new(format_code, columns, futures::stream::empty()))
}

#[async_trait]
impl CopyHandler for Backend {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = client.session_extensions().get::<CopySlot>().ok_or_else(no_copy)?;
        let mut pending = slot.lock();
        pending.as_mut().ok_or_else(no_copy)?.data.extend_from_slice(&copy_data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let pending = client.session_extensions().get::<CopySlot>().and_then(|s| s.lock().take());
        let pending = pending.ok_or_else(no_copy)?;
        let rows =
            self.engine.copy_in(&pending.target, &pending.data).await.map_err(|e| pg_error(&e))?;
        let tag = encode::tag(&crate::engine::CommandTag::with_rows("COPY", rows));
        futures::SinkExt::send(client, PgWireBackendMessage::CommandComplete(tag.into())).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(slot) = client.session_extensions().get::<CopySlot>() {
            slot.lock().take();
        }
        pg_error(&Error::InvalidInput(format!("COPY from stdin failed: {}", fail.message)))
    }
}

fn no_copy() -> PgWireError {
    pg_error(&Error::InvalidStatement("no COPY in progress".into()))
}
