//! The gRPC inline proxy: toolgate serves `ToolService` in front of the real tool server.
//! A call is decided as a `tool_call_start` before it is forwarded (as it came, or with its
//! arguments redacted) and its result as a `tool_call_result` before the agent sees it; a
//! blocked call never reaches the upstream. Everything deciding goes through the front door
//! (`Gate`); this edge converts, forwards and waits.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::Verdict;
use super::h2_client::{self, H2Client};
use crate::api::convert;
use crate::api::status::ApiError;
use crate::decision::Action;
use crate::engine::{Call, Gate, SpanIds, TraceParent};
use crate::event::{Context, Event, EventKind};
use crate::policy::store::PolicyStore;
use crate::policy::{OnPause, Policy};
use crate::proto;
use crate::proto::tool_service_client::ToolServiceClient;
use crate::proto::tool_service_server::ToolService;
use crate::session::PauseState;
use crate::telemetry::Telemetry;
use crate::telemetry::trace::{self, ClientSpan};

/// Where the proxied tool server is and how long a call to it may take.
#[derive(Debug, Clone)]
pub struct ToolUpstream {
    /// `http://host:port` or `https://host:port`.
    pub url: String,
    /// The longest a forwarded call may take when the caller set no shorter deadline.
    pub timeout: Duration,
    /// PEM roots to trust for an `https` upstream, besides the public web roots.
    pub ca_pem: Option<Vec<u8>>,
}

/// The ToolService edge.
#[derive(Clone)]
pub struct ToolProxy {
    store: Arc<PolicyStore>,
    gate: Gate,
    telemetry: Arc<Telemetry>,
    client: ToolServiceClient<H2Client>,
    /// The upstream as the operator wrote it, for messages and spans.
    upstream: Arc<str>,
    host: Arc<str>,
    port: u16,
    timeout: Duration,
    shutdown: watch::Receiver<bool>,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection that died silently (a restarted pod) is noticed in seconds, not at the next
/// call's deadline.
const KEEP_ALIVE: Duration = Duration::from_secs(30);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// An upstream error this close to the deadline is the deadline's doing.
const DEADLINE_SLACK: Duration = Duration::from_millis(10);

/// Longest wait between two looks at a held pause.
const HOLD_POLL_MAX: Duration = Duration::from_millis(250);

impl ToolProxy {
    /// Builds the proxy; the upstream is connected on first use and reconnected after a
    /// failure, so a tool server that starts later than toolgate is not an error here.
    pub fn new(
        cfg: &ToolUpstream,
        store: Arc<PolicyStore>,
        gate: Gate,
        telemetry: Arc<Telemetry>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<ToolProxy, String> {
        let uri: http::Uri = cfg
            .url
            .parse()
            .map_err(|e| format!("--upstream: `{}` is not a URL: {e}", cfg.url))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "--upstream: `{}` must start with http:// or https://",
                    cfg.url
                ));
            }
        };
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tls_config = if tls {
            Some(
                crate::tls::client_config(
                    cfg.ca_pem.as_deref(),
                    "--upstream-ca",
                    crate::tls::ALPN_H2,
                )
                .map_err(|e| format!("--upstream: TLS settings: {e}"))?,
            )
        } else {
            None
        };
        let h2 = H2Client::new(
            &host,
            port,
            tls_config,
            h2_client::Settings {
                connect_timeout: CONNECT_TIMEOUT,
                keep_alive: KEEP_ALIVE,
                keep_alive_timeout: KEEP_ALIVE_TIMEOUT,
            },
        )
        .map_err(|e| format!("--upstream: {e}"))?;
        let client = ToolServiceClient::with_origin(h2, uri)
            // A result over the pack's message limit is refused, never passed on unread.
            .max_decoding_message_size(store.load().max_message_bytes)
            .max_encoding_message_size(usize::MAX);
        Ok(ToolProxy {
            store,
            gate,
            telemetry,
            client,
            upstream: Arc::from(cfg.url.as_str()),
            host: Arc::from(host),
            port,
            timeout: cfg.timeout,
            shutdown,
        })
    }
}

