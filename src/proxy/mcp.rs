//! The MCP Streamable HTTP proxy: one HTTP endpoint that relays the agent's MCP traffic to
//! the real MCP server. `tools/call` requests are decided before they are forwarded, and the
//! server's reply to each is decided before the agent sees it; everything else passes
//! through untouched, SSE streams event by event as they arrive.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanContext;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::StreamExt;

use super::Verdict;
use super::error::{ProxyError, UpstreamError};
use super::jsonrpc::{self, Incoming, ToolCall};
use super::outstanding::{CallKey, Outstanding};
use super::sse::{self, SseError, SseEvent, SseParser};
use crate::decision::Action;
use crate::engine::CallMeta;
use crate::engine::pipeline::{self, Options, Runtime};
use crate::event::{Context, Event, EventKind};
use crate::policy::Policy;
use crate::policy::store::PolicyStore;
use crate::telemetry::trace::{self, ClientSpan};
use crate::telemetry::{CallStart, Telemetry};

/// Overrides `Mcp-Session-Id` as the session the guard keys state on.
pub const SESSION_HEADER: &str = "x-toolgate-session-id";
pub const TENANT_HEADER: &str = "x-toolgate-tenant";
pub const TASK_GOAL_HEADER: &str = "x-toolgate-task-goal";
/// Overrides the JSON-RPC id as the step id (RETRY attempts are counted per step).
pub const STEP_HEADER: &str = "x-toolgate-step-id";
const MCP_SESSION_HEADER: &str = "mcp-session-id";
/// Longest session, step and tenant id accepted: they key state kept in memory.
const MAX_ID_BYTES: usize = 256;
/// Connecting should be quick; the rest of the budget is for the tool itself.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bounded buffering between the upstream and the client: a slow client slows the relay.
const RELAY_CHANNEL: usize = 16;

/// `--mcp-listen`, `--mcp-upstream` and how long the upstream may take to answer.
#[derive(Debug, Clone)]
pub struct McpConfig {
    pub listen: SocketAddr,
    pub upstream: String,
    /// How long the upstream may take to answer: the head of any answer, and, for a
    /// guarded `tools/call`, the reply itself (a JSON body, or the event that carries it),
    /// measured from forwarding. Other SSE streams have no overall limit while the proxy
    /// runs; once it stops, they get this long to finish.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("--mcp-upstream: {0}")]
    Upstream(String),
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
}

/// The upstream MCP server: where requests go, and how it is named in errors and spans.
struct Upstream {
    url: reqwest::Url,
    /// `host:port`, the only part of the URL errors show (the path or query may hold a token).
    addr: String,
    host: String,
    port: u16,
    client: reqwest::Client,
    timeout: Duration,
}

