//! tonic service implementations: the GuardService edge. Each handler converts the request
//! into an `Event` and a `Call`, goes through the engine's front door (`Gate`), and converts
//! the Decision back; nothing here decides or records.

pub mod convert;
pub mod shed;
pub mod status;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{broadcast, watch};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::engine::gate::ChunkAnswer;
use crate::engine::{Call, Gate};
use crate::event::Event;
use crate::policy::store::PolicyStore;
use crate::proto;
use crate::proto::guard_service_server::GuardService;
use crate::telemetry::trace;
use status::ApiError;

/// Who is asking about pauses and sessions (`Guard::access`).
enum Access {
    /// Sees every session and pause and may resolve pauses; the identity, possibly empty.
    Approver(String),
    /// Sees only the sessions it opened and the pauses its calls made.
    Caller(String),
}

#[derive(Clone)]
pub struct Guard {
    store: Arc<PolicyStore>,
    gate: Gate,
    /// Turns true when the server stops: streams that would otherwise never end close.
    shutdown: watch::Receiver<bool>,
    /// When set, ResolvePause needs it in `x-toolgate-approver-token`: the agent shares
    /// this gRPC port and must not approve its own pauses.
    approver_token: Option<Arc<str>>,
}

/// The metadata key that carries the approver token.
pub const APPROVER_TOKEN_HEADER: &str = "x-toolgate-approver-token";
/// The environment variable that sets it, for `serve` and `toolgate pauses`.
pub const APPROVER_TOKEN_ENV: &str = "TOOLGATE_APPROVER_TOKEN";

impl Guard {
    pub fn new(
        store: Arc<PolicyStore>,
        gate: Gate,
        shutdown: watch::Receiver<bool>,
        approver_token: Option<String>,
    ) -> Guard {
        Guard {
            store,
            gate,
            shutdown,
            approver_token: approver_token.filter(|t| !t.is_empty()).map(Arc::from),
        }
    }

    /// Whether the request carries the approver token (compared in constant time).
    fn has_token<T>(&self, req: &Request<T>) -> bool {
        let Some(want) = &self.approver_token else {
            return false;
        };
        let got = req
            .metadata()
            .get(APPROVER_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let (a, b) = (want.as_bytes(), got.as_bytes());
        let diff = a.len() ^ b.len()
            | a.iter()
                .zip(b.iter().chain(std::iter::repeat(&0)))
                .fold(0usize, |acc, (x, y)| acc | usize::from(x ^ y));
        diff == 0
    }

    /// What this caller may see and do with pauses and sessions. With neither an approver
    /// token nor `approvers:` configured, everyone is an approver (one trusted agent on
    /// localhost); otherwise an approver is whoever shows the token or an identity in
    /// `approvers:`, and any other verified caller sees only its own sessions and pauses.
    fn access<T>(&self, req: &Request<T>, what: &str) -> Result<Access, ApiError> {
        let who = caller_of(req.extensions());
        let callers = &self.store.load().callers;
        let guarded = self.approver_token.is_some() || !callers.approvers.is_empty();
        if !guarded || self.has_token(req) || callers.is_approver(&who) {
            return Ok(Access::Approver(who));
        }
        if who.is_empty() {
            return Err(ApiError::PermissionDenied(format!(
                "{what} needs an approver (an identity in the pack's approvers, or the \
                 approver token in `{APPROVER_TOKEN_HEADER}`) or a verified caller identity"
            )));
        }
        Ok(Access::Caller(who))
    }

    /// The front door for one event; the answer is the wire Decision.
    async fn decide<R: prost::Message>(
        &self,
        req: Request<R>,
        convert: fn(R) -> Result<Event, ApiError>,
    ) -> Result<proto::Decision, Status> {
        let start = Instant::now();
        let policy = self.store.load();
        let parent = trace::parent_from_metadata(req.metadata());
        let who = caller_of(req.extensions());
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let mut event = convert(msg)?;
        event.context.caller = who;
        let policy = self.store.for_tenant(&event.context.tenant, policy);
        let call = Call {
            policy,
            parent,
            start,
            size,
        };
        let (wire, _) = self
            .gate
            .decide(event, call, convert::decision)
            .await
            .map_err(ApiError::from)?;
        Ok(wire)
    }
}

/// The caller's verified identity, from the connection the request came on: the client
/// certificate's SPIFFE ID or DNS name over mTLS, `unix:uid=N` over the Unix socket, empty
/// otherwise. Nothing in the request itself can set it.
pub(crate) fn caller_of(ext: &tonic::Extensions) -> String {
    if let Some(p) = ext.get::<crate::tls::Peer>() {
        return p.caller.as_deref().unwrap_or_default().to_string();
    }
    ext.get::<tonic::transport::server::UdsConnectInfo>()
        .and_then(|u| u.peer_cred)
        .map(|c| format!("unix:uid={}", c.uid()))
        .unwrap_or_default()
}

type ChunkStream =
    Pin<Box<dyn Stream<Item = Result<proto::StreamLlmChunksResponse, Status>> + Send>>;

#[tonic::async_trait]
impl GuardService for Guard {
    async fn tool_call_start(
        &self,
        req: Request<proto::ToolCallStartRequest>,
    ) -> Result<Response<proto::ToolCallStartResponse>, Status> {
        let decision = self.decide(req, convert::tool_call_start).await?;
        Ok(Response::new(proto::ToolCallStartResponse {
            decision: Some(decision),
        }))
    }

