//! tonic service implementations: validate the request into an `Event` at the edge, evaluate
//! it on the current policy snapshot, and answer with the Decision.

pub mod convert;
pub mod shed;
pub mod status;

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{broadcast, watch};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::decision::{Action, Decision};
use crate::engine::pipeline::{self, Options, Runtime};
use crate::engine::{self, CallMeta};
use crate::event::Event;
use crate::policy::Policy;
use crate::policy::store::PolicyStore;
use crate::proto;
use crate::proto::guard_service_server::GuardService;
use crate::session::PauseError;
use crate::stream::StreamGuard;
use crate::telemetry::{CallStart, Telemetry, trace};
use status::ApiError;

#[derive(Clone)]
pub struct Guard {
    store: Arc<PolicyStore>,
    telemetry: Arc<Telemetry>,
    runtime: Arc<Runtime>,
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
        telemetry: Arc<Telemetry>,
        runtime: Arc<Runtime>,
        shutdown: watch::Receiver<bool>,
        approver_token: Option<String>,
    ) -> Guard {
        Guard {
            store,
            telemetry,
            runtime,
            shutdown,
            approver_token: approver_token.filter(|t| !t.is_empty()).map(Arc::from),
        }
    }

    /// Checks the approver token in constant time; passes when none is configured.
    fn check_approver<T>(&self, req: &Request<T>) -> Result<(), ApiError> {
        let Some(want) = &self.approver_token else {
            return Ok(());
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
        if diff == 0 {
            Ok(())
        } else {
            Err(ApiError::PermissionDenied(format!(
                "resolving a pause needs the approver token in `{APPROVER_TOKEN_HEADER}`"
            )))
        }
    }

    /// Decides, traces, converts and records in a task of its own: a caller that cancels
    /// mid-call (while deep rules are awaited) cannot make the decision, its span or its
    /// log line vanish.
    async fn decide(
        &self,
        event: Event,
        policy: Arc<Policy>,
        meta: CallMeta,
        start: CallStart,
        parent: opentelemetry::Context,
        size: usize,
    ) -> Result<proto::Decision, Status> {
        let (rt, telemetry) = (self.runtime.clone(), self.telemetry.clone());
        tokio::spawn(async move {
            // The span's ids are chosen now, so the call's deep-rule spans can be its
            // children; the span itself is built on the writer thread, off this one.
            let chosen = telemetry.tracing.choose(&parent);
            let meta = CallMeta {
                span: chosen.clone(),
                ..meta
            };
            let (event, d) =
                pipeline::decide(event, &policy, &rt, &meta, size, Options::default()).await;
            telemetry.record(event, d, &policy, start, &parent, chosen, convert::decision)
        })
        .await
        .map_err(|e| Status::from(ApiError::Internal(format!("decision task failed: {e}"))))
    }
}

fn call_meta<T>(req: &Request<T>) -> (opentelemetry::Context, CallMeta) {
    let parent = trace::parent_from_metadata(req.metadata());
    let meta = CallMeta {
        trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
        span: None,
    };
    (parent, meta)
}

type ChunkStream =
    Pin<Box<dyn Stream<Item = Result<proto::StreamLlmChunksResponse, Status>> + Send>>;

#[tonic::async_trait]
impl GuardService for Guard {
    async fn tool_call_start(
        &self,
        req: Request<proto::ToolCallStartRequest>,
    ) -> Result<Response<proto::ToolCallStartResponse>, Status> {
        let start = CallStart::now();
        let policy = self.store.load();
        let (parent, meta) = call_meta(&req);
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let event = convert::tool_call_start(msg)?;
        let wire = self
            .decide(event, policy, meta, start, parent, size)
            .await?;
        Ok(Response::new(proto::ToolCallStartResponse {
            decision: Some(wire),
        }))
    }

    async fn tool_call_result(
        &self,
        req: Request<proto::ToolCallResultRequest>,
    ) -> Result<Response<proto::ToolCallResultResponse>, Status> {
        let start = CallStart::now();
        let policy = self.store.load();
        let (parent, meta) = call_meta(&req);
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let event = convert::tool_call_result(msg)?;
        let wire = self
            .decide(event, policy, meta, start, parent, size)
            .await?;
        Ok(Response::new(proto::ToolCallResultResponse {
            decision: Some(wire),
        }))
    }

