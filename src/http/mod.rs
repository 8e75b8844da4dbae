//! The HTTP server (`--http`, default `127.0.0.1:5691`): Prometheus metrics, a dashboard and
//! the JSON it polls. It only reads: no request changes the engine's state.
//!
//! - `GET /metrics`: every metric of [`crate::metrics`], Prometheus text format;
//! - `GET /`: the dashboard, one HTML page with its data inlined and a small script that
//!   polls the endpoints below (no build step, no external file);
//! - `GET /api/jobs`, `/api/graph/{job}`, `/api/sources`, `/api/checkpoints`: JSON.
//!
//! Unknown paths answer 404 and other methods 405.

pub mod api;

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use crate::engine::Engine;
use crate::metrics::CONTENT_TYPE;
use api::Observer;

/// The page; `/*DATA*/null` is replaced by the data it starts with.
const DASHBOARD: &str = include_str!("dashboard.html");

/// How far back the dashboard's checkpoint plot reaches.
const CHECKPOINT_WINDOW: Duration = Duration::from_secs(300);

/// The routes, over `engine`.
pub fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/metrics", get(metrics))
        .route("/api/jobs", get(jobs))
        .route("/api/graph/{job}", get(graph))
        .route("/api/sources", get(sources))
        .route("/api/checkpoints", get(checkpoints))
        .fallback(not_found)
        .with_state(Arc::new(Observer::new(engine)))
}

/// Serves the routes on `listener` until the process ends.
pub async fn serve(engine: Arc<Engine>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, router(engine)).await
}

type Shared = State<Arc<Observer>>;

async fn metrics(State(observer): Shared) -> Response {
    let text = observer.engine_metrics().encode(&observer.scrape().await);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

async fn jobs(State(observer): Shared) -> Json<Vec<api::JobView>> {
    Json(observer.jobs())
}

async fn graph(State(observer): Shared, Path(job): Path<String>) -> Response {
    match observer.graph(&job) {
        Some(graph) => Json(graph).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no job called {job}\n")).into_response(),
    }
}

async fn sources(State(observer): Shared) -> Json<Vec<api::SourceView>> {
    Json(observer.sources().await)
}

async fn checkpoints(State(observer): Shared) -> Json<Vec<crate::metrics::CheckpointSample>> {
    Json(observer.engine_metrics().recent_checkpoints(CHECKPOINT_WINDOW))
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found: see / for the dashboard and /metrics for metrics\n")
}

/// Everything the page starts with.
#[derive(Serialize)]
struct PageData {
    jobs: Vec<api::JobView>,
    graph: Option<api::GraphView>,
    sources: Vec<api::SourceView>,
    checkpoints: Vec<crate::metrics::CheckpointSample>,
}

#[derive(serde::Deserialize)]
struct PageQuery {
    job: Option<String>,
}

async fn dashboard(
    State(observer): Shared,
    axum::extract::Query(query): axum::extract::Query<PageQuery>,
) -> Html<String> {
    let jobs = observer.jobs();
    // The graph shown: the one asked for, else the first creating job, else the first job.
    let selected = query
        .job
        .or_else(|| jobs.iter().find(|j| j.creating).map(|j| j.name.clone()))
        .or_else(|| jobs.first().map(|j| j.name.clone()));
    let data = PageData {
        graph: selected.and_then(|name| observer.graph(&name)),
        jobs,
        sources: observer.sources().await,
        checkpoints: observer.engine_metrics().recent_checkpoints(CHECKPOINT_WINDOW),
    };
    let json = serde_json::to_string(&data).expect("page data serializes");
    // Inside a <script> element, `</` would end it.
    Html(DASHBOARD.replace("/*DATA*/null", &json.replace("</", "<\\/")))
}
