//! The Postgres wire frontend: accepts connections and serves them with pgwire.

mod encode;
pub mod handler;
mod params;
/// Values as Postgres prints them in text format.
mod pg_text;
pub mod sqlstate;

use std::future::Future;
use std::sync::Arc;

use pgwire::api::PgWireServerHandlers;
use pgwire::api::auth::StartupHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use tokio::net::TcpListener;

use crate::engine::Engine;
use handler::Backend;

/// Hands the one shared [`Backend`] to pgwire for every role.
struct Handlers(Arc<Backend>);

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.0.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.0.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.0.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.0.clone()
    }
}

/// Serves connections on `listener` until `shutdown` completes.
pub async fn serve(engine: Arc<Engine>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let metrics = engine.metrics().clone();
    let handlers = Arc::new(Handlers(Arc::new(Backend::new(engine))));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let handlers = handlers.clone();
                    let open = metrics.connection();
                    tokio::spawn(async move {
                        let _open = open;
                        if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            },
        }
    }
}
