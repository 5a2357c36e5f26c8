//! The admin HTTP endpoints: `/metrics`, `/healthz`, `/readyz` and `/policy`. Bound to
//! localhost by default; they reveal versions and counts, never event content.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use super::Telemetry;
use crate::policy::store::PolicyStore;

#[derive(Clone)]
pub struct AdminState {
    pub store: Arc<PolicyStore>,
    pub telemetry: Arc<Telemetry>,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/policy", get(policy))
        .with_state(state)
}

/// Only `/healthz` and `/readyz`: what the kubelet probes on the pod IP, with nothing else
/// of the admin surface exposed there.
pub fn health_router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(s): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.telemetry.metrics.render(),
    )
        .into_response()
}

/// Ready once a policy is loaded: the store always holds one after start-up, so this says
/// whether the process got that far.
async fn readyz(State(s): State<AdminState>) -> Response {
    let p = s.store.load();
    if p.name.is_empty() {
        (StatusCode::SERVICE_UNAVAILABLE, "no policy loaded\n").into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}

async fn policy(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let p = s.store.load();
    let status = s.store.status();
    let secs = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    };
    Json(json!({
        "pack": p.name,
        "version": p.version,
        "hash": p.hash,
        "policy_version": p.version_tag(),
        "source": p.source,
        "env": p.env,
        "mode": p.mode.as_str(),
        "loaded_at_unix": secs(p.loaded_at),
        "fast_rules": p.rules.rules.len(),
        "reloads_ok": status.reloads_ok,
        "reloads_failed": status.reloads_failed,
        "last_reload_error": status.last_error,
        "last_reload_error_at_unix": status.last_error_at.map(secs),
        "warnings": p.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
    }))
}
