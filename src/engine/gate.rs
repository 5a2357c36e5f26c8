//! The front door. Every edge (the GuardService handlers, the chunk stream, the MCP proxy,
//! `check` and `test`) turns its wire format into an `Event` and a `Call`, calls one method
//! here, and turns the `Decision` back into its wire format. Tracing, deciding and recording
//! happen here, once; the edge converts and nothing else.

use std::future::Future;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::decision::{Action, Decision, RetrySpec, RuleHit};
use crate::deep::pool::PoolObserver;
use crate::engine::pipeline::{self, Options, Runtime};
use crate::engine::shared_stage;
use crate::event::{Context, Event};
use crate::policy::Policy;
use crate::session::{Pause, PauseError, SessionStore};
use crate::stream::StreamGuard;
use crate::text::lower_hex;

/// A span's W3C ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanIds {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

/// The caller's span (W3C `traceparent` and `tracestate`), when the call carried one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceParent {
    pub ids: Option<SpanIds>,
    pub state: String,
}

impl TraceParent {
    /// The caller's trace id in lowercase hex, or empty.
    pub fn trace_id_hex(&self) -> String {
        self.ids.map(|i| lower_hex(&i.trace_id)).unwrap_or_default()
    }
}

/// One call through the front door: what is not part of the event itself.
#[derive(Debug, Clone)]
pub struct Call {
    /// The policy snapshot the whole call sees, from start to end.
    pub policy: Arc<Policy>,
    pub parent: TraceParent,
    /// When the call arrived, before the edge converted it.
    pub start: Instant,
    /// The request's size on the wire; large events are scanned off the async workers.
    pub size: usize,
}

/// A decision, finished, for the recorder.
pub struct Finished {
    pub event: Event,
    pub decision: Decision,
    pub policy: Arc<Policy>,
    pub parent: TraceParent,
    /// The decision's own span, when tracing is on.
    pub span: Option<SpanIds>,
    pub start: Instant,
    pub end: Instant,
}

/// A deep-rule job, ended, under its decision's span.
pub struct DeepJob<'a> {
    pub decision_span: SpanIds,
    pub rule: &'a str,
    pub outcome: &'a str,
    pub decision_id: &'a str,
    pub queued: SystemTime,
    pub started: SystemTime,
    pub ended: SystemTime,
}

/// How the engine reports what it did. Telemetry implements it; nothing below the edges
/// knows what a span exporter or a metrics registry is.
pub trait Recorder: PoolObserver {
    /// Chooses the decision span's ids when the call starts, so the decision, its log line
    /// and its deep-rule spans can name it; `None` when tracing is off.
    fn open(&self, parent: &TraceParent) -> Option<SpanIds>;
    /// One finished decision. Must not block: the request thread calls it.
    fn decision(&self, done: Finished);
    fn deep_job(&self, job: &DeepJob<'_>);
    fn sessions(&self, active: usize, evicted: u64);
    fn pauses_pending(&self, pending: usize);
    fn deep_wait_timeout(&self);
    /// One round trip to the shared session store, answered or not.
    fn session_store(&self, ok: bool);
}

/// Records nothing: `check`, `test` and unit tests.
#[derive(Debug, Default)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    fn open(&self, _: &TraceParent) -> Option<SpanIds> {
        None
    }
    fn decision(&self, _: Finished) {}
    fn deep_job(&self, _: &DeepJob<'_>) {}
    fn sessions(&self, _: usize, _: u64) {}
    fn pauses_pending(&self, _: usize) {}
    fn deep_wait_timeout(&self) {}
    fn session_store(&self, _: bool) {}
}

impl PoolObserver for NoRecorder {
    fn queue_depth(&self, _: i64) {}
    fn job(&self, _: &str, _: &str) {}
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The decision task ended without an answer (a panic in a rule).
    #[error("the decision task failed: {0}")]
    Failed(String),
    #[error(transparent)]
    Pause(PauseError),
    /// The shared session store did not answer.
    #[error("{0}")]
    Store(String),
    /// The pack refuses this caller (`callers.unknown: deny`).
    #[error("{0}")]
    Caller(String),
}