    async fn tool_call_result(
        &self,
        req: Request<proto::ToolCallResultRequest>,
    ) -> Result<Response<proto::ToolCallResultResponse>, Status> {
        let decision = self.decide(req, convert::tool_call_result).await?;
        Ok(Response::new(proto::ToolCallResultResponse {
            decision: Some(decision),
        }))
    }

    async fn llm_before(
        &self,
        req: Request<proto::LlmBeforeRequest>,
    ) -> Result<Response<proto::LlmBeforeResponse>, Status> {
        let decision = self.decide(req, convert::llm_before).await?;
        Ok(Response::new(proto::LlmBeforeResponse {
            decision: Some(decision),
        }))
    }

    type StreamLlmChunksStream = ChunkStream;
    type WatchFindingsStream =
        Pin<Box<dyn Stream<Item = Result<proto::WatchFindingsResponse, Status>> + Send>>;

    async fn stream_llm_chunks(
        &self,
        req: Request<Streaming<proto::StreamLlmChunksRequest>>,
    ) -> Result<Response<Self::StreamLlmChunksStream>, Status> {
        // One policy version for the whole stream, like any other call.
        let mut chunks = self.gate.stream(
            self.store.load(),
            trace::parent_from_metadata(req.metadata()),
        );
        let who = caller_of(req.extensions());
        let mut inbound = req.into_inner();
        let store = self.store.clone();
        let out = async_stream(move |tx| async move {
            let limit = chunks.policy().max_message_bytes;
            loop {
                let msg = match inbound.next().await {
                    None => break,
                    Some(Ok(m)) => m,
                    Some(Err(s)) => {
                        let err = if s.code() == tonic::Code::OutOfRange {
                            Status::from(ApiError::TooLarge { size: 0, limit })
                        } else {
                            s
                        };
                        let _ = tx.send(Err(err)).await;
                        return;
                    }
                };
                if let Err(e) = convert::check_size(&msg, limit) {
                    let _ = tx.send(Err(Status::from(e))).await;
                    return;
                }
                let start = Instant::now();
                if !chunks.is_open() {
                    let ctx = convert::context(msg.context.clone()).and_then(|mut ctx| {
                        ctx.caller.clone_from(&who);
                        crate::engine::gate::admit(chunks.policy(), &who)
                            .map_err(ApiError::from)?;
                        Ok(ctx)
                    });
                    match ctx {
                        Ok(ctx) => {
                            let policy = store.for_tenant(&ctx.tenant, chunks.policy().clone());
                            chunks.open(ctx, policy).await
                        }
                        Err(e) => {
                            let _ = tx.send(Err(Status::from(e))).await;
                            return;
                        }
                    }
                }
                let Some(a) = chunks.push(&msg.chunk, msg.r#final, start, convert::decision) else {
                    return;
                };
                let done = a.done;
                if tx.send(Ok(chunk_response(a))).await.is_err() || done {
                    return;
                }
            }
            // The client closed its side without `final`: release what is held so no text is
            // silently dropped.
            if let Some(a) = chunks.close(convert::decision) {
                let _ = tx.send(Ok(chunk_response(a))).await;
            }
        });
        Ok(Response::new(Box::pin(out)))
    }

