//! Guarding a tool call on its way through: the call is decided before it is forwarded,
//! and the reply (a JSON body, or an event on a stream) is decided before the client sees it.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry::KeyValue;
use serde_json::Value;
use std::time::Instant as CallInstant;
use tokio::time::Instant;

use super::Verdict;
use super::context::{context, mcp_session};
use super::definitions;
use super::error::{ProxyError, UpstreamError};
use super::jsonrpc::{self, ToolCall};
use super::mcp::McpProxy;
use super::outstanding::CallKey;
use super::sse::{self, SseEvent};
use super::upstream::{content_type, end_to_end, read_reply, upstream_headers};
use crate::decision::{Action, RiskLevel, RuleHit};
use crate::engine::{Call, SpanIds, TraceParent};
use crate::event::{Context, Event, EventKind};
use crate::policy::Policy;
use crate::telemetry::trace::{self, ClientSpan};

/// A forwarded tool call whose reply is awaited: what the reply is guarded with.
#[derive(Clone)]
pub(super) struct Awaited {
    pub(super) call: ToolCall,
    pub(super) context: Context,
    pub(super) policy: Arc<Policy>,
    pub(super) parent: TraceParent,
}

impl Awaited {
    /// What a reply on the GET stream is guarded as when its call is not remembered
    /// (expired, evicted, timed out): a result of the tool `unknown`, if the reply may carry
    /// tool output at all.
    pub(super) fn unknown(
        reply: &Value,
        context: &Context,
        policy: &Arc<Policy>,
        parent: &TraceParent,
    ) -> Option<Awaited> {
        let id = reply.get("id")?;
        (is_tool_result(reply) || carries_error_text(reply)).then(|| Awaited {
            call: ToolCall {
                id: id.clone(),
                name: UNKNOWN_TOOL.into(),
                arguments: None,
                pause_id: String::new(),
            },
            context: Context {
                step_id: jsonrpc::id_text(id),
                ..context.clone()
            },
            policy: policy.clone(),
            parent: parent.clone(),
        })
    }
}

/// A call on its way to the upstream: what its reply is guarded with, where it is
/// remembered, and the span around the upstream exchange.
pub(super) struct Pending {
    pub(super) awaited: Awaited,
    pub(super) key: CallKey,
    pub(super) span: ClientSpan,
    /// When the reply is due: the upstream timeout after forwarding. An upstream that keeps
    /// the stream open without ever replying must not hold the call (and the drain at
    /// shutdown) for ever.
    pub(super) deadline: Instant,
}

