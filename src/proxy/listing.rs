//! `tools/list` through the proxy: forwarded as it came, and its answer (a JSON body, or the
//! event on a stream that carries it) judged tool by tool (`definitions`) before the client
//! reads it.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use super::context::context;
use super::error::{ProxyError, UpstreamError};
use super::jsonrpc;
use super::mcp::McpProxy;
use super::sse::{self, SseParser};
use super::upstream::{content_type, end_to_end, head_of, read_reply, upstream_headers};
use crate::engine::TraceParent;
use crate::event::Context;
use crate::policy::Policy;
use crate::telemetry::trace;

/// What a listing is judged with.
struct Listing {
    id: Value,
    context: Context,
    policy: Arc<Policy>,
    parent: TraceParent,
}

impl McpProxy {
    pub(super) async fn tools_list(
        &self,
        headers: &HeaderMap,
        caller: &str,
        target: reqwest::Url,
        id: &Value,
        body: Bytes,
        policy: Arc<Policy>,
    ) -> Result<Response, ProxyError> {
        let context = context(headers, caller, id)?;
        let policy = self.0.store.for_tenant(&context.tenant, policy);
        let l = Listing {
            id: id.clone(),
            context,
            policy,
            parent: trace::parent_from_headers(headers),
        };
        let up = &self.0.upstream;
        let deadline = tokio::time::Instant::now() + up.timeout;
        let resp = up
            .send_until(
                Method::POST,
                target,
                upstream_headers(headers),
                body,
                deadline,
            )
            .await?;
        let status = resp.status();
        if !status.is_success() {
            // No tool definitions in it: the transport's answer goes back as it came.
            return Ok(self.relay(resp, false));
        }
        let ct = content_type(resp.headers());
        if ct.starts_with("text/event-stream") {
            return Ok(self.relay_listed(resp, l));
        }
        let out_headers = end_to_end(resp.headers(), |_| true);
        let read =
            tokio::time::timeout_at(deadline, read_reply(up, resp, l.policy.max_message_bytes))
                .await;
        let bytes = read.unwrap_or_else(|_| Err(up.timed_out()))?;
        let mut msg: Value =
            serde_json::from_slice(&bytes).map_err(|e| UpstreamError::Malformed {
                addr: up.addr.clone(),
                why: format!("a `tools/list` answer that is not JSON: {e}"),
            })?;
        let body = if self.judge_listing(&mut msg, &l) {
            Bytes::from(msg.to_string())
        } else {
            bytes
        };
        let mut r = Response::new(Body::from(body));
        *r.status_mut() = status;
        *r.headers_mut() = out_headers;
        Ok(r)
    }

    /// Judges every tool list in `msg` (one reply, or each of a batch); whether it changed.
    /// Every reply shaped like a listing is judged, not only the one whose id matches: a
    /// client may match ids the proxy would not (`1` and `1e0`), and a listing must not
    /// reach it unjudged on its id's spelling.
    fn judge_listing(&self, msg: &mut Value, l: &Listing) -> bool {
        let items: Vec<&mut Value> = match msg {
            Value::Array(items) => items.iter_mut().collect(),
            one => vec![one],
        };
        let mut changed = false;
        for item in items {
            if !jsonrpc::is_reply(item) {
                continue;
            }
            let Some(result) = item
                .get_mut("result")
                .filter(|r| r.get("tools").is_some_and(Value::is_array))
            else {
                continue;
            };
            changed |= self.0.definitions.judge_list(
                &self.0.gate,
                result,
                &l.context,
                &l.policy,
                &l.parent,
            );
        }
        changed
    }

    /// Relays a `tools/list` answer stream: the event with the answer is judged, the others
    /// pass as they are. An event too large to judge ends the stream rather than passing.
    fn relay_listed(&self, mut resp: reqwest::Response, l: Listing) -> Response {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(super::relay::RELAY_CHANNEL);
        let head = head_of(&resp);
        let this = self.clone();
        let mut shutdown = self.0.shutdown.clone();
        let deadline = tokio::time::Instant::now() + self.0.upstream.timeout;
        tokio::spawn(async move {
            let mut parser = SseParser::new(l.policy.max_message_bytes);
            let mut answered = false;
            loop {
                let next = tokio::select! {
                    c = resp.chunk() => c,
                    () = tx.closed() => return,
                    () = tokio::time::sleep_until(deadline), if !answered => {
                        return super::relay::broke_off(&tx).await;
                    }
                    () = super::relay::stopped(&mut shutdown) => return,
                };
                let chunk = match next {
                    Ok(Some(c)) => c,
                    Ok(None) => return,
                    Err(_) => return super::relay::broke_off(&tx).await,
                };
                let Ok(events) = parser.push(&chunk) else {
                    return super::relay::broke_off(&tx).await;
                };
                for ev in events {
                    let mut out = ev.raw.clone();
                    // Every event is looked at, also after the answer: a second listing on
                    // the same stream is judged like the first.
                    if let Some(mut msg) = ev
                        .data
                        .as_deref()
                        .and_then(|d| serde_json::from_str::<Value>(d).ok())
                    {
                        answered |= jsonrpc::find_reply_mut(&mut msg, &l.id).is_some();
                        if this.judge_listing(&mut msg, &l) {
                            out = sse::write_event(
                                ev.id.as_deref(),
                                ev.event.as_deref(),
                                &msg.to_string(),
                            );
                        }
                    }
                    if tx.send(Ok(out)).await.is_err() {
                        return;
                    }
                }
            }
        });
        head.with_body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
    }
}