    async fn filter_candidates(
        &self,
        req: Request<proto::FilterCandidatesRequest>,
    ) -> Result<Response<proto::FilterCandidatesResponse>, Status> {
        let start = Instant::now();
        let policy = self.store.load();
        let parent = trace::parent_from_metadata(req.metadata());
        let who = caller_of(req.extensions());
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let mut events = convert::candidates(msg)?;
        for e in &mut events {
            e.context.caller.clone_from(&who);
        }
        let tenant = events.first().map_or("", |e| e.context.tenant.as_str());
        let policy = self.store.for_tenant(tenant, policy);
        let call = Call {
            policy,
            parent,
            start,
            size,
        };
        let set = self
            .gate
            .candidates(events, call, convert::decision)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(proto::FilterCandidatesResponse {
            decisions: set.decisions,
            allowed_indices: set.allowed,
            retry: set.retry.map(|r| proto::RetrySpec {
                corrective_message: r.corrective_message,
                attempt: r.attempt,
                max_attempts: r.max_attempts,
            }),
            escalation: set
                .escalation
                .map(|a| convert::action(a) as i32)
                .unwrap_or_default(),
        }))
    }

    async fn resolve_pause(
        &self,
        req: Request<proto::ResolvePauseRequest>,
    ) -> Result<Response<proto::ResolvePauseResponse>, Status> {
        let who = match self.access(&req, "resolving a pause")? {
            Access::Approver(who) => who,
            Access::Caller(who) => {
                return Err(ApiError::PermissionDenied(format!(
                    "`{who}` is not an approver: resolving a pause needs an identity in the \
                     pack's approvers, or the approver token in `{APPROVER_TOKEN_HEADER}`"
                ))
                .into());
            }
        };
        let r = req.into_inner();
        if r.pause_id.trim().is_empty() {
            return Err(ApiError::invalid("pause_id", "must not be empty").into());
        }
        if r.approver.trim().is_empty() {
            return Err(ApiError::invalid("approver", "must name who decided").into());
        }
        let approve = match proto::Resolution::try_from(r.resolution) {
            Ok(proto::Resolution::Approve) => true,
            Ok(proto::Resolution::Deny) => false,
            _ => {
                return Err(ApiError::invalid(
                    "resolution",
                    "must be RESOLUTION_APPROVE or RESOLUTION_DENY",
                )
                .into());
            }
        };
        // The agent whose call paused can never approve it, token or not: the pause is
        // there to put a human between the agent and the action.
        if approve && !who.is_empty() {
            let made_by = self
                .gate
                .pause(&r.pause_id)
                .await
                .map_err(ApiError::from)?
                .map(|p| p.caller);
            if made_by.as_deref() == Some(who.as_str()) {
                return Err(ApiError::PermissionDenied(format!(
                    "`{who}` made this pause: a caller cannot approve its own pause"
                ))
                .into());
            }
        }
        // A verified identity is recorded beside the name the approver gave.
        let approver = match who.as_str() {
            "" => r.approver.trim().to_string(),
            id => format!("{} ({id})", r.approver.trim()),
        };
        let p = self
            .gate
            .resolve_pause(&r.pause_id, approve, &approver, r.note.trim())
            .await
            .map_err(ApiError::from)?;
        tracing::info!(
            pause_id = %p.id,
            session = %p.session_id,
            approve,
            approver = %p.approver,
            "pause resolved"
        );
        let state = p.state();
        Ok(Response::new(proto::ResolvePauseResponse {
            pause: Some(convert::pause(&p, state)),
        }))
    }