/// Refuses a caller the pack does not admit, before anything of its event is read.
pub fn admit(policy: &Policy, caller: &str) -> Result<(), GateError> {
    if policy.callers.admits(caller) {
        return Ok(());
    }
    Err(GateError::Caller(if caller.is_empty() {
        "caller: the connection proved no identity (an mTLS client certificate), and the pack \
         refuses unknown callers (callers.unknown: deny)"
            .into()
    } else {
        format!(
            "caller: `{caller}` is not among the pack's callers.known, and the pack refuses \
             unknown callers (callers.unknown: deny)"
        )
    }))
}

/// The answer for a set of candidates (FilterCandidates).
#[derive(Debug)]
pub struct Candidates<T> {
    pub decisions: Vec<T>,
    pub allowed: Vec<u32>,
    /// When every candidate was filtered: the guidance to regenerate them.
    pub retry: Option<RetrySpec>,
    /// Set once the step's attempts are spent.
    pub escalation: Option<Action>,
}

#[derive(Clone)]
pub struct Gate {
    runtime: Arc<Runtime>,
}

impl Gate {
    pub fn new(runtime: Arc<Runtime>) -> Gate {
        Gate { runtime }
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn sessions(&self) -> &Arc<SessionStore> {
        &self.runtime.sessions
    }

    /// A human's answer to a pause; the pending-pauses count is reported here, as every
    /// change to it is.
    pub async fn resolve_pause(
        &self,
        pause_id: &str,
        approve: bool,
        approver: &str,
        note: &str,
    ) -> Result<Pause, GateError> {
        let sessions = &self.runtime.sessions;
        if let Some(sh) = sessions.shared() {
            match sh.resolve(pause_id, approve, approver, note).await {
                Ok(Ok(p)) => {
                    if let Ok(n) = sh.pending_pauses().await {
                        self.runtime.recorder.pauses_pending(n);
                    }
                    return Ok(p);
                }
                // A pause this replica made while the store was down lives here alone.
                Ok(Err(PauseError::NotFound(_))) => {}
                Ok(Err(e)) => return Err(GateError::Pause(e)),
                Err(e) => return Err(GateError::Store(e.to_string())),
            }
        }
        let p = sessions
            .resolve(pause_id, approve, approver, note)
            .map_err(GateError::Pause)?;
        self.runtime
            .recorder
            .pauses_pending(sessions.pending_pauses());
        Ok(p)
    }

    /// One pause by id, from the shared store when replicas share one (a pause made while
    /// it was down is found locally).
    pub async fn pause(&self, id: &str) -> Result<Option<Pause>, GateError> {
        let sessions = &self.runtime.sessions;
        if let Some(sh) = sessions.shared()
            && let Some(p) = sh
                .pause(id)
                .await
                .map_err(|e| GateError::Store(e.to_string()))?
        {
            return Ok(Some(p));
        }
        Ok(sessions.get_pause(id))
    }

    /// Pending pauses (every pause of one session with `session`), from the shared store
    /// when replicas share one.
    pub async fn list_pauses(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<(Pause, crate::session::PauseState)>, GateError> {
        let sessions = &self.runtime.sessions;
        let mut out = match sessions.shared() {
            Some(sh) => sh
                .list_pauses(session)
                .await
                .map_err(|e| GateError::Store(e.to_string()))?,
            None => Vec::new(),
        };
        // Local pauses: all of them in memory mode; with a shared store, only those made
        // while it was down (the others are there already).
        for lp in sessions.list_pauses(session) {
            if !out.iter().any(|(p, _)| p.id == lp.0.id) {
                out.push(lp);
            }
        }
        Ok(out)
    }

    /// Where a pause stands now, wherever it was resolved: from the shared store when
    /// replicas share one (a pause made while it was down is found locally). `None` when
    /// no such pause exists (it was swept, or never was).
    pub async fn pause_state(
        &self,
        pause_id: &str,
        session: &str,
    ) -> Result<Option<crate::session::PauseState>, GateError> {
        let sessions = &self.runtime.sessions;
        if let Some(sh) = sessions.shared() {
            let found = sh
                .list_pauses(Some(session))
                .await
                .map_err(|e| GateError::Store(e.to_string()))?
                .into_iter()
                .find(|(p, _)| p.id == pause_id);
            if let Some((_, state)) = found {
                return Ok(Some(state));
            }
        }
        Ok(sessions.get_pause(pause_id).map(|p| p.state()))
    }

    /// A session's state, from the shared store when replicas share one.
    pub async fn session(&self, id: &str) -> Result<Option<crate::session::Session>, GateError> {
        let sessions = &self.runtime.sessions;
        match sessions.shared() {
            Some(sh) => Ok(sh
                .session(id)
                .await
                .map_err(|e| GateError::Store(e.to_string()))?
                .map(|s| crate::session::Session::from_shared(id, s))),
            None => Ok(sessions.get(id)),
        }
    }

    /// Decides one event: traces, decides and records it. `view` sees the finished decision
    /// before it is recorded (the edge builds its answer there, so nothing is copied).
    /// Returns the view and the decision's span (a proxy parents its upstream span on it).
    pub async fn decide<T, V>(
        &self,
        event: Event,
        call: Call,
        view: V,
    ) -> Result<(T, Option<SpanIds>), GateError>
    where
        T: Send + 'static,
        V: FnOnce(&Decision) -> T + Send + 'static,
    {
        admit(&call.policy, &event.context.caller)?;
        let gate = self.clone();
        let mut decision = Box::pin(async move {
            let rt = &gate.runtime;
            let span = rt.recorder.open(&call.parent);
            let meta = pipeline::meta(&call.parent, span);
            let shared = match rt.sessions.shared() {
                Some(sh) => shared_stage::pull(sh, rt, &event, &call.policy, true).await,
                None => None,
            };
            let opts = Options {
                shared: shared.clone(),
                ..Options::default()
            };
            let (event, mut d) =
                pipeline::decide(event, &call.policy, rt, &meta, call.size, opts).await;
            if let (Some(sh), Some(pulled)) = (rt.sessions.shared(), &shared) {
                shared_stage::commit(sh, rt, &event, &call.policy, pulled, &mut d).await;
            }
            (gate.finish(event, d, call, span, view), span)
        });
        // Most decisions wait for nothing (no deep rule to await, a small scan): polled once
        // here they are made on the caller's task, with no await a departing caller could
        // cut short and no task to hop to. One that waits continues in a task of its own,
        // so a caller that goes away cannot make the decision, its span or its log line
        // vanish. The first poll's waker is a no-op: the task's first poll registers its
        // own, and anything that finished in between is seen then. A panic in a rule fails
        // this call alone, as it would in a task of its own, instead of the connection.
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            decision.as_mut().poll(&mut cx)
        }));
        match first {
            Ok(std::task::Poll::Ready(out)) => return Ok(out),
            Ok(std::task::Poll::Pending) => {}
            Err(_) => return Err(GateError::Failed("a rule panicked".into())),
        }
        tokio::spawn(decision)
            .await
            .map_err(|e| GateError::Failed(join_failure(&e)))
    }

    /// Decides every candidate of one regeneration, then, when all are filtered, the
    /// guidance to regenerate them, counted against the step's attempts like any RETRY.
    pub async fn candidates<T, V>(
        &self,
        events: Vec<Event>,
        call: Call,
        view: V,
    ) -> Result<Candidates<T>, GateError>
    where
        T: Send + 'static,
        V: Fn(&Decision) -> T + Send + Sync + 'static,
    {
        for e in &events {
            admit(&call.policy, &e.context.caller)?;
        }
        let gate = self.clone();
        // One task for the whole set, for the same reason as `decide`.
        tokio::spawn(async move { gate.candidates_inner(events, call, view).await })
            .await
            .map_err(|e| GateError::Failed(join_failure(&e)))
    }

    async fn candidates_inner<T>(
        &self,
        events: Vec<Event>,
        call: Call,
        view: impl Fn(&Decision) -> T,
    ) -> Candidates<T> {
        let rt = &self.runtime;
        let sid = events
            .first()
            .map(|e| e.context.session_id.clone())
            .unwrap_or_default();
        // Shared sessions: the set reads the session once (its late findings included) and
        // takes no rate-limit token, like the local path.
        let shared = match (rt.sessions.shared(), events.first()) {
            (Some(sh), Some(first)) => shared_stage::pull(sh, rt, first, &call.policy, false).await,
            _ => None,
        };
        let opts = Options {
            candidate_of: Some(Arc::new(rt.sessions.take_late_findings(&sid))),
            shared: shared.clone(),
        };
        let mut out = Candidates {
            decisions: Vec::with_capacity(events.len()),
            allowed: Vec::new(),
            retry: None,
            escalation: None,
        };
        let mut first_filtered: Option<(Event, Decision)> = None;
        let (mut strikes, mut flag) = (0, false);
        for (i, event) in events.into_iter().enumerate() {
            let span = rt.recorder.open(&call.parent);
            let meta = pipeline::meta(&call.parent, span);
            let (event, d) =
                pipeline::decide(event, &call.policy, rt, &meta, call.size, opts.clone()).await;
            strikes = strikes.max(d.effects.strikes);
            flag |= d.effects.flag_trajectory;
            if matches!(d.action, Action::Allow | Action::Redact) {
                out.allowed.push(i as u32);
            } else if first_filtered.is_none() {
                first_filtered = Some((event.clone(), d.clone()));
            }
            out.decisions
                .push(self.finish(event, d, call.clone(), span, &view));
        }
        // One set, one regeneration: its strikes count once, like its retry attempt.
        if !sid.is_empty() {
            rt.sessions.apply_effects(&sid, strikes, flag, false);
            if let (Some(sh), Some(pulled)) = (rt.sessions.shared(), &shared) {
                shared_stage::commit_session(sh, rt, &sid, &call.policy, pulled).await;
            }
        }
        if out.allowed.is_empty()
            && let Some((event, d)) = first_filtered
        {
            let (retry, escalation) = pipeline::regenerate(&event, &d, &call.policy, rt);
            out.retry = Some(retry);
            out.escalation = escalation;
        }
        out
    }

    /// Judges an event with the fast rules alone (no session, no deep rules, no effects),
    /// with `extra` among its hits; for checks that are not an agent's step, such as a tool
    /// definition an MCP server lists. Nothing is recorded until `record`.
    pub fn evaluate(
        &self,
        event: &Event,
        call: &Call,
        extra: Option<RuleHit>,
    ) -> (Decision, Option<SpanIds>) {
        let span = self.runtime.recorder.open(&call.parent);
        let meta = pipeline::meta(&call.parent, span);
        (
            crate::engine::evaluate_with(event, &call.policy, &meta, extra),
            span,
        )
    }

    /// Records a decision `evaluate` made: its span, metric and log line.
    pub fn record(&self, event: Event, d: Decision, call: Call, span: Option<SpanIds>) {
        self.finish(event, d, call, span, |_| ());
    }

    /// Opens a guarded chunk stream on one policy snapshot.
    pub fn stream(&self, policy: Arc<Policy>, parent: TraceParent) -> ChunkStream {
        ChunkStream {
            gate: self.clone(),
            policy,
            parent,
            guard: None,
            struck_out: None,
        }
    }

    /// Fills the trace id and the caller, lets the edge build its answer, and records the decision.
    fn finish<T>(
        &self,
        event: Event,
        mut d: Decision,
        call: Call,
        span: Option<SpanIds>,
        view: impl FnOnce(&Decision) -> T,
    ) -> T {
        if let Some(ids) = &span
            && d.trace_id.is_empty()
        {
            d.trace_id = lower_hex(&ids.trace_id);
        }
        d.caller.clone_from(&event.context.caller);
        let out = view(&d);
        // One clock read ends the call, answer built, for the span and the duration metric.
        let end = Instant::now();
        self.runtime.recorder.decision(Finished {
            event,
            decision: d,
            policy: call.policy,
            parent: call.parent,
            span,
            start: call.start,
            end,
        });
        out
    }
}

