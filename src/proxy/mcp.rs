//! The MCP Streamable HTTP proxy's server: one HTTP endpoint that relays the agent's MCP
//! traffic to the real MCP server, and the routing of each request. `tools/call` requests go
//! to the guard (`guard`); everything else passes through untouched (`relay`), SSE streams
//! event by event as they arrive.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use serde_json::Value;
use tokio::sync::watch;
use tokio_stream::StreamExt;

pub use super::context::{SESSION_HEADER, STEP_HEADER, TASK_GOAL_HEADER, TENANT_HEADER};
use super::definitions::Definitions;
use super::error::ProxyError;
use super::guard::Awaited;
use super::jsonrpc::{self, Incoming};
use super::outstanding::Outstanding;
use super::upstream::{Upstream, upstream_headers};
use crate::engine::Gate;
use crate::policy::store::PolicyStore;
use crate::telemetry::Telemetry;

/// `--mcp-listen`, `--mcp-upstream` and how long the upstream may take to answer.
#[derive(Clone)]
pub struct McpConfig {
    pub listen: SocketAddr,
    pub upstream: String,
    /// How long the upstream may take to answer: the head of any answer, and, for a
    /// guarded `tools/call`, the reply itself (a JSON body, or the event that carries it),
    /// measured from forwarding. Other SSE streams have no overall limit while the proxy
    /// runs; once it stops, they get this long to finish.
    pub timeout: Duration,
    /// Requests the proxy holds open at once, streams included (a server stream or a tool
    /// call's event stream stays open until it ends); past it, new requests get 503.
    pub max_open: usize,
}

/// Shows the upstream as its origin alone: the URL's user info, path or query may hold a
/// credential, and a config is the kind of value that ends up in a log line.
impl std::fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let upstream = match reqwest::Url::parse(&self.upstream) {
            Ok(u) => u.origin().ascii_serialization(),
            Err(_) => "(not a URL)".into(),
        };
        f.debug_struct("McpConfig")
            .field("listen", &self.listen)
            .field("upstream", &upstream)
            .field("timeout", &self.timeout)
            .field("max_open", &self.max_open)
            .finish()
    }
}

/// The longest `--mcp-upstream-timeout-s` accepted: longer is surely a mistake, and the
/// deadlines built from it must stay representable.
pub const MAX_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("--mcp-upstream: {0}")]
    Upstream(String),
    #[error("--mcp-upstream-timeout-s: at most {} s", MAX_UPSTREAM_TIMEOUT.as_secs())]
    Timeout,
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
}

/// How many forwarded calls may await their replies at once, and for how long one is
/// remembered; past either, a resumed reply is guarded as a result of an unknown tool.
const OUTSTANDING_CALLS: usize = 8192;
const OUTSTANDING_TTL: Duration = Duration::from_secs(3600);

pub(super) struct Inner {
    pub(super) store: Arc<PolicyStore>,
    /// For the upstream call's client span; decisions are recorded by the gate.
    pub(super) telemetry: Arc<Telemetry>,
    pub(super) gate: Gate,
    pub(super) upstream: Upstream,
    pub(super) outstanding: Outstanding<Awaited>,
    /// The upstream's tool definitions as first seen, and the tools kept from clients.
    pub(super) definitions: Definitions,
    /// Turns true when the server stops: server-to-client streams, which never end by
    /// themselves, close so the drain can finish.
    pub(super) shutdown: watch::Receiver<bool>,
}

/// The proxy's shared state; the handling of a request is spread over `guard` (tool calls
/// and their replies) and `relay` (answers on their way back).
#[derive(Clone)]
pub struct McpProxy(pub(super) Arc<Inner>);

impl McpProxy {
    pub fn new(
        cfg: &McpConfig,
        store: Arc<PolicyStore>,
        telemetry: Arc<Telemetry>,
        gate: Gate,
        shutdown: watch::Receiver<bool>,
    ) -> Result<McpProxy, McpConfigError> {
        Ok(McpProxy(Arc::new(Inner {
            store,
            telemetry,
            gate,
            upstream: Upstream::new(cfg)?,
            outstanding: Outstanding::new(OUTSTANDING_CALLS, OUTSTANDING_TTL),
            definitions: Definitions::default(),
            shutdown,
        })))
    }

