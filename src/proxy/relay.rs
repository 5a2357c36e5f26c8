//! Relaying upstream answers to the client as they arrive: plain bodies and streams as
//! they are, a tool call's stream with its reply guarded and due by a deadline, and the
//! server's GET stream with any reply it carries guarded. Buffers between the two sides are
//! bounded, so a slow client slows the relay instead of growing memory.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::context::{context, mcp_session};
use super::error::{ProxyError, UpstreamError};
use super::guard::{Awaited, Pending};
use super::mcp::McpProxy;
use super::sse::{self, SseError, SseParser};
use super::upstream::{content_type, head_of};
use crate::policy::Policy;
use crate::telemetry::trace;

/// Bounded buffering between the upstream and the client: a slow client slows the relay.
pub(super) const RELAY_CHANNEL: usize = 16;

impl McpProxy {
    /// Relays an answer as it arrives. `endless` streams end when the proxy stops; others
    /// get the upstream timeout after that to finish, so no stream holds the drain for ever.
    pub(super) fn relay(&self, mut resp: reqwest::Response, endless: bool) -> Response {
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
                    Err(_) => return broke_off(&tx).await,
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
    pub(super) fn relay_guarded(&self, mut resp: reqwest::Response, p: Pending) -> Response {
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
                    // A client that stops reading must not stretch the deadline either.
                    let sent = tokio::select! {
                        sent = tx.send(Ok(out)) => sent.is_ok(),
                        () = tokio::time::sleep_until(deadline), if !answered => {
                            failure = Some(up.timed_out());
                            break 'read;
                        }
                    };
                    if !sent {
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
    /// here too, and so is a reply to a call the proxy does not know that may still carry
    /// tool output (see `Awaited::unknown`). The stream ends when the proxy stops.
    pub(super) fn relay_server_stream(
        &self,
        resp: reqwest::Response,
        headers: &HeaderMap,
        caller: &str,
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
        let fallback = context(headers, caller, &Value::Null).unwrap_or_default();
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
                match this.0.outstanding.take(&(session.clone(), id.to_string())) {
                    Some(a) => Some(a),
                    None => Awaited::unknown(reply, &fallback, &policy, &parent),
                }
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
                    Err(_) => return broke_off(&tx).await,
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
}

/// Ends a relayed body with an error: the client must see the upstream's break, not a
/// clean end of a cut body.
pub(super) async fn broke_off(tx: &mpsc::Sender<Result<Bytes, std::io::Error>>) {
    let _ = tx
        .send(Err(std::io::Error::other("upstream stream broke off")))
        .await;
}

fn body_of(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Body {
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

pub(super) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// `grace` after the proxy stops.
async fn stopped_for(shutdown: &mut watch::Receiver<bool>, grace: Duration) {
    stopped(shutdown).await;
    tokio::time::sleep(grace).await;
}