fn join_failure(e: &tokio::task::JoinError) -> String {
    // The panic's payload is not quoted: it may quote the text being judged.
    if e.is_panic() {
        "a rule panicked".into()
    } else {
        "the task was cancelled".into()
    }
}

/// A guarded stream of model output chunks: the hold-back window, the session's strike
/// limit and each chunk's effects live here, so the edge only converts.
pub struct ChunkStream {
    gate: Gate,
    policy: Arc<Policy>,
    parent: TraceParent,
    guard: Option<StreamGuard>,
    /// Set when the stream's session had reached its strike limit when it opened: the first
    /// chunk is answered with a STOP and nothing is released.
    struck_out: Option<RuleHit>,
}

/// What one chunk produced.
#[derive(Debug)]
pub struct ChunkAnswer<T> {
    pub decision: T,
    /// The text that is safe to forward now.
    pub released_text: String,
    pub held_bytes: usize,
    /// Nothing more will be released: the stream was stopped or this was the final chunk.
    pub done: bool,
}

impl ChunkStream {
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    pub fn is_open(&self) -> bool {
        self.guard.is_some()
    }

    /// Opens the stream with the first message's context, on the policy for its tenant.
    /// With shared sessions the session is read from the shared store first, so a session
    /// struck out on another replica is stopped here too.
    pub async fn open(&mut self, context: Context, policy: Arc<Policy>) {
        self.open_guard(StreamGuard::new(context.clone()), context, policy)
            .await;
    }