impl Upstream {
    fn new(cfg: &McpConfig) -> Result<Upstream, McpConfigError> {
        let url = reqwest::Url::parse(&cfg.upstream)
            .map_err(|e| McpConfigError::Upstream(format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(McpConfigError::Upstream(
                "must be an http:// or https:// URL".into(),
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| McpConfigError::Upstream("has no host".into()))?
            .to_string();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| McpConfigError::Upstream("has no port".into()))?;
        let client = reqwest::Client::builder()
            .connect_timeout(cfg.timeout.min(MAX_CONNECT_TIMEOUT))
            // The client follows redirects itself: it sees what the upstream answered.
            .redirect(reqwest::redirect::Policy::none())
            // The sidecar talks to its tool server directly, whatever proxy the
            // environment names for outbound traffic.
            .no_proxy()
            .build()
            .map_err(|e| McpConfigError::Client(e.to_string()))?;
        Ok(Upstream {
            addr: format!("{host}:{port}"),
            url,
            host,
            port,
            client,
            timeout: cfg.timeout,
        })
    }

    /// The upstream URL for a request path: the proxy mirrors the upstream's paths, so an
    /// agent pointed at the proxy uses the path it used with the server.
    fn target(&self, uri: &axum::http::Uri) -> reqwest::Url {
        let mut url = self.url.clone();
        url.set_path(uri.path());
        url.set_query(uri.query());
        url
    }

    /// The MCP endpoint is the upstream URL's path and what lies under it; other paths (an
    /// OAuth metadata document, say) are relayed as plain HTTP.
    fn is_endpoint(&self, path: &str) -> bool {
        let base = self.url.path().trim_end_matches('/');
        base.is_empty() || path == base || path.starts_with(&format!("{base}/"))
    }

    async fn send(
        &self,
        method: Method,
        url: reqwest::Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, UpstreamError> {
        let deadline = Instant::now() + self.timeout;
        self.send_until(method, url, headers, body, deadline).await
    }

    /// `send`, with the answer's head due by `deadline`.
    async fn send_until(
        &self,
        method: Method,
        url: reqwest::Url,
        headers: HeaderMap,
        body: Bytes,
        deadline: Instant,
    ) -> Result<reqwest::Response, UpstreamError> {
        let mut req = self.client.request(method, url).headers(headers);
        if !body.is_empty() {
            req = req.body(body);
        }
        match tokio::time::timeout_at(deadline, req.send()).await {
            Err(_) => Err(self.timed_out()),
            Ok(Err(e)) => Err(self.failed(&e)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    fn timed_out(&self) -> UpstreamError {
        UpstreamError::Timeout {
            addr: self.addr.clone(),
            secs: self.timeout.as_secs(),
        }
    }

    /// Names a transport failure by kind. reqwest's own message carries the whole URL, so
    /// it is not used.
    fn failed(&self, e: &reqwest::Error) -> UpstreamError {
        let addr = self.addr.clone();
        let io = io_kind(e);
        if e.is_connect() {
            let addr = match io {
                Some(k) => format!("{addr} ({k})"),
                None => addr,
            };
            return UpstreamError::Connect { addr };
        }
        if e.is_timeout() {
            return self.timed_out();
        }
        let kind = match (io, e.is_body() || e.is_decode()) {
            (Some(k), _) => k.to_string(),
            (None, true) => "the reply body broke off".to_string(),
            (None, false) => "transport error".to_string(),
        };
        UpstreamError::Request { addr, kind }
    }
}

/// The I/O error kind under a transport error (`connection refused`, `connection reset`).
fn io_kind(e: &reqwest::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

/// Hop-by-hop headers (RFC 9110 section 7.6.1) end at the proxy.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Copies end-to-end headers. The `Connection` header's own list is dropped too, and so is
/// the length (the body may be rewritten; hyper frames it anew).
fn end_to_end(headers: &HeaderMap, keep: impl Fn(&HeaderName) -> bool) -> HeaderMap {
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || name == header::CONTENT_LENGTH
            || listed.iter().any(|l| l == n)
            || !keep(name)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Headers for the upstream request. `Host` becomes the upstream's; `Accept-Encoding` is
/// dropped so replies come uncompressed and can be read; the `x-toolgate-*` headers are
/// for the guard alone.
fn upstream_headers(incoming: &HeaderMap) -> HeaderMap {
    end_to_end(incoming, |n| {
        n != header::HOST && n != header::ACCEPT_ENCODING && !n.as_str().starts_with("x-toolgate-")
    })
}

/// A forwarded tool call whose reply is awaited: what the reply is guarded with.
#[derive(Clone)]
struct Awaited {
    call: ToolCall,
    context: Context,
    policy: Arc<Policy>,
    parent: opentelemetry::Context,
}

/// A call on its way to the upstream: what its reply is guarded with, where it is
/// remembered, and the span around the upstream exchange.
struct Pending {
    awaited: Awaited,
    key: CallKey,
    span: ClientSpan,
    /// When the reply is due: the upstream timeout after forwarding. An upstream that keeps
    /// the stream open without ever replying must not hold the call (and the drain at
    /// shutdown) for ever.
    deadline: Instant,
}

/// How many forwarded calls may await their replies at once, and for how long one is
/// remembered; past either, a resumed reply is guarded as a result of an unknown tool.
const OUTSTANDING_CALLS: usize = 8192;
const OUTSTANDING_TTL: Duration = Duration::from_secs(3600);

struct Inner {
    store: Arc<PolicyStore>,
    telemetry: Arc<Telemetry>,
    runtime: Arc<Runtime>,
    upstream: Upstream,
    outstanding: Outstanding<Awaited>,
    /// Turns true when the server stops: server-to-client streams, which never end by
    /// themselves, close so the drain can finish.
    shutdown: watch::Receiver<bool>,
}

#[derive(Clone)]
pub struct McpProxy(Arc<Inner>);

impl McpProxy {
    pub fn new(
        cfg: &McpConfig,
        store: Arc<PolicyStore>,
        telemetry: Arc<Telemetry>,
        runtime: Arc<Runtime>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<McpProxy, McpConfigError> {
        Ok(McpProxy(Arc::new(Inner {
            store,
            telemetry,
            runtime,
            upstream: Upstream::new(cfg)?,
            outstanding: Outstanding::new(OUTSTANDING_CALLS, OUTSTANDING_TTL),
            shutdown,
        })))
    }

    /// Every path and method goes to one handler, under a load shed: past `max_in_flight`
    /// requests waiting for their answer's head, a request fails fast with 503 rather than
    /// queueing without bound. Streams that are already flowing do not count.
    pub fn router(self, max_in_flight: usize) -> Router {
        Router::new().fallback(handle).with_state(self).layer(
            tower::ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                    ProxyError::Overloaded.into_response()
                }))
                .load_shed()
                .concurrency_limit(max_in_flight.max(1)),
        )
    }

    async fn serve(&self, req: Request) -> Result<Response, ProxyError> {
        let start = CallStart::now();
        // One policy version for the request, its reply included.
        let policy = self.0.store.load();
        let (parts, body) = req.into_parts();
        let limit = policy.max_message_bytes;
        let body = read_body(&parts.headers, body, limit).await?;
        let up = &self.0.upstream;
        let target = up.target(&parts.uri);
        let endpoint = up.is_endpoint(parts.uri.path());
        if endpoint && parts.method == Method::GET {
            let headers = upstream_headers(&parts.headers);
            let resp = up.send(parts.method, target, headers, body).await?;
            return Ok(self.relay_server_stream(resp, &parts.headers, policy));
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
                .tool_call(parts.headers, target, msg, call, body, policy, start)
                .await
            {
                Ok(r) => r,
                Err(e) => e.into_response_for(Some(&id)),
            },
        )
    }

    /// Decides a tool call; forwards it (redacted if need be) or answers it; then guards
    /// the reply.
    #[allow(clippy::too_many_arguments)]
    async fn tool_call(
        &self,
        headers: HeaderMap,
        target: reqwest::Url,
        mut msg: Value,
        mut call: ToolCall,
        body: Bytes,
        policy: Arc<Policy>,
        start: CallStart,
    ) -> Result<Response, ProxyError> {
        let context = context(&headers, &call.id)?;
        let parent = trace::parent_from_headers(&headers);
        let mut event = Event::new(EventKind::ToolCallStart, context.clone());
        event.tool_name = call.name.clone();
        event.arguments = call.arguments.clone();
        event.pause_id = std::mem::take(&mut call.pause_id);
        let (verdict, chosen) = self
            .judge(event, policy.clone(), start, parent.clone(), body.len())
            .await?;
        if verdict.blocks() {
            let answer = jsonrpc::blocked_response(&call.id, &verdict);
            return Ok((StatusCode::OK, axum::Json(answer)).into_response());
        }
        // Only an enforced REDACT changes the call: in shadow mode the decision still
        // carries what it would have redacted, and the call goes out as it came.
        let body = match verdict
            .redacted_arguments_json
            .as_deref()
            .filter(|_| verdict.action == Action::Redact)
            .map(serde_json::from_str::<Value>)
        {
            Some(Ok(redacted)) => {
                call.arguments = Some(redacted.clone());
                jsonrpc::set_arguments(&mut msg, redacted);
                Bytes::from(msg.to_string())
            }
            // The engine wrote this JSON itself; unreadable, the call cannot go out as
            // judged, so it does not go out.
            Some(Err(e)) => {
                return Err(ProxyError::Internal(format!(
                    "redacted arguments are not JSON: {e}"
                )));
            }
            None => body,
        };
        let up = &self.0.upstream;
        let span =
            self.0
                .telemetry
                .tracing
                .client_span(chosen.as_ref(), "toolgate.upstream", || {
                    vec![
                        KeyValue::new("http.request.method", "POST"),
                        KeyValue::new("server.address", up.host.clone()),
                        KeyValue::new("server.port", i64::from(up.port)),
                        KeyValue::new("gen_ai.tool.name", call.name.clone()),
                        KeyValue::new("mcp.method.name", jsonrpc::TOOLS_CALL),
                    ]
                });
        let mut out_headers = upstream_headers(&headers);
        if let Some(tp) = span
            .traceparent()
            .and_then(|t| HeaderValue::try_from(t).ok())
        {
            out_headers.insert(HeaderName::from_static("traceparent"), tp);
        }
        let key = (mcp_session(&headers), call.id.to_string());
        let awaited = Awaited {
            call,
            context,
            policy,
            parent,
        };
        // Remembered before it goes: the reply may come back on another stream.
        self.0.outstanding.insert(key.clone(), awaited.clone());
        let deadline = Instant::now() + up.timeout;
        let mut p = Pending {
            awaited,
            key,
            span,
            deadline,
        };
        let sent = up
            .send_until(Method::POST, target, out_headers, body, deadline)
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return Err(self.failed(p, e)),
        };
        let status = resp.status();
        p.span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status.as_u16()),
        ));
        if status.is_server_error() {
            let e = UpstreamError::Status {
                addr: up.addr.clone(),
                status: status.as_u16(),
            };
            return Err(self.failed(p, e));
        }
        if !status.is_success() {
            // 4xx and 3xx are the transport's answer (an expired session, missing auth),
            // not a tool's output: the client needs them as they are.
            self.0.outstanding.take(&p.key);
            p.span.end();
            return Ok(self.relay(resp, false));
        }
        let content_type = content_type(resp.headers());
        if content_type.starts_with("text/event-stream") {
            return Ok(self.relay_guarded(resp, p));
        }
        if content_type.starts_with("application/json") {
            return self.json_reply(resp, p).await;
        }
        let e = UpstreamError::Malformed {
            addr: up.addr.clone(),
            why: format!(
                "expected JSON or an event stream, got status {status} with no JSON-RPC reply"
            ),
        };
        Err(self.failed(p, e))
    }

    /// Ends a call that will get no reply from the upstream: it is no longer awaited and
    /// its span records why.
    fn failed(&self, p: Pending, e: UpstreamError) -> ProxyError {
        let Pending { key, mut span, .. } = p;
        self.0.outstanding.take(&key);
        span.fail(e.kind());
        span.end();
        e.into()
    }

    /// A tool call's reply as one JSON body: read it whole (bounded), guard it, answer.
    async fn json_reply(
        &self,
        resp: reqwest::Response,
        p: Pending,
    ) -> Result<Response, ProxyError> {
        let up = &self.0.upstream;
        let status = resp.status();
        let headers = end_to_end(resp.headers(), |_| true);
        let limit = p.awaited.policy.max_message_bytes;
        let read = tokio::time::timeout_at(p.deadline, read_reply(up, resp, limit)).await;
        let bytes = match read.unwrap_or_else(|_| Err(up.timed_out())) {
            Ok(b) => b,
            Err(e) => return Err(self.failed(p, e)),
        };
        let parsed = serde_json::from_slice::<Value>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|mut msg| {
                if jsonrpc::find_reply_mut(&mut msg, &p.awaited.call.id).is_some() {
                    Ok(msg)
                } else {
                    Err("no response with the call's id".to_string())
                }
            });
        let mut msg = match parsed {
            Ok(m) => m,
            Err(why) => {
                let e = UpstreamError::Malformed {
                    addr: up.addr.clone(),
                    why,
                };
                return Err(self.failed(p, e));
            }
        };
        let Pending {
            awaited,
            key,
            mut span,
            ..
        } = p;
        self.0.outstanding.take(&key);
        span.end();
        let (_, changed) = self
            .guard_message(&mut msg, bytes.len(), |_| Some(awaited.clone()))
            .await;
        let body = if changed {
            Bytes::from(msg.to_string())
        } else {
            bytes
        };
        let mut r = Response::new(Body::from(body));
        *r.status_mut() = status;
        *r.headers_mut() = headers;
        Ok(r)
    }

    /// Decides a tool call's reply and applies the verdict to it in place. Returns whether
    /// the reply changed.
    async fn guard_reply(
        &self,
        a: &Awaited,
        reply: &mut Value,
        size: usize,
    ) -> Result<bool, ProxyError> {
        let text = jsonrpc::reply_text(reply);
        let mut event = Event::new(EventKind::ToolCallResult, a.context.clone());
        event.tool_name = a.call.name.clone();
        event.arguments = a.call.arguments.clone();
        event.output = text.text.clone();
        event.is_error = text.is_error;
        let (verdict, _) = self
            .judge(
                event,
                a.policy.clone(),
                CallStart::now(),
                a.parent.clone(),
                size,
            )
            .await?;
        Ok(jsonrpc::apply_to_reply(reply, &text, &verdict))
    }

    /// Decides, traces and records in a task of its own, as the gRPC API does, so a client
    /// that hangs up mid-decision cannot make the decision, its span or its log line vanish.
    /// Returns the verdict and the decision span's context (`None` when tracing is off).
    async fn judge(
        &self,
        event: Event,
        policy: Arc<Policy>,
        start: CallStart,
        parent: opentelemetry::Context,
        size: usize,
    ) -> Result<(Verdict, Option<SpanContext>), ProxyError> {
        let (rt, telemetry) = (self.0.runtime.clone(), self.0.telemetry.clone());
        tokio::spawn(async move {
            let chosen = telemetry.tracing.choose(&parent);
            let meta = CallMeta {
                trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
                span: chosen.clone(),
            };
            let (event, d) =
                pipeline::decide(event, &policy, &rt, &meta, size, Options::default()).await;
            let verdict = telemetry.record(
                event,
                d,
                &policy,
                start,
                &parent,
                chosen.clone(),
                Verdict::of,
            );
            (verdict, chosen)
        })
        .await
        .map_err(|e| ProxyError::Internal(format!("decision task failed: {e}")))
    }

    /// Relays an answer as it arrives. `endless` streams end when the proxy stops; others
    /// get the upstream timeout after that to finish, so no stream holds the drain for ever.
    fn relay(&self, mut resp: reqwest::Response, endless: bool) -> Response {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(RELAY_CHANNEL);
        let mut shutdown = self.0.shutdown.clone();
        let grace = if endless {
            Duration::ZERO
        } else {
            self.0.upstream.timeout
        };
        let head = head_of(&resp);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    c = resp.chunk() => c,
                    () = tx.closed() => return,
                    () = stopped_for(&mut shutdown, grace) => return,
                };
                match next {
                    Ok(Some(b)) => {
                        if tx.send(Ok(b)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(_) => {
                        // The client must see the break, not a clean end of a cut body.
                        let _ = tx
                            .send(Err(std::io::Error::other("upstream stream broke off")))
                            .await;
                        return;
                    }
                }
            }
        });
        head.with_body(body_of(rx))
    }

    /// Relays a tool call's SSE answer event by event: progress and other messages go out
    /// as they come, unchanged; the event carrying the reply is decided first. A stream that
    /// ends, breaks or passes its deadline before the reply gets an error reply for the
    /// call, unless the client has gone (it may resume on a GET stream, where the reply is
    /// still guarded). Once the reply is out, what follows is relayed until the proxy stops.
    fn relay_guarded(&self, mut resp: reqwest::Response, p: Pending) -> Response {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(RELAY_CHANNEL);
        let head = head_of(&resp);
        let this = self.clone();
        let mut shutdown = self.0.shutdown.clone();
        tokio::spawn(async move {
            let up = &this.0.upstream;
            let Pending {
                awaited,
                key,
                mut span,
                deadline,
            } = p;
            let mut parser = SseParser::new(awaited.policy.max_message_bytes);
            let mut failure = None;
            let mut answered = false;
            let mut client_gone = false;
            'read: loop {
                let next = tokio::select! {
                    c = resp.chunk() => c,
                    () = tx.closed() => {
                        client_gone = true;
                        break 'read;
                    }
                    () = tokio::time::sleep_until(deadline), if !answered => {
                        failure = Some(up.timed_out());
                        break 'read;
                    }
                    () = stopped(&mut shutdown), if answered => break 'read,
                };
                let chunk = match next {
                    Ok(Some(c)) => c,
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(up.failed(&e));
                        break;
                    }
                };
                let events = match parser.push(&chunk) {
                    Ok(ev) => ev,
                    Err(SseError::TooLarge { limit }) => {
                        failure = Some(UpstreamError::TooLarge {
                            addr: up.addr.clone(),
                            limit,
                        });
                        break;
                    }
                };
                for ev in events {
                    let out = if answered {
                        ev.raw
                    } else {
                        match this.guard_event(&ev, |_| Some(awaited.clone())).await {
                            None => ev.raw,
                            Some(out) => {
                                answered = true;
                                this.0.outstanding.take(&key);
                                span.end();
                                out
                            }
                        }
                    };
                    if tx.send(Ok(out)).await.is_err() {
                        client_gone = true;
                        break 'read;
                    }
                }
            }
            // The upstream connection goes before the client hears why: nothing more is
            // read from it.
            drop(resp);
            if !answered && !client_gone {
                this.0.outstanding.take(&key);
                let e = failure.unwrap_or_else(|| UpstreamError::Incomplete {
                    addr: up.addr.clone(),
                });
                span.fail(e.kind());
                let body = ProxyError::from(e).body(Some(&awaited.call.id)).to_string();
                let _ = tx.send(Ok(sse::write_event(None, None, &body))).await;
            }
            span.end();
        });
        head.with_body(body_of(rx))
    }

    /// Relays the server's stream to the client (the answer to a GET). It carries server
    /// requests and notifications, and, when a client resumes a broken POST stream, the
    /// replies that stream would have carried: a reply to a forwarded tool call is guarded
    /// here too, and so is, whose call is not known, anything shaped like a tool result and
    /// any error reply with a message or data. The stream ends when the proxy stops.
    fn relay_server_stream(
        &self,
        resp: reqwest::Response,
        headers: &HeaderMap,
        policy: Arc<Policy>,
    ) -> Response {
        if !(resp.status().is_success()
            && content_type(resp.headers()).starts_with("text/event-stream"))
        {
            return self.relay(resp, true);
        }
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(RELAY_CHANNEL);
        let head = head_of(&resp);
        let this = self.clone();
        let session = mcp_session(headers);
        let fallback = context(headers, &Value::Null).unwrap_or_default();
        let parent = trace::parent_from_headers(headers);
        let mut shutdown = self.0.shutdown.clone();
        let mut resp = resp;
        tokio::spawn(async move {
            let mut parser = SseParser::new(policy.max_message_bytes);
            // Whose reply an event carries: a call this proxy forwarded, or, for a tool
            // result or an error reply of a call it does not know (expired, evicted, timed
            // out), an unknown tool's.
            let awaited_for = |reply: &Value| -> Option<Awaited> {
                let id = reply.get("id")?;
                if let Some(a) = this.0.outstanding.take(&(session.clone(), id.to_string())) {
                    return Some(a);
                }
                (is_tool_result(reply) || carries_error_text(reply)).then(|| Awaited {
                    call: ToolCall {
                        id: id.clone(),
                        name: UNKNOWN_TOOL.into(),
                        arguments: None,
                        pause_id: String::new(),
                    },
                    context: Context {
                        step_id: jsonrpc::id_text(id),
                        ..fallback.clone()
                    },
                    policy: policy.clone(),
                    parent: parent.clone(),
                })
            };
            loop {
                let next = tokio::select! {
                    c = resp.chunk() => c,
                    () = tx.closed() => return,
                    () = stopped(&mut shutdown) => return,
                };
                let chunk = match next {
                    Ok(Some(c)) => c,
                    Ok(None) => return,
                    Err(_) => {
                        let _ = tx
                            .send(Err(std::io::Error::other("upstream stream broke off")))
                            .await;
                        return;
                    }
                };
                // An event too large to judge is not relayed unjudged: the stream ends and
                // the client reconnects.
                let Ok(events) = parser.push(&chunk) else {
                    return;
                };
                for ev in events {
                    let out = match this.guard_event(&ev, &awaited_for).await {
                        Some(out) => out,
                        None => ev.raw,
                    };
                    if tx.send(Ok(out)).await.is_err() {
                        return;
                    }
                }
            }
        });
        head.with_body(body_of(rx))
    }

    /// The event to send for `ev` when it carries a reply that `awaited_for` names a call
    /// for (`None` otherwise): the reply decided and, if the verdict says so, rewritten.
    async fn guard_event(
        &self,
        ev: &SseEvent,
        awaited_for: impl Fn(&Value) -> Option<Awaited>,
    ) -> Option<Bytes> {
        let data = ev.data.as_deref()?;
        let mut msg: Value = serde_json::from_str(data).ok()?;
        let (touched, changed) = self.guard_message(&mut msg, data.len(), awaited_for).await;
        if !touched {
            return None;
        }
        Some(if changed {
            sse::write_event(ev.id.as_deref(), ev.event.as_deref(), &msg.to_string())
        } else {
            ev.raw.clone()
        })
    }

    /// Guards every reply in a message (one, or each of a batch) that `awaited_for` names
    /// a call for. Every reply is looked at, not only the one whose id matches: clients do
    /// not all compare ids the way this proxy does (`1` and `1e0`), so a reply must not slip
    /// by on its id's spelling. A reply that cannot be decided becomes an error reply.
    /// Returns whether any reply was guarded and whether the message changed.
    async fn guard_message(
        &self,
        msg: &mut Value,
        size: usize,
        awaited_for: impl Fn(&Value) -> Option<Awaited>,
    ) -> (bool, bool) {
        let items: Vec<&mut Value> = match msg {
            Value::Array(items) => items.iter_mut().collect(),
            one => vec![one],
        };
        let (mut touched, mut changed) = (false, false);
        for item in items {
            if !jsonrpc::is_reply(item) {
                continue;
            }
            let Some(a) = awaited_for(item) else {
                continue;
            };
            touched = true;
            match self.guard_reply(&a, item, size).await {
                Ok(c) => changed |= c,
                Err(e) => {
                    *item = e.body(item.get("id"));
                    changed = true;
                }
            }
        }
        (touched, changed)
    }
}