    async fn llm_before(
        &self,
        req: Request<proto::LlmBeforeRequest>,
    ) -> Result<Response<proto::LlmBeforeResponse>, Status> {
        let start = CallStart::now();
        let policy = self.store.load();
        let (parent, meta) = call_meta(&req);
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let event = convert::llm_before(msg)?;
        let wire = self
            .decide(event, policy, meta, start, parent, size)
            .await?;
        Ok(Response::new(proto::LlmBeforeResponse {
            decision: Some(wire),
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
        let policy = self.store.load();
        let (parent, meta) = call_meta(&req);
        let mut inbound = req.into_inner();
        let telemetry = self.telemetry.clone();
        let sessions = self.runtime.sessions.clone();
        let out = async_stream(move |tx| async move {
            let mut guard: Option<StreamGuard> = None;
            // Set when the stream's session has reached its strike limit: the first chunk
            // is answered with a STOP and nothing is released.
            let mut struck_out = None;
            // Each chunk's decision is recorded like a unary call's, span ids chosen now.
            let record_chunk = |released, decision, start| {
                let chosen = telemetry.tracing.choose(&parent);
                telemetry.record(
                    released,
                    decision,
                    &policy,
                    start,
                    &parent,
                    chosen,
                    convert::decision,
                )
            };
            loop {
                let msg = match inbound.next().await {
                    None => break,
                    Some(Ok(m)) => m,
                    Some(Err(s)) => {
                        let err = if s.code() == tonic::Code::OutOfRange {
                            Status::from(ApiError::TooLarge {
                                size: 0,
                                limit: policy.max_message_bytes,
                            })
                        } else {
                            s
                        };
                        let _ = tx.send(Err(err)).await;
                        return;
                    }
                };
                if let Err(e) = convert::check_size(&msg, policy.max_message_bytes) {
                    let _ = tx.send(Err(Status::from(e))).await;
                    return;
                }
                let start = CallStart::now();
                if guard.is_none() {
                    match convert::context(msg.context.clone()) {
                        Ok(ctx) => {
                            if !ctx.session_id.is_empty() {
                                let snap = sessions.touch(&ctx.session_id, &policy.sessions);
                                struck_out = pipeline::strike_hit(&policy, snap.strikes);
                            }
                            guard = Some(StreamGuard::new(ctx));
                        }
                        Err(e) => {
                            let _ = tx.send(Err(Status::from(e))).await;
                            return;
                        }
                    }
                }
                let Some(g) = guard.as_mut() else {
                    return;
                };
                let mut step = g.push(&msg.chunk, msg.r#final, &policy, &meta);
                let released = g.released_event(&step);
                let stop_now = struck_out.take().map(|hit| {
                    step.decision.hits.push(hit);
                    engine::settle(&mut step.decision, &released, &policy, 1);
                    step.released_text.clear();
                });
                // A chunk's effects count for its session like any event's.
                let sid = &released.context.session_id;
                if !sid.is_empty() {
                    let e = step.decision.effects;
                    sessions.apply_effects(sid, e.strikes, e.flag_trajectory, false);
                }
                let wire = record_chunk(released, step.decision, start);
                let resp = proto::StreamLlmChunksResponse {
                    decision: Some(wire),
                    released_text: step.released_text,
                    held_bytes: if stop_now.is_some() {
                        0
                    } else {
                        step.held_bytes as u32
                    },
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return;
                }
                if stop_now.is_some() || g.is_stopped() || msg.r#final {
                    return;
                }
            }
            // The client closed its side without `final`: release what is held so no text is
            // silently dropped.
            if let Some(g) = guard.as_mut()
                && !g.is_stopped()
            {
                let start = CallStart::now();
                let step = g.push("", true, &policy, &meta);
                let released = g.released_event(&step);
                let wire = record_chunk(released, step.decision, start);
                let _ = tx
                    .send(Ok(proto::StreamLlmChunksResponse {
                        decision: Some(wire),
                        released_text: step.released_text,
                        held_bytes: 0,
                    }))
                    .await;
            }
        });
        Ok(Response::new(Box::pin(out)))
    }

    async fn filter_candidates(
        &self,
        req: Request<proto::FilterCandidatesRequest>,
    ) -> Result<Response<proto::FilterCandidatesResponse>, Status> {
        let start = CallStart::now();
        let policy = self.store.load();
        let (parent, meta) = call_meta(&req);
        let msg = req.into_inner();
        let size = convert::check_size(&msg, policy.max_message_bytes)?;
        let events = convert::candidates(msg)?;
        let (rt, telemetry) = (self.runtime.clone(), self.telemetry.clone());
        // One task for the whole set, for the same reason as `decide`.
        let resp = tokio::spawn(async move {
            filter_candidates(
                events, &policy, &rt, &telemetry, &meta, size, start, &parent,
            )
            .await
        })
        .await
        .map_err(|e| Status::from(ApiError::Internal(format!("decision task failed: {e}"))))?;
        Ok(Response::new(resp))
    }

    async fn resolve_pause(
        &self,
        req: Request<proto::ResolvePauseRequest>,
    ) -> Result<Response<proto::ResolvePauseResponse>, Status> {
        self.check_approver(&req)?;
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
        let sessions = &self.runtime.sessions;
        let p = sessions
            .resolve(&r.pause_id, approve, r.approver.trim(), r.note.trim())
            .map_err(|e| match e {
                PauseError::NotFound(_) => ApiError::NotFound(e.to_string()),
                PauseError::AlreadyResolved { .. } => ApiError::Conflict(e.to_string()),
            })?;
        self.telemetry
            .metrics
            .set_pauses_pending(sessions.pending_pauses() as i64);
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
        let r = req.into_inner();
        let session = (!r.session_id.is_empty()).then_some(r.session_id.as_str());
        let pauses = self
            .runtime
            .sessions
            .list_pauses(session)
            .iter()
            .map(|(p, state)| convert::pause(p, *state))
            .collect();
        Ok(Response::new(proto::ListPausesResponse { pauses }))
    }

    async fn get_session(
        &self,
        req: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        let r = req.into_inner();
        if r.session_id.is_empty() {
            return Err(ApiError::invalid("session_id", "must not be empty").into());
        }
        let sessions = &self.runtime.sessions;
        let s = sessions
            .get(&r.session_id)
            .ok_or_else(|| ApiError::NotFound("no session with that id".into()))?;
        let pauses = sessions
            .list_pauses(Some(&r.session_id))
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
        let session = req.into_inner().session_id;
        let mut rx = self.runtime.sessions.subscribe();
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

/// Decides every candidate, then, when all are filtered, the guidance to regenerate them,
/// counted against the step's attempts like any RETRY.
#[allow(clippy::too_many_arguments)]
async fn filter_candidates(
    events: Vec<Event>,
    policy: &Arc<Policy>,
    rt: &Runtime,
    telemetry: &Telemetry,
    meta: &CallMeta,
    size: usize,
    start: CallStart,
    parent: &opentelemetry::Context,
) -> proto::FilterCandidatesResponse {
    let sid = events
        .first()
        .map(|e| e.context.session_id.clone())
        .unwrap_or_default();
    let opts = Options {
        candidate_of: Some(Arc::new(rt.sessions.take_late_findings(&sid))),
    };
    let mut resp = proto::FilterCandidatesResponse::default();
    let mut first_filtered: Option<(Event, Decision)> = None;
    let (mut strikes, mut flag) = (0, false);
    for (i, event) in events.into_iter().enumerate() {
        let chosen = telemetry.tracing.choose(parent);
        let meta = CallMeta {
            span: chosen.clone(),
            ..meta.clone()
        };
        let (event, d) = pipeline::decide(event, policy, rt, &meta, size, opts.clone()).await;
        strikes = strikes.max(d.effects.strikes);
        flag |= d.effects.flag_trajectory;
        let allowed = matches!(d.action, Action::Allow | Action::Redact);
        if allowed {
            resp.allowed_indices.push(i as u32);
        } else if first_filtered.is_none() {
            first_filtered = Some((event.clone(), d.clone()));
        }
        resp.decisions.push(telemetry.record(
            event,
            d,
            policy,
            start,
            parent,
            chosen,
            convert::decision,
        ));
    }
    // One set, one regeneration: its strikes count once, like its retry attempt.
    if !sid.is_empty() {
        rt.sessions.apply_effects(&sid, strikes, flag, false);
    }
    if resp.allowed_indices.is_empty()
        && let Some((event, d)) = first_filtered
    {
        let (retry, escalation) = pipeline::regenerate(&event, &d, policy, rt);
        resp.retry = Some(proto::RetrySpec {
            corrective_message: retry.corrective_message,
            attempt: retry.attempt,
            max_attempts: retry.max_attempts,
        });
        resp.escalation = escalation
            .map(|a| convert::action(a) as i32)
            .unwrap_or_default();
    }
    resp
}

/// Runs `f` as a task feeding a bounded channel, and returns the receiving side as a stream.
/// The bound gives backpressure: a slow reader slows the guard, it does not grow a queue.
fn async_stream<T, F, Fut>(f: F) -> impl Stream<Item = Result<T, Status>> + Send
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<Result<T, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
