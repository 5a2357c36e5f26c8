//! The webhook's HTTPS listener: `/mutate`, `/mutate/namespace` and `/healthz`, with the
//! certificate re-read when its files change (cert-manager rotates them in place).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Entry, InjectorConfig, review};

/// How often the certificate files are checked for a change.
pub const CERT_POLL: Duration = Duration::from_secs(5);
/// A client that has not finished its TLS handshake by then is dropped, so slow
/// handshakes cannot hold connections open.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// AdmissionReviews are a pod spec and some metadata; the API server caps requests at 3 MiB.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}` holds no {what}")]
    Empty { path: String, what: &'static str },
    #[error("certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Reads the certificate chain and key into a server configuration (ring, TLS 1.2 and 1.3).
pub fn tls_config(cert: &PathBuf, key: &PathBuf) -> Result<ServerConfig, TlsError> {
    let read = |p: &PathBuf| {
        std::fs::read(p).map_err(|source| TlsError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::Empty {
            path: cert.display().to_string(),
            what: "PEM certificate",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::Empty {
        path: key.display().to_string(),
        what: "PEM private key",
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

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
    let tls = Arc::new(ArcSwap::from_pointee(tls_config(&opts.cert, &opts.key)?));
    let listener = TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let (stop, stop_rx) = watch::channel(false);
    let app = Router::new()
        .route("/mutate", post(mutate_annotated))
        .route("/mutate/namespace", post(mutate_namespace))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(opts.config));
    tokio::spawn(watch_certs(
        opts.cert.clone(),
        opts.key.clone(),
        tls.clone(),
        stop_rx.clone(),
    ));
    let task = tokio::spawn(accept_loop(listener, tls, app, stop_rx));
    Ok(Webhook { addr, stop, task })
}

async fn accept_loop(
    listener: TcpListener,
    tls: Arc<ArcSwap<ServerConfig>>,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (tcp, _) = tokio::select! {
            _ = stopped(&mut stop) => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "webhook accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.load_full());
        let app = app.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                // A failed or slow handshake is the client's problem; nothing to answer.
                _ => return,
            };
            let service = TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn watch_certs(
    cert: PathBuf,
    key: PathBuf,
    tls: Arc<ArcSwap<ServerConfig>>,
    mut stop: watch::Receiver<bool>,
) {
    let stamp = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut seen: (Option<SystemTime>, Option<SystemTime>) = (stamp(&cert), stamp(&key));
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(CERT_POLL) => {}
        }
        let now = (stamp(&cert), stamp(&key));
        if now == seen {
            continue;
        }
        match tls_config(&cert, &key) {
            Ok(cfg) => {
                tls.store(Arc::new(cfg));
                seen = now;
                tracing::info!("webhook certificate reloaded");
            }
            // Mid-rotation the key may not match the new certificate yet: keep the old
            // pair and try again at the next poll.
            Err(e) => {
                tracing::warn!(error = %e, "webhook certificate not reloaded; keeping the current one")
            }
        }
    }
}

/// Resolves once `stop` turns true; the borrow of the flag ends inside, so the future is
/// `Send`.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
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