    async fn list_pauses(
        &self,
        req: Request<proto::ListPausesRequest>,
    ) -> Result<Response<proto::ListPausesResponse>, Status> {
        let access = self.access(&req, "listing pauses")?;
        let r = req.into_inner();
        let session = (!r.session_id.is_empty()).then_some(r.session_id.as_str());
        let pauses = self
            .gate
            .list_pauses(session)
            .await
            .map_err(ApiError::from)?
            .iter()
            .filter(|(p, _)| match &access {
                Access::Approver(_) => true,
                Access::Caller(who) => p.caller == *who,
            })
            .map(|(p, state)| convert::pause(p, *state))
            .collect();
        Ok(Response::new(proto::ListPausesResponse { pauses }))
    }

    async fn get_session(
        &self,
        req: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        let access = self.access(&req, "reading a session")?;
        let r = req.into_inner();
        if r.session_id.is_empty() {
            return Err(ApiError::invalid("session_id", "must not be empty").into());
        }
        if let Access::Caller(who) = &access
            && !self.gate.sessions().opened_by(&r.session_id, who)
        {
            return Err(ApiError::PermissionDenied(format!(
                "`{who}` did not open this session and is not an approver"
            ))
            .into());
        }
        let s = self
            .gate
            .session(&r.session_id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound("no session with that id".into()))?;
        let pauses = self
            .gate
            .list_pauses(Some(&r.session_id))
            .await
            .map_err(ApiError::from)?
            .iter()
            .map(|(p, state)| convert::pause(p, *state))
            .collect();
        let limit = self.store.load().sessions.strike_limit;
        Ok(Response::new(proto::GetSessionResponse {
            session: Some(convert::session(&s, limit, pauses)),
        }))
    }

    async fn watch_findings(
        &self,
        req: Request<proto::WatchFindingsRequest>,
    ) -> Result<Response<Self::WatchFindingsStream>, Status> {
        let access = self.access(&req, "watching findings")?;
        let session = req.into_inner().session_id;
        let sessions = self.gate.sessions().clone();
        let mut rx = sessions.subscribe();
        let mut stop = self.shutdown.clone();
        let out = async_stream(move |tx| async move {
            loop {
                let stopping = async {
                    let _ = stop.wait_for(|s| *s).await;
                };
                let next = tokio::select! {
                    next = rx.recv() => Some(next),
                    _ = stopping => None,
                    // The watcher went away: end now, not at the next matching finding.
                    _ = tx.closed() => return,
                };
                let Some(next) = next else {
                    let _ = tx.send(Err(ApiError::ShuttingDown.into())).await;
                    return;
                };
                let f = match next {
                    Ok(f) => f,
                    Err(broadcast::error::RecvError::Closed) => return,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        // Nothing is lost silently: the watcher is told, and the findings
                        // stay on their sessions.
                        let _ = tx.send(Err(ApiError::Lagged(n).into())).await;
                        return;
                    }
                };
                if !session.is_empty() && f.session_id != session {
                    continue;
                }
                if let Access::Caller(who) = &access
                    && !sessions.opened_by(&f.session_id, who)
                {
                    continue;
                }
                let resp = proto::WatchFindingsResponse {
                    finding: Some(convert::finding(&f)),
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(out)))
    }
}

fn chunk_response(a: ChunkAnswer<proto::Decision>) -> proto::StreamLlmChunksResponse {
    proto::StreamLlmChunksResponse {
        decision: Some(a.decision),
        released_text: a.released_text,
        held_bytes: a.held_bytes as u32,
    }
}

/// Runs `f` as a task feeding a bounded channel, and returns the receiving side as a stream.
/// The bound gives backpressure: a slow reader slows the guard, it does not grow a queue.
pub(crate) fn async_stream<T, F, Fut>(f: F) -> impl Stream<Item = Result<T, Status>> + Send
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<Result<T, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