impl McpProxy {
    /// Decides a tool call; forwards it (redacted if need be) or answers it; then guards
    /// the reply.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn tool_call(
        &self,
        headers: HeaderMap,
        caller: &str,
        target: reqwest::Url,
        mut msg: Value,
        mut call: ToolCall,
        body: Bytes,
        policy: Arc<Policy>,
        start: CallInstant,
    ) -> Result<Response, ProxyError> {
        let context = context(&headers, caller, &call.id)?;
        // The tenant's overlay judges the call and its reply.
        let policy = self.0.store.for_tenant(&context.tenant, policy);
        let parent = trace::parent_from_headers(&headers);
        let mut event = Event::new(EventKind::ToolCallStart, context.clone());
        event.tool_name = call.name.clone();
        event.arguments = call.arguments.clone();
        event.pause_id = std::mem::take(&mut call.pause_id);
        // A tool whose definition is being kept from clients (poisoned, or changed and not
        // yet approved) is refused by name, also to a client that never listed the tools.
        if let Some(why) = self.0.definitions.blocked(&call.name) {
            let c = Call {
                policy: policy.clone(),
                parent: parent.clone(),
                start,
                size: body.len(),
            };
            let mut hit = RuleHit::new(
                definitions::BLOCKED_RULE,
                Action::Stop,
                RiskLevel::Critical,
                why,
            );
            hit.policy_tags = vec!["tool-definition".into(), "mcp".into()];
            let (d, span) = self.0.gate.evaluate(&event, &c, Some(hit));
            let verdict = Verdict::of(&d);
            self.0.gate.record(event.clone(), d, c, span);
            if verdict.blocks() {
                let answer = jsonrpc::blocked_response(&call.id, &verdict);
                return Ok((StatusCode::OK, axum::Json(answer)).into_response());
            }
        }
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
            // 4xx and 3xx are the transport's answer (an expired session, missing auth), and
            // the client needs their status as it is; but their body can quote anything (a
            // server that echoes the call, a tool's stderr), so it is judged like a result.
            return self.status_reply(resp, p).await;
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

    /// Reads a reply body whole, bounded by the policy's message limit and the call's
    /// deadline; a failure ends the call (`failed`).
    async fn read_whole(
        &self,
        resp: reqwest::Response,
        p: Pending,
    ) -> Result<(Bytes, Pending), ProxyError> {
        let up = &self.0.upstream;
        let limit = p.awaited.policy.max_message_bytes;
        let read = tokio::time::timeout_at(p.deadline, read_reply(up, resp, limit)).await;
        match read.unwrap_or_else(|_| Err(up.timed_out())) {
            Ok(b) => Ok((b, p)),
            Err(e) => Err(self.failed(p, e)),
        }
    }

    /// Ends a call whose reply is in: it is no longer awaited and its span ends.
    fn answered(&self, p: Pending) -> Awaited {
        let Pending {
            awaited,
            key,
            mut span,
            ..
        } = p;
        self.0.outstanding.take(&key);
        span.end();
        awaited
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
        let (bytes, p) = self.read_whole(resp, p).await?;
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
        let awaited = self.answered(p);
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

    /// A 3xx or 4xx answer to a tool call: its body judged as an error result of the call,
    /// its status and headers kept. A body that must not pass becomes the blocked result.
    async fn status_reply(
        &self,
        resp: reqwest::Response,
        p: Pending,
    ) -> Result<Response, ProxyError> {
        let status = resp.status();
        let mut headers = end_to_end(resp.headers(), |_| true);
        let (bytes, p) = self.read_whole(resp, p).await?;
        let awaited = self.answered(p);
        let a = &awaited;
        let mut event = Event::new(EventKind::ToolCallResult, a.context.clone());
        event.tool_name = a.call.name.clone();
        event.arguments = a.call.arguments.clone();
        event.output = String::from_utf8_lossy(&bytes).into_owned();
        event.is_error = true;
        let (verdict, _) = self
            .judge(
                event,
                a.policy.clone(),
                CallInstant::now(),
                a.parent.clone(),
                bytes.len(),
            )
            .await?;
        let body = if verdict.blocks() {
            headers.insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Bytes::from(jsonrpc::blocked_response(&a.call.id, &verdict).to_string())
        } else {
            match verdict.redacted_output {
                Some(r) if verdict.action == Action::Redact => Bytes::from(r),
                _ => bytes,
            }
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
                CallInstant::now(),
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
        start: CallInstant,
        parent: TraceParent,
        size: usize,
    ) -> Result<(Verdict, Option<SpanIds>), ProxyError> {
        let call = Call {
            policy,
            parent,
            start,
            size,
        };
        self.0
            .gate
            .decide(event, call, Verdict::of)
            .await
            .map_err(|e| ProxyError::Internal(e.to_string()))
    }

    /// The event to send for `ev` when it carries a reply that `awaited_for` names a call
    /// for (`None` otherwise): the reply decided and, if the verdict says so, rewritten.
    pub(super) async fn guard_event(
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn replies_that_may_carry_tool_output_are_known_by_shape() {
        let result = json!({"jsonrpc":"2.0","id":1,"result":{"content":[]}});
        assert!(is_tool_result(&result));
        assert!(!is_tool_result(&json!({"id":1,"result":{"tools":[]}})));
        for (reply, carries) in [
            (
                json!({"id":1,"error":{"code":-32000,"message":"stderr: …"}}),
                true,
            ),
            (
                json!({"id":1,"error":{"code":-32000,"data":{"out":"…"}}}),
                true,
            ),
            (json!({"id":1,"error":{"code":-32000,"data":null}}), false),
            (json!({"id":1,"error":{"code":-32000,"message":7}}), false),
            (result, false),
        ] {
            assert_eq!(carries_error_text(&reply), carries, "{reply}");
        }
    }
}