    /// Opens the stream for a tool's streamed output: each chunk is judged as a
    /// `tool_call_result` of `tool_name`.
    pub async fn open_result(&mut self, context: Context, policy: Arc<Policy>, tool_name: String) {
        self.open_guard(
            StreamGuard::tool_result(context.clone(), tool_name),
            context,
            policy,
        )
        .await;
    }

    async fn open_guard(&mut self, guard: StreamGuard, context: Context, policy: Arc<Policy>) {
        self.policy = policy;
        let rt = &self.gate.runtime;
        if let Some(sh) = rt.sessions.shared()
            && !context.session_id.is_empty()
        {
            let probe = Event::new(crate::event::EventKind::LlmStreamChunk, context.clone());
            let _ = shared_stage::pull(sh, rt, &probe, &self.policy, false).await;
        }
        let sessions = self.gate.sessions();
        if !context.session_id.is_empty() {
            let snap = sessions.touch(&context.session_id, &context.caller, &self.policy.sessions);
            self.struck_out = pipeline::strike_hit(&self.policy, snap.strikes);
        }
        self.guard = Some(guard);
    }

    /// Judges one chunk (with the text held back from earlier ones) and records it.
    /// `final_chunk` releases everything still held.
    pub fn push<T>(
        &mut self,
        chunk: &str,
        final_chunk: bool,
        start: Instant,
        view: impl FnOnce(&Decision) -> T,
    ) -> Option<ChunkAnswer<T>> {
        let guard = self.guard.as_mut()?;
        let span = self.gate.runtime.recorder.open(&self.parent);
        let meta = pipeline::meta(&self.parent, span);
        // A session at its strike limit: the hit settles with the chunk's own, and its STOP
        // releases nothing.
        let struck = self.struck_out.take();
        let step = guard.push(chunk, final_chunk, &self.policy, &meta, struck);
        let released = guard.released_event(&step);
        // A chunk's effects count for its session like any event's.
        let sid = &released.context.session_id;
        if !sid.is_empty() {
            let e = step.decision.effects;
            self.gate
                .sessions()
                .apply_effects(sid, e.strikes, e.flag_trajectory, false);
            if let Some(sh) = self.gate.sessions().shared() {
                shared_stage::commit_effects(
                    sh,
                    &self.gate.runtime,
                    sid,
                    &self.policy,
                    e.strikes,
                    e.flag_trajectory,
                );
            }
        }
        let done = guard.is_stopped() || final_chunk;
        let call = Call {
            policy: self.policy.clone(),
            parent: self.parent.clone(),
            start,
            size: chunk.len(),
        };
        let decision = self.gate.finish(released, step.decision, call, span, view);
        Some(ChunkAnswer {
            decision,
            released_text: step.released_text,
            held_bytes: step.held_bytes,
            done,
        })
    }