    /// Every path and method goes to one handler, under a load shed: past `max_in_flight`
    /// requests waiting for their answer's head, a request fails fast with 503 rather than
    /// queueing without bound. Streams that are already flowing do not count.
    ///
    /// Every open request, stream or not, also holds one of `max_open` permits until its
    /// answer's body ends or the client drops it, so clients that open streams and never
    /// close them cannot hold tasks and connections without bound.
    pub fn router(self, max_in_flight: usize, max_open: usize) -> Router {
        let open = Arc::new(tokio::sync::Semaphore::new(max_open.max(1)));
        Router::new()
            .fallback(handle)
            .with_state(self)
            .layer(
                tower::ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                        ProxyError::Overloaded.into_response()
                    }))
                    .load_shed()
                    .concurrency_limit(max_in_flight.max(1)),
            )
            .layer(axum::middleware::from_fn(
                move |req: Request, next: axum::middleware::Next| {
                    let open = open.clone();
                    async move {
                        let Ok(permit) = open.try_acquire_owned() else {
                            return ProxyError::TooManyOpen.into_response();
                        };
                        let (parts, body) = next.run(req).await.into_parts();
                        // The permit goes with the body: released when it ends or is dropped.
                        let body = Body::from_stream(body.into_data_stream().map(move |c| {
                            let _held = &permit;
                            c
                        }));
                        Response::from_parts(parts, body)
                    }
                },
            ))
    }

    async fn serve(&self, req: Request) -> Result<Response, ProxyError> {
        let start = std::time::Instant::now();
        // One policy version for the request, its reply included.
        let policy = self.0.store.load();
        let (parts, body) = req.into_parts();
        // The verified identity of the connection (mTLS), before anything else is read.
        let caller = crate::tls::caller_of(&parts.extensions);
        crate::engine::gate::admit(&policy, &caller)
            .map_err(|e| ProxyError::Forbidden(e.to_string()))?;
        let limit = policy.max_message_bytes;
        let body = read_body(&parts.headers, body, limit).await?;
        let up = &self.0.upstream;
        let target = up.target(&parts.uri);
        let endpoint = up.is_endpoint(parts.uri.path());
        if endpoint && parts.method == Method::GET {
            let headers = upstream_headers(&parts.headers);
            let resp = up.send(parts.method, target, headers, body).await?;
            return Ok(self.relay_server_stream(resp, &parts.headers, &caller, policy));
        }
        if !(endpoint && parts.method == Method::POST) {
            let headers = upstream_headers(&parts.headers);
            let resp = up.send(parts.method, target, headers, body).await?;
            return Ok(self.relay(resp, false));
        }
        // A tool call must be parsed to be guarded, so a body that is not JSON stops here.
        let msg: Value =
            serde_json::from_slice(&body).map_err(|e| ProxyError::Parse(e.to_string()))?;
        let call = match jsonrpc::classify(&msg) {
            Ok(Incoming::ToolCall(call)) => call,
            Ok(Incoming::Other) if jsonrpc::tools_list_id(&msg).is_some() => {
                let id = jsonrpc::tools_list_id(&msg).cloned().unwrap_or_default();
                return Ok(
                    match self
                        .tools_list(&parts.headers, &caller, target, &id, body, policy)
                        .await
                    {
                        Ok(r) => r,
                        Err(e) => e.into_response_for(Some(&id)),
                    },
                );
            }
            Ok(Incoming::Other) => {
                let sent = up
                    .send(parts.method, target, upstream_headers(&parts.headers), body)
                    .await;
                return Ok(match sent {
                    Ok(resp) => self.relay(resp, false),
                    Err(e) => ProxyError::from(e).into_response_for(msg.get("id")),
                });
            }
            Err(e) => return Ok(e.into_response_for(msg.get("id"))),
        };
        let id = call.id.clone();
        Ok(
            match self
                .tool_call(
                    parts.headers,
                    &caller,
                    target,
                    msg,
                    call,
                    body,
                    policy,
                    start,
                )
                .await
            {
                Ok(r) => r,
                Err(e) => e.into_response_for(Some(&id)),
            },
        )
    }
}

async fn handle(State(proxy): State<McpProxy>, req: Request) -> Response {
    match proxy.serve(req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Reads a request body up to `limit` bytes; past it, 413 without reading the rest.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ProxyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ProxyError::TooLarge { limit });
    }
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ProxyError::InvalidRequest(format!("body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(ProxyError::TooLarge { limit });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_never_shows_the_upstream_path_or_credentials() {
        let cfg = McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: "https://svc:s3cret@tools.example:8443/t0ken/mcp?key=abc".into(),
            timeout: Duration::from_secs(5),
            max_open: 16,
        };
        let shown = format!("{cfg:?}");
        assert!(shown.contains("https://tools.example:8443"), "{shown}");
        for hidden in ["s3cret", "svc", "t0ken", "key=abc"] {
            assert!(!shown.contains(hidden), "{hidden} in {shown}");
        }
    }
}
