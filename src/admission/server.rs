//! The webhook's HTTPS listener: `/mutate`, `/mutate/namespace` and `/healthz`, with the
//! certificate re-read when its files change (cert-manager rotates them in place).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Entry, InjectorConfig, review};
use crate::tls::{ALPN_HTTP, Reloading, TlsFiles, TlsIncoming};

/// How often the certificate files are checked for a change.
pub const CERT_POLL: std::time::Duration = crate::tls::CERT_POLL;
/// AdmissionReviews are a pod spec and some metadata; the API server caps requests at 3 MiB.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub struct WebhookOptions {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub config: InjectorConfig,
}

pub struct Webhook {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Webhook {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Binds and serves until stopped. A bad certificate at start-up is an error; a bad one
/// later is logged and the previous one kept.
pub async fn start(opts: WebhookOptions) -> anyhow::Result<Webhook> {
    let (stop, stop_rx) = watch::channel(false);
    let files = TlsFiles {
        cert: opts.cert,
        key: opts.key,
        client_ca: None,
    };
    let tls = Reloading::start(files, ALPN_HTTP, CERT_POLL, stop_rx.clone(), "webhook")?;
    let listener = TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/mutate", post(mutate_annotated))
        .route("/mutate/namespace", post(mutate_namespace))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(opts.config));
    let incoming = TlsIncoming::new(listener, tls, stop_rx.clone());
    let mut stopping = stop_rx;
    let task = tokio::spawn(async move {
        let served = axum::serve(incoming, app)
            .with_graceful_shutdown(async move {
                let _ = stopping.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "webhook server failed");
        }
    });
    Ok(Webhook { addr, stop, task })
}

async fn mutate_annotated(
    State(cfg): State<Arc<InjectorConfig>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&cfg, &headers, &body, Entry::Annotated)
}

async fn mutate_namespace(
    State(cfg): State<Arc<InjectorConfig>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&cfg, &headers, &body, Entry::NamespaceSelected)
}

fn answer(cfg: &InjectorConfig, headers: &HeaderMap, body: &Bytes, entry: Entry) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim() == "application/json")
        });
    if !json {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "toolgate injector: content type must be application/json\n",
        )
            .into_response();
    }
    if body.len() > MAX_BODY_BYTES {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "toolgate injector: review too large\n",
        )
            .into_response();
    }
    let out = review(body, cfg, entry);
    axum::Json(out).into_response()
}