    /// The client closed its side without `final`: what is held is released (judged), so no
    /// text is silently dropped. `None` when there is nothing to release.
    pub fn close<T>(&mut self, view: impl FnOnce(&Decision) -> T) -> Option<ChunkAnswer<T>> {
        if self.guard.as_ref().is_none_or(|g| g.is_stopped()) {
            return None;
        }
        self.push("", true, Instant::now(), view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_decision_does_not_quote_its_panic() {
        let secret = "AKIAIOSFODNN7EXAMPLE";
        let e = tokio::spawn(async move { panic!("byte index 3 is out of bounds of `{secret}`") })
            .await
            .unwrap_err();
        assert!(e.to_string().contains(secret), "tokio quotes the panic");
        let msg = GateError::Failed(join_failure(&e)).to_string();
        assert_eq!(msg, "the decision task failed: a rule panicked");
    }

    /// A local rule that panics when it answers inline.
    #[derive(Debug)]
    struct Explodes;

    #[async_trait::async_trait]
    impl crate::deep::DeepRule for Explodes {
        fn id(&self) -> &str {
            "explodes"
        }
        fn budget(&self) -> std::time::Duration {
            std::time::Duration::from_secs(1)
        }
        async fn check(
            &self,
            _: Arc<crate::deep::DeepInput>,
        ) -> Result<crate::deep::Verdict, crate::deep::DeepError> {
            panic!("not pooled")
        }
        fn check_inline(
            &self,
            _: &crate::deep::DeepInput,
        ) -> Option<Result<crate::deep::Verdict, crate::deep::DeepError>> {
            panic!("exploded inline")
        }
    }

    #[tokio::test]
    async fn a_panic_on_the_callers_task_fails_that_call_alone() {
        let mut policy = crate::policy::default_policy(None).unwrap();
        policy.deep = vec![crate::deep::DeepRuleSpec {
            id: "explodes".into(),
            rule: Arc::new(Explodes),
            events: crate::event::EventKind::ToolCallResult.bit(),
            tools: vec![],
            callers: vec![],
            block_threshold: 0.8,
            warn_threshold: 0.5,
            action: Action::Retry,
            jailbreak: false,
            local: true,
        }];
        let policy = Arc::new(policy);
        let gate = Gate::new(Arc::new(Runtime::start(&policy, None, false)));
        let call = || Call {
            policy: policy.clone(),
            parent: TraceParent::default(),
            start: Instant::now(),
            size: 0,
        };
        let mut e = Event::new(crate::event::EventKind::ToolCallResult, Context::default());
        e.tool_name = "http.get".into();
        e.output = "some output".into();
        let err = gate.decide(e, call(), |d| d.action).await.unwrap_err();
        assert_eq!(err.to_string(), "the decision task failed: a rule panicked");
        // The gate still serves.
        let mut ok = Event::new(crate::event::EventKind::ToolCallStart, Context::default());
        ok.tool_name = "fs.list".into();
        let (action, _) = gate.decide(ok, call(), |d| d.action).await.unwrap();
        assert_eq!(action, Action::Allow);
    }
}