/// A call the start decision let through: what goes upstream and what the result is
/// judged with.
struct Admitted {
    start_decision: proto::Decision,
    /// What goes upstream; taken when it is sent.
    request: Option<proto::InvokeRequest>,
    tool_name: String,
    /// The arguments as forwarded, parsed, and their length as text: the result is judged
    /// with them.
    arguments: Option<serde_json::Value>,
    arguments_len: usize,
    context: Context,
    policy: Arc<Policy>,
    parent: TraceParent,
    span: Option<SpanIds>,
    /// The caller's metadata; taken when the request is sent.
    metadata: MetadataMap,
    /// When the caller's deadline (or the upstream timeout) runs out.
    deadline: Instant,
    /// The caller set a deadline: the upstream is told what is left of it. Without one the
    /// upstream timeout is kept here alone.
    propagate: bool,
}

/// What the start decision came to.
enum Admission {
    Forward(Box<Admitted>),
    /// Not forwarded: the decision, and the message for the model.
    Answered {
        start_decision: Box<proto::Decision>,
        message: String,
    },
}

impl ToolProxy {
    /// Decides the call (waiting for a human when the pack holds pauses) and, when it may
    /// go, builds the request the upstream gets.
    async fn admit(
        &self,
        metadata: MetadataMap,
        who: String,
        msg: proto::InvokeRequest,
    ) -> Result<Admission, ApiError> {
        let start = Instant::now();
        let caller = caller_timeout(&metadata);
        let deadline = start + caller.map_or(self.timeout, |t| t.min(self.timeout));
        let policy = self.store.load();
        let parent = trace::parent_from_metadata(&metadata);
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let proto_context = msg.context.clone();
        let arguments_json = msg.arguments_json.clone();
        let tool_name = msg.tool_name.clone();
        let mut event = convert::tool_call_start(proto::ToolCallStartRequest {
            context: msg.context,
            tool_name: msg.tool_name,
            arguments_json: msg.arguments_json,
            pause_id: msg.pause_id,
        })?;
        event.context.caller = who;
        let context = event.context.clone();
        let mut arguments = event.arguments.clone();
        let policy = self.store.for_tenant(&context.tenant, policy);
        let hold = policy.proxy.on_pause == OnPause::Hold;
        let retry_event = hold.then(|| event.clone());
        let call = Call {
            policy: policy.clone(),
            parent: parent.clone(),
            start,
            size,
        };
        let ((mut wire, mut verdict), mut span) = self.decide(event, call).await?;
        if let (Some(mut again), Some(id)) = (
            retry_event.filter(|_| verdict.action == Action::Pause),
            verdict.pause_id.clone(),
        ) {
            let until = deadline.min(Instant::now() + policy.proxy.hold_timeout);
            let state = self.hold(&id, &context.session_id, until).await?;
            // Answered (or gone): the call is decided afresh with the pause id, so the
            // approval is redeemed, or the denial or expiry decided, exactly as for an agent
            // that resubmits. Still pending at the time limit: the PAUSE stands.
            if state != Some(PauseState::Pending) {
                again.pause_id = id;
                let call = Call {
                    policy: policy.clone(),
                    parent: parent.clone(),
                    start: Instant::now(),
                    size,
                };
                ((wire, verdict), span) = self.decide(again, call).await?;
            }
        }
        if verdict.blocks() {
            return Ok(Admission::Answered {
                start_decision: Box::new(wire),
                message: verdict.message,
            });
        }
        // Only an enforced REDACT changes the call: in shadow mode the decision carries what
        // it would have redacted, and the call goes as it came.
        let arguments_json = match verdict.redacted_arguments_json {
            Some(r) if verdict.action == Action::Redact => {
                arguments = convert::parse_arguments("arguments_json", &r)?;
                r
            }
            _ => arguments_json,
        };
        Ok(Admission::Forward(Box::new(Admitted {
            start_decision: wire,
            tool_name: tool_name.clone(),
            arguments,
            arguments_len: arguments_json.len(),
            request: Some(proto::InvokeRequest {
                context: proto_context,
                tool_name,
                arguments_json,
                // An approval is toolgate's; the tool server never sees it.
                pause_id: String::new(),
            }),
            context,
            policy,
            parent,
            span,
            metadata,
            deadline,
            propagate: caller.is_some(),
        })))
    }

