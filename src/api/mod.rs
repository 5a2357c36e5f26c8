//! tonic service implementations: validate the request into an `Event` at the edge, evaluate
//! it on the current policy snapshot, and answer with the Decision.

pub mod convert;
pub mod shed;
pub mod status;

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::engine::{CallMeta, evaluate};
use crate::policy::store::PolicyStore;
use crate::proto;
use crate::proto::guard_service_server::GuardService;
use crate::stream::StreamGuard;
use crate::telemetry::{CallStart, Telemetry, trace};
use status::ApiError;

/// Requests above this size are evaluated on the blocking pool, so a long scan never stalls
/// the async workers that serve other calls.
const BLOCKING_BYTES: usize = 64 * 1024;

/// Evaluates, traces, converts and records in one synchronous step: once a decision exists
/// its span, metrics and log line follow without an await, so a caller that cancels cannot
/// make it vanish.
fn decide_and_record(
    telemetry: &Telemetry,
    event: crate::event::Event,
    policy: &Arc<crate::policy::Policy>,
    meta: &CallMeta,
    start: CallStart,
    parent: &opentelemetry::Context,
) -> proto::Decision {
    let mut d = evaluate(&event, policy, meta);
    let span_id = telemetry.trace(&event, &mut d, policy, start, parent);
    let wire = convert::decision(&d);
    telemetry.record(event, d, policy, start, span_id);
    wire
}

#[derive(Clone)]
pub struct Guard {
    store: Arc<PolicyStore>,
    telemetry: Arc<Telemetry>,
}

impl Guard {
    pub fn new(store: Arc<PolicyStore>, telemetry: Arc<Telemetry>) -> Guard {
        Guard { store, telemetry }
    }

    async fn decide(
        &self,
        event: crate::event::Event,
        policy: Arc<crate::policy::Policy>,
        meta: CallMeta,
        start: CallStart,
        parent: opentelemetry::Context,
        size: usize,
    ) -> Result<proto::Decision, Status> {
        if size <= BLOCKING_BYTES {
            return Ok(decide_and_record(
                &self.telemetry,
                event,
                &policy,
                &meta,
                start,
                &parent,
            ));
        }
        let telemetry = self.telemetry.clone();
        tokio::task::spawn_blocking(move || {
            decide_and_record(&telemetry, event, &policy, &meta, start, &parent)
        })
        .await
        .map_err(|e| Status::from(ApiError::Internal(format!("evaluation task failed: {e}"))))
    }
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
        let parent = trace::parent_from_metadata(req.metadata());
        let meta = CallMeta {
            trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
        };
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
        let parent = trace::parent_from_metadata(req.metadata());
        let meta = CallMeta {
            trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
        };
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
        let parent = trace::parent_from_metadata(req.metadata());
        let meta = CallMeta {
            trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
        };
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

    async fn filter_candidates(
        &self,
        _req: Request<proto::FilterCandidatesRequest>,
    ) -> Result<Response<proto::FilterCandidatesResponse>, Status> {
        Err(Status::unimplemented("being built"))
    }

    async fn resolve_pause(
        &self,
        _req: Request<proto::ResolvePauseRequest>,
    ) -> Result<Response<proto::ResolvePauseResponse>, Status> {
        Err(Status::unimplemented("being built"))
    }

    async fn list_pauses(
        &self,
        _req: Request<proto::ListPausesRequest>,
    ) -> Result<Response<proto::ListPausesResponse>, Status> {
        Err(Status::unimplemented("being built"))
    }

    async fn get_session(
        &self,
        _req: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        Err(Status::unimplemented("being built"))
    }

    async fn watch_findings(
        &self,
        _req: Request<proto::WatchFindingsRequest>,
    ) -> Result<Response<Self::WatchFindingsStream>, Status> {
        Err(Status::unimplemented("being built"))
    }

    async fn stream_llm_chunks(
        &self,
        req: Request<Streaming<proto::StreamLlmChunksRequest>>,
    ) -> Result<Response<Self::StreamLlmChunksStream>, Status> {
        // One policy version for the whole stream, like any other call.
        let policy = self.store.load();
        let parent = trace::parent_from_metadata(req.metadata());
        let meta = CallMeta {
            trace_id: trace::parent_trace_id(&parent).unwrap_or_default(),
        };
        let mut inbound = req.into_inner();
        let telemetry = self.telemetry.clone();
        let out = async_stream(move |tx| async move {
            let mut guard: Option<StreamGuard> = None;
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
                let g = guard
                    .get_or_insert_with(|| StreamGuard::new(convert::context(msg.context.clone())));
                let mut step = g.push(&msg.chunk, msg.r#final, &policy, &meta);
                let released = g.released_event(&step);
                let span_id =
                    telemetry.trace(&released, &mut step.decision, &policy, start, &parent);
                let wire = convert::decision(&step.decision);
                telemetry.record(released, step.decision, &policy, start, span_id);
                let resp = proto::StreamLlmChunksResponse {
                    decision: Some(wire),
                    released_text: step.released_text,
                    held_bytes: step.held_bytes as u32,
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return;
                }
                if g.is_stopped() || msg.r#final {
                    return;
                }
            }
            // The client closed its side without `final`: release what is held so no text is
            // silently dropped.
            if let Some(g) = guard.as_mut()
                && !g.is_stopped()
            {
                let start = CallStart::now();
                let mut step = g.push("", true, &policy, &meta);
                let released = g.released_event(&step);
                let span_id =
                    telemetry.trace(&released, &mut step.decision, &policy, start, &parent);
                let wire = convert::decision(&step.decision);
                telemetry.record(released, step.decision, &policy, start, span_id);
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
}

/// Runs `f` as a task feeding a bounded channel, and returns the receiving side as a stream.
/// The bound gives backpressure: a slow reader slows the guard, it does not grow a queue.
fn async_stream<F, Fut>(
    f: F,
) -> impl Stream<Item = Result<proto::StreamLlmChunksResponse, Status>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<proto::StreamLlmChunksResponse, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