/// The tool name of a resumed reply whose call the proxy does not remember.
const UNKNOWN_TOOL: &str = "unknown";

/// Shaped like a tool result: `result.content` is a list.
fn is_tool_result(reply: &Value) -> bool {
    reply
        .get("result")
        .is_some_and(|r| r.get("content").is_some_and(Value::is_array))
}

/// An error reply whose `message` or `data` may quote a tool's output (a server that puts a
/// failed command's stderr there, say): a secret must not pass in an error either.
fn carries_error_text(reply: &Value) -> bool {
    reply.get("error").is_some_and(|e| {
        e.get("message").is_some_and(Value::is_string)
            || e.get("data").is_some_and(|d| !d.is_null())
    })
}

/// The MCP session a request belongs to, as the upstream knows it (`""` when stateless).
fn mcp_session(headers: &HeaderMap) -> String {
    headers
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

fn body_of(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Body {
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// An upstream answer's status and end-to-end headers, waiting for its body.
struct Head {
    status: StatusCode,
    headers: HeaderMap,
}

impl Head {
    fn with_body(self, body: Body) -> Response {
        let mut r = Response::new(body);
        *r.status_mut() = self.status;
        *r.headers_mut() = self.headers;
        r
    }
}

fn head_of(resp: &reqwest::Response) -> Head {
    Head {
        status: resp.status(),
        headers: end_to_end(resp.headers(), |_| true),
    }
}

async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// `grace` after the proxy stops.
async fn stopped_for(shutdown: &mut watch::Receiver<bool>, grace: Duration) {
    stopped(shutdown).await;
    tokio::time::sleep(grace).await;
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

/// Reads an upstream reply body up to `limit` bytes.
async fn read_reply(
    up: &Upstream,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Bytes, UpstreamError> {
    let too_large = || UpstreamError::TooLarge {
        addr: up.addr.clone(),
        limit,
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut buf = BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| up.failed(&e))? {
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// The event context of a tool call: the session from `x-toolgate-session-id` or
/// `Mcp-Session-Id`, the step from `x-toolgate-step-id` or the JSON-RPC id, tenant and task
/// goal from their headers.
fn context(headers: &HeaderMap, id: &Value) -> Result<Context, ProxyError> {
    let get = |name: &str| -> Result<Option<String>, ProxyError> {
        headers
            .get(name)
            .map(|v| {
                String::from_utf8(v.as_bytes().to_vec()).map_err(|_| {
                    ProxyError::InvalidRequest(format!("header `{name}` is not UTF-8"))
                })
            })
            .transpose()
    };
    let session_id = match get(SESSION_HEADER)? {
        Some(s) => s,
        None => get(MCP_SESSION_HEADER)?.unwrap_or_default(),
    };
    let step_id = get(STEP_HEADER)?.unwrap_or_else(|| jsonrpc::id_text(id));
    let tenant = get(TENANT_HEADER)?.unwrap_or_default();
    for (what, value) in [
        ("the session id", &session_id),
        ("the step id (the JSON-RPC id)", &step_id),
        ("the tenant", &tenant),
    ] {
        if value.len() > MAX_ID_BYTES {
            return Err(ProxyError::InvalidRequest(format!(
                "{what} is over {MAX_ID_BYTES} bytes"
            )));
        }
    }
    Ok(Context {
        session_id,
        step_id,
        tenant,
        task_goal: get(TASK_GOAL_HEADER)?.unwrap_or_default(),
        labels: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(url: &str) -> Upstream {
        Upstream::new(&McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: url.into(),
            timeout: Duration::from_secs(1),
        })
        .unwrap()
    }

    #[test]
    fn the_endpoint_is_the_upstream_path_and_below() {
        let up = upstream("http://127.0.0.1:9000/mcp");
        assert!(up.is_endpoint("/mcp"));
        assert!(up.is_endpoint("/mcp/x"));
        assert!(!up.is_endpoint("/mcpx"));
        assert!(!up.is_endpoint("/.well-known/oauth-protected-resource"));
        assert!(upstream("http://127.0.0.1:9000/").is_endpoint("/anything"));
        assert_eq!(up.addr, "127.0.0.1:9000");
        let t = up.target(&"/mcp/sub?a=1".parse().unwrap());
        assert_eq!(t.as_str(), "http://127.0.0.1:9000/mcp/sub?a=1");
        assert_eq!(
            upstream("https://tools.example/mcp").addr,
            "tools.example:443"
        );
    }

    #[test]
    fn bad_upstreams_are_refused() {
        for bad in ["not a url", "ftp://x/mcp", "unix:/tmp/s"] {
            assert!(
                Upstream::new(&McpConfig {
                    listen: "127.0.0.1:0".parse().unwrap(),
                    upstream: bad.into(),
                    timeout: Duration::from_secs(1),
                })
                .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn hop_by_hop_and_guard_headers_stay_behind() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("host", "proxy:8080"),
            ("content-length", "12"),
            ("accept-encoding", "gzip"),
            ("x-toolgate-tenant", "acme"),
            ("authorization", "Bearer t"),
            ("mcp-session-id", "s-1"),
            ("mcp-protocol-version", "2025-06-18"),
            ("accept", "application/json, text/event-stream"),
            ("last-event-id", "42"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let out = upstream_headers(&h);
        let mut kept: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            [
                "accept",
                "authorization",
                "last-event-id",
                "mcp-protocol-version",
                "mcp-session-id",
                "traceparent"
            ]
        );
    }

    #[test]
    fn context_comes_from_headers_and_the_id() {
        let mut h = HeaderMap::new();
        h.insert("mcp-session-id", HeaderValue::from_static("mcp-s"));
        h.insert(TENANT_HEADER, HeaderValue::from_static("acme"));
        h.insert(TASK_GOAL_HEADER, HeaderValue::from_static("tidy the repo"));
        let c = context(&h, &serde_json::json!(5)).unwrap();
        assert_eq!(
            (c.session_id.as_str(), c.step_id.as_str(), c.tenant.as_str()),
            ("mcp-s", "5", "acme")
        );
        assert_eq!(c.task_goal, "tidy the repo");
        h.insert(SESSION_HEADER, HeaderValue::from_static("mine"));
        h.insert(STEP_HEADER, HeaderValue::from_static("step-3"));
        let c = context(&h, &serde_json::json!("x")).unwrap();
        assert_eq!(
            (c.session_id.as_str(), c.step_id.as_str()),
            ("mine", "step-3")
        );
        let long = serde_json::json!("x".repeat(MAX_ID_BYTES + 1));
        assert!(matches!(
            context(&HeaderMap::new(), &long),
            Err(ProxyError::InvalidRequest(_))
        ));
    }
}