    async fn decide(
        &self,
        event: Event,
        call: Call,
    ) -> Result<((proto::Decision, Verdict), Option<SpanIds>), ApiError> {
        Ok(self
            .gate
            .decide(event, call, |d| (convert::decision(d), Verdict::of(d)))
            .await?)
    }

    /// Waits until the pause is answered, expires or `until` passes; `None` when the pause
    /// is gone. The caller hanging up drops this wait with its call.
    async fn hold(
        &self,
        id: &str,
        session: &str,
        until: Instant,
    ) -> Result<Option<PauseState>, ApiError> {
        let mut every = Duration::from_millis(20);
        let mut stop = self.shutdown.clone();
        loop {
            match self.gate.pause_state(id, session).await? {
                Some(PauseState::Pending) => {}
                other => return Ok(other),
            }
            let now = Instant::now();
            if now >= until {
                return Ok(Some(PauseState::Pending));
            }
            tokio::select! {
                _ = tokio::time::sleep(every.min(until - now)) => {}
                _ = stop.wait_for(|s| *s) => return Err(ApiError::ShuttingDown),
            }
            every = (every * 2).min(HOLD_POLL_MAX);
        }
    }

    /// The upstream request: the caller's end-to-end metadata, the remaining deadline, and
    /// a `traceparent` naming the upstream span.
    fn outbound<T>(&self, a: &mut Admitted, body: T, span: &ClientSpan) -> Request<T> {
        let mut req = Request::new(body);
        *req.metadata_mut() = passthrough(std::mem::take(&mut a.metadata));
        if let Some(tp) = span.traceparent().and_then(|t| t.parse().ok()) {
            req.metadata_mut().insert("traceparent", tp);
        }
        if a.propagate {
            req.set_timeout(a.deadline.saturating_duration_since(Instant::now()));
        }
        req
    }

    fn client_span(&self, a: &Admitted, method: &'static str) -> ClientSpan {
        self.telemetry
            .tracing
            .client_span(a.span.as_ref(), "toolgate.upstream", || {
                vec![
                    KeyValue::new("rpc.system", "grpc"),
                    KeyValue::new("rpc.service", "toolgate.v1.ToolService"),
                    KeyValue::new("rpc.method", method),
                    KeyValue::new("server.address", self.host.to_string()),
                    KeyValue::new("server.port", i64::from(self.port)),
                    KeyValue::new("gen_ai.tool.name", a.tool_name.clone()),
                ]
            })
    }

    /// The upstream's answer (or the deadline's) as the message, or the caller's error.
    async fn upstream_answer<T>(
        &self,
        a: &Admitted,
        answer: Result<Result<Response<T>, Status>, tokio::time::error::Elapsed>,
        span: &mut ClientSpan,
    ) -> Result<T, ApiError> {
        match answer {
            Err(_) => {
                span.fail("deadline");
                span.end();
                Err(self.deadline_error())
            }
            Ok(Err(s)) => Err(self.upstream_error(a, s, span).await),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }

    /// A failed upstream call as the caller's error. The upstream's own message may quote
    /// the tool's output, so it is judged like a result before it is passed on.
    async fn upstream_error(&self, a: &Admitted, s: Status, span: &mut ClientSpan) -> ApiError {
        span.fail(format!("{:?}", s.code()));
        span.end();
        // The upstream enforces the deadline it was sent too, and may give up a moment
        // before this side's timer does: at the deadline, whatever it says, it is one.
        if s.code() == tonic::Code::DeadlineExceeded
            || Instant::now() + DEADLINE_SLACK >= a.deadline
        {
            return self.deadline_error();
        }
        let code = match s.code() {
            // The pack's message limit, met while reading the upstream's answer.
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
                if s.message().contains("message length too large") =>
            {
                return ApiError::Upstream {
                    code: tonic::Code::ResourceExhausted,
                    message: format!(
                        "upstream tool server {}: its result is over the {}-byte message limit",
                        self.upstream, a.policy.max_message_bytes
                    ),
                };
            }
            c => c,
        };
        let message = match self.judge_result(a, s.message(), true).await {
            Ok((_, v)) if v.blocks() => v.message,
            Ok((_, v)) => match v.redacted_output {
                Some(r) if v.action == Action::Redact => r,
                _ => s.message().to_string(),
            },
            Err(e) => return e,
        };
        let what = if code == tonic::Code::Unavailable {
            "is unreachable or refused the call"
        } else {
            "failed the call"
        };
        ApiError::Upstream {
            code,
            message: format!("upstream tool server {} {what}: {message}", self.upstream),
        }
    }

    /// Decides a result of the admitted call.
    async fn judge_result(
        &self,
        a: &Admitted,
        output: &str,
        is_error: bool,
    ) -> Result<(proto::Decision, Verdict), ApiError> {
        let mut event = Event::new(EventKind::ToolCallResult, a.context.clone());
        event.tool_name = a.tool_name.clone();
        event.arguments = a.arguments.clone();
        let size = output.len() + a.arguments_len;
        event.output = output.to_string();
        event.is_error = is_error;
        let call = Call {
            policy: a.policy.clone(),
            parent: a.parent.clone(),
            start: Instant::now(),
            size,
        };
        Ok(self.decide(event, call).await?.0)
    }

    fn deadline_error(&self) -> ApiError {
        ApiError::Upstream {
            code: tonic::Code::DeadlineExceeded,
            message: format!(
                "upstream tool server {} did not answer before the call's deadline",
                self.upstream
            ),
        }
    }
}

type InvokeStream = Pin<Box<dyn Stream<Item = Result<proto::InvokeStreamResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ToolService for ToolProxy {
    async fn invoke(
        &self,
        req: Request<proto::InvokeRequest>,
    ) -> Result<Response<proto::InvokeResponse>, Status> {
        let (metadata, ext, msg) = req.into_parts();
        let who = crate::api::caller_of(&ext);
        let mut a = match self.admit(metadata, who, msg).await? {
            Admission::Forward(a) => a,
            Admission::Answered {
                start_decision,
                message,
            } => {
                return Ok(Response::new(proto::InvokeResponse {
                    output: message,
                    is_error: true,
                    forwarded: false,
                    start_decision: Some(*start_decision),
                    result_decision: None,
                }));
            }
        };
        let mut span = self.client_span(&a, "Invoke");
        let body = a.request.take().unwrap_or_default();
        let req = self.outbound(&mut a, body, &span);
        let mut client = self.client.clone();
        let answer = tokio::time::timeout_at(a.deadline.into(), client.invoke(req)).await;
        let reply = self.upstream_answer(&a, answer, &mut span).await?;
        span.end();
        let (wire, verdict) = self.judge_result(&a, &reply.output, reply.is_error).await?;
        let (output, is_error) = if verdict.blocks() {
            (verdict.message, true)
        } else {
            let out = match verdict.redacted_output {
                Some(r) if verdict.action == Action::Redact => r,
                _ => reply.output,
            };
            (out, reply.is_error)
        };
        Ok(Response::new(proto::InvokeResponse {
            output,
            is_error,
            forwarded: true,
            start_decision: Some(a.start_decision),
            result_decision: Some(wire),
        }))
    }

    type InvokeStreamStream = InvokeStream;

    async fn invoke_stream(
        &self,
        req: Request<proto::InvokeStreamRequest>,
    ) -> Result<Response<Self::InvokeStreamStream>, Status> {
        let (metadata, ext, m) = req.into_parts();
        let who = crate::api::caller_of(&ext);
        let msg = proto::InvokeRequest {
            context: m.context,
            tool_name: m.tool_name,
            arguments_json: m.arguments_json,
            pause_id: m.pause_id,
        };
        let mut a = match self.admit(metadata, who, msg).await? {
            Admission::Forward(a) => a,
            Admission::Answered {
                start_decision,
                message,
            } => {
                let only = proto::InvokeStreamResponse {
                    output: message,
                    is_error: true,
                    forwarded: false,
                    start_decision: Some(*start_decision),
                    ..Default::default()
                };
                return Ok(Response::new(Box::pin(tokio_stream::once(Ok(only)))));
            }
        };
        let mut span = self.client_span(&a, "InvokeStream");
        let r = a.request.take().unwrap_or_default();
        let body = proto::InvokeStreamRequest {
            context: r.context,
            tool_name: r.tool_name,
            arguments_json: r.arguments_json,
            pause_id: String::new(),
        };
        let req = self.outbound(&mut a, body, &span);
        let mut client = self.client.clone();
        let opened = tokio::time::timeout_at(a.deadline.into(), client.invoke_stream(req)).await;
        let upstream = self.upstream_answer(&a, opened, &mut span).await?;
        let this = self.clone();
        let out = crate::api::async_stream(move |tx| async move {
            this.relay_stream(*a, upstream, span, tx).await;
        });
        Ok(Response::new(Box::pin(out)))
    }
}

impl ToolProxy {
    /// Passes a streamed result on as it is judged: each upstream piece goes through the
    /// hold-back window; at the end the whole output is judged once more as one result.
    async fn relay_stream(
        &self,
        a: Admitted,
        mut upstream: tonic::Streaming<proto::InvokeStreamResponse>,
        mut span: ClientSpan,
        tx: tokio::sync::mpsc::Sender<Result<proto::InvokeStreamResponse, Status>>,
    ) {
        let first = proto::InvokeStreamResponse {
            forwarded: true,
            start_decision: Some(a.start_decision.clone()),
            ..Default::default()
        };
        if tx.send(Ok(first)).await.is_err() {
            return;
        }
        let mut chunks = self.gate.stream(a.policy.clone(), a.parent.clone());
        chunks
            .open_result(a.context.clone(), a.policy.clone(), a.tool_name.clone())
            .await;
        let limit = a.policy.max_message_bytes;
        let mut whole = String::new();
        let mut is_error = false;
        loop {
            let next = tokio::select! {
                n = tokio::time::timeout_at(a.deadline.into(), upstream.next()) => n,
                // The agent went away: dropping the upstream stream cancels the call there.
                _ = tx.closed() => return,
            };
            let piece = match next {
                Err(_) => {
                    span.fail("deadline");
                    span.end();
                    let _ = tx.send(Err(self.deadline_error().into())).await;
                    return;
                }
                Ok(None) => break,
                Ok(Some(Err(s))) => {
                    let e = self.upstream_error(&a, s, &mut span).await;
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
                Ok(Some(Ok(p))) => p,
            };
            is_error |= piece.is_error;
            // The whole output is judged at the end, so it is bounded like a unary result.
            if whole.len() + piece.output.len() > limit {
                span.fail("too_large");
                span.end();
                let e = ApiError::Upstream {
                    code: tonic::Code::ResourceExhausted,
                    message: format!(
                        "upstream tool server {}: its streamed result passed the {limit}-byte \
                         message limit; the rest was not forwarded",
                        self.upstream
                    ),
                };
                let _ = tx.send(Err(e.into())).await;
                return;
            }
            whole.push_str(&piece.output);
            let Some(step) = chunks.push(&piece.output, false, Instant::now(), convert::decision)
            else {
                return;
            };
            let done = step.done;
            let msg = proto::InvokeStreamResponse {
                output: step.released_text,
                is_error,
                chunk_decision: Some(step.decision),
                ..Default::default()
            };
            if tx.send(Ok(msg)).await.is_err() || done {
                // A STOP ends the stream here; the upstream call is cancelled with it.
                span.end();
                return;
            }
        }
        span.end();
        let (result, verdict) = match self.judge_result(&a, &whole, is_error).await {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
        };
        let last = if verdict.blocks() {
            proto::InvokeStreamResponse {
                is_error: true,
                result_decision: Some(result),
                ..Default::default()
            }
        } else {
            let Some(step) = chunks.push("", true, Instant::now(), convert::decision) else {
                return;
            };
            proto::InvokeStreamResponse {
                output: step.released_text,
                is_error,
                chunk_decision: Some(step.decision),
                result_decision: Some(result),
                ..Default::default()
            }
        };
        let _ = tx.send(Ok(last)).await;
    }
}

/// The caller's remaining deadline (`grpc-timeout`, e.g. `250m`), when it set one.
fn caller_timeout(md: &MetadataMap) -> Option<Duration> {
    let v = md.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The caller's metadata as the upstream should see it: end-to-end entries only. gRPC's
/// own framing headers are set anew by the client, the trace context is replaced by the
/// upstream span's, and `x-toolgate-*` (the approver token among them) stays here.
fn passthrough(md: MetadataMap) -> MetadataMap {
    const OWN: [&str; 8] = [
        "content-type",
        "grpc-timeout",
        "grpc-encoding",
        "grpc-accept-encoding",
        "user-agent",
        "host",
        "traceparent",
        "tracestate",
    ];
    let headers = md.into_headers();
    let kept = super::upstream::end_to_end(&headers, |n| {
        !OWN.contains(&n.as_str()) && !n.as_str().starts_with("x-toolgate-")
    });
    MetadataMap::from_headers(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_deadline_is_read_in_every_unit() {
        let mut md = MetadataMap::new();
        for (v, want) in [
            ("250m", Duration::from_millis(250)),
            ("2S", Duration::from_secs(2)),
            ("1M", Duration::from_secs(60)),
            ("1H", Duration::from_secs(3600)),
            ("900u", Duration::from_micros(900)),
            ("5n", Duration::from_nanos(5)),
        ] {
            md.insert("grpc-timeout", v.parse().unwrap());
            assert_eq!(caller_timeout(&md), Some(want), "{v}");
        }
        md.insert("grpc-timeout", "x".parse().unwrap());
        assert_eq!(caller_timeout(&md), None);
        assert_eq!(caller_timeout(&MetadataMap::new()), None);
    }

    #[test]
    fn only_end_to_end_metadata_goes_upstream() {
        let mut md = MetadataMap::new();
        md.insert("authorization", "Bearer upstream-token".parse().unwrap());
        md.insert("x-request-id", "r-1".parse().unwrap());
        md.insert("x-toolgate-approver-token", "secret".parse().unwrap());
        md.insert("x-toolgate-session", "s".parse().unwrap());
        md.insert("te", "trailers".parse().unwrap());
        md.insert("grpc-timeout", "1S".parse().unwrap());
        md.insert("traceparent", "00-aa-bb-01".parse().unwrap());
        md.insert("connection", "x-hop".parse().unwrap());
        md.insert("x-hop", "1".parse().unwrap());
        let out = passthrough(md);
        let mut keys: Vec<_> = out
            .keys()
            .map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => k.as_str().to_string(),
                tonic::metadata::KeyRef::Binary(k) => k.as_str().to_string(),
            })
            .collect();
        keys.sort();
        assert_eq!(keys, ["authorization", "x-request-id"]);
    }
}
