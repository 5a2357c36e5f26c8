//! The whole decision for one event, top to bottom: session gates → fast rules in the time
//! box → route → deep rules awaited for the tier's budget → approval → merge → retry count →
//! pause → session effects. `evaluate` is the stateless fast part; this adds what needs the
//! session store and the deep-rule pool.

use std::sync::Arc;
use std::sync::LazyLock;

use arc_swap::ArcSwap;
use std::time::{Duration, SystemTime};

use regex::Regex;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::{APPROVAL_RULE, CallMeta, evaluate, safe_goal, settle, threats_and_guidance};
use crate::decision::{Action, Decision, RiskLevel, RuleHit};
use crate::deep::pool::{DeepPool, FinishHook, JobResult, MAX_INPUT_BYTES, Submitted};
use crate::deep::{DeepError, DeepInput, DeepRuleSpec, Verdict, VerdictKind};
use crate::event::{Event, EventKind};
use crate::policy::Policy;
use crate::session::{Finding, NewPause, Redeemed, SessionStore, Snapshot};
use crate::telemetry::metrics::Metrics;
use crate::telemetry::trace::Tracing;

pub const STRIKE_LIMIT_RULE: &str = "strike_limit";
pub const APPROVED_RULE: &str = "approved";
pub const APPROVAL_DENIED_RULE: &str = "approval_denied";
pub const APPROVAL_EXPIRED_RULE: &str = "approval_expired";
pub const RETRY_EXHAUSTED_RULE: &str = "retry_exhausted";
pub const DEEP_QUEUE_FULL_RULE: &str = "deep_queue_full";
pub const DEEP_ERROR_RULE: &str = "deep_error";
pub const DEEP_TIMEOUT_RULE: &str = "deep_timeout";
pub const DEEP_WAIT_TIMEOUT_RULE: &str = "deep_wait_timeout";
/// Tags the hits that carry a late verdict on an earlier event: an approval of this call
/// never lifts them, since the human did not see them.
const LATE_FINDING_TAG: &str = "late_finding";

/// Events larger than this are scanned on the blocking pool, so a long scan never stalls the
/// async workers that serve other calls.
const BLOCKING_BYTES: usize = 64 * 1024;

/// What decisions share across calls: the session store and the deep-rule pool.
pub struct Runtime {
    pub sessions: Arc<SessionStore>,
    /// Swapped for a new pool when a reloaded policy sizes it differently; jobs already
    /// queued on the old one finish there.
    pool: ArcSwap<DeepPool>,
    pub metrics: Option<Arc<Metrics>>,
    /// Deep-rule jobs become spans under their decision's span when tracing is on.
    pub tracing: Option<Tracing>,
    /// `check` and `test`: tiers that wait, wait for the answer (up to each rule's own
    /// budget), so an offline answer does not depend on machine load.
    pub offline: bool,
}

impl Runtime {
    /// Starts the pool on the current tokio runtime, sized by `policy`.
    pub fn start(policy: &Policy, metrics: Option<Arc<Metrics>>, offline: bool) -> Runtime {
        Runtime {
            sessions: Arc::new(SessionStore::new()),
            pool: ArcSwap::new(start_pool(policy, metrics.clone())),
            metrics,
            tracing: None,
            offline,
        }
    }

    pub fn with_tracing(mut self, tracing: Tracing) -> Runtime {
        self.tracing = tracing.enabled().then_some(tracing);
        self
    }

    /// The same pool with empty session state (scenario cases stay independent).
    pub fn with_fresh_sessions(&self) -> Runtime {
        Runtime {
            sessions: Arc::new(SessionStore::new()),
            pool: ArcSwap::new(self.pool()),
            metrics: self.metrics.clone(),
            tracing: self.tracing.clone(),
            offline: self.offline,
        }
    }

    pub fn pool(&self) -> Arc<DeepPool> {
        self.pool.load_full()
    }

    /// The pool sized as `policy` says, started afresh after a reload changed the size.
    fn pool_for(&self, policy: &Policy) -> Arc<DeepPool> {
        let cur = self.pool.load_full();
        let same = cur.workers() == policy.async_cfg.workers as usize
            && cur.capacity() == policy.async_cfg.queue_capacity as usize;
        // Calls still on the previous snapshot during a reload keep the current pool, so
        // old and new snapshots do not start a pool each in turn.
        if same || policy.loaded_at <= cur.sized_for() {
            return cur;
        }
        let fresh = start_pool(policy, self.metrics.clone());
        // Two calls may race here; one pool wins and the other is dropped unused.
        self.pool.compare_and_swap(&cur, fresh);
        self.pool.load_full()
    }
}

fn start_pool(policy: &Policy, metrics: Option<Arc<Metrics>>) -> Arc<DeepPool> {
    DeepPool::start(
        policy.async_cfg.workers as usize,
        policy.async_cfg.queue_capacity as usize,
        policy.loaded_at,
        metrics,
    )
}

/// Per-call switches.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Set when deciding one of a set of candidates (FilterCandidates). The set is one
    /// regeneration, not several calls, so the caller counts the retry and applies effects
    /// once for the set, no rate-limit token is taken, and the session's late findings,
    /// taken once by the caller, apply to every candidate.
    pub candidate_of: Option<Arc<Vec<Finding>>>,
}

/// Decides one event. Returns the event too, so the caller can log and trace it.
pub async fn decide(
    event: Event,
    policy: &Arc<Policy>,
    rt: &Runtime,
    meta: &CallMeta,
    size: usize,
    opts: Options,
) -> (Event, Decision) {
    let started = Instant::now();
    let sid = event.context.session_id.clone();
    let stateful = !sid.is_empty();

    // 1. Session gate: what the session already carries.
    let snap = if stateful {
        rt.sessions.touch(&sid, &policy.sessions)
    } else {
        Snapshot::default()
    };

    // 2. Fast rules inside the time box.
    let (event, mut d) = fast(event, policy, meta, size).await;

    // 3. Session state that applies to this event: strikes, late verdicts, rate limits, and
    //    a human's answer to an earlier pause.
    session_hits(&event, policy, rt, &snap, &opts, &mut d.hits);
    let approval = redeem(&event, rt, &mut d.hits);

    // 4. Route by tier, then deep rules for as long as the tier allows.
    let (tier, forced) = route(&event, policy, &snap);
    let deep = deep_stage(&event, policy, rt, meta, &mut d, tier, forced).await;

    // 5. An approval lifts the hits that paused the call (and the approval requirement),
    //    never a STOP and never a new finding the human did not see.
    if let Some(p) = &approval {
        d.hits.retain(|h| {
            h.action == Action::Stop
                || h.policy_tags.iter().any(|t| t == LATE_FINDING_TAG)
                || (h.rule_id != APPROVAL_RULE && !p.cause.contains(&h.rule_id))
        });
        let note = if p.note.is_empty() {
            String::new()
        } else {
            format!(": {}", p.note)
        };
        d.hits.push(
            RuleHit::new(
                APPROVED_RULE,
                Action::Allow,
                RiskLevel::Low,
                format!("approved by `{}` (pause {}){note}", p.approver, p.id),
            )
            .tagged("approval"),
        );
    }

    // 6. Merge, then count a RETRY against the step's attempts; past the limit it escalates.
    settle(&mut d, &event, policy, 1);
    // An approved call is not a retry of anything: the human has answered for it.
    if opts.candidate_of.is_none()
        && approval.is_none()
        && stateful
        && would_be(&d) == Action::Retry
    {
        let attempt = rt
            .sessions
            .next_attempt(&sid, &event.context.step_id, &call_key(&event))
            .min(policy.retry.max_attempts.saturating_add(1));
        if attempt > policy.retry.max_attempts {
            d.hits.push(exhausted_hit(policy));
            settle(&mut d, &event, policy, attempt);
        } else if let Some(r) = d.retry.as_mut() {
            r.attempt = attempt;
        }
    }

    // The approval is spent only by a call that passes.
    if let Some(p) = &approval
        && !matches!(would_be(&d), Action::Allow | Action::Redact)
    {
        rt.sessions.restore_approval(&p.id);
    }

    // 7. A paused tool call waits in the store for a human; repeating it gives the same
    //    id. Other events (and shadow mode) carry no id: nothing could redeem it.
    if d.enforced
        && d.action == Action::Pause
        && event.kind == EventKind::ToolCallStart
        && opts.candidate_of.is_none()
    {
        register_pause(&event, policy, rt, &mut d);
    } else if let Some(p) = d.pause.as_mut() {
        p.pause_id.clear();
    }

    // 8. Session effects.
    if stateful && opts.candidate_of.is_none() {
        let used_high =
            event.kind == EventKind::ToolCallStart && tier.is_some_and(|t| t >= RiskLevel::High);
        rt.sessions.apply_effects(
            &sid,
            d.effects.strikes,
            d.effects.flag_trajectory || deep.flagged,
            used_high,
        );
    }
    if let Some(m) = &rt.metrics {
        m.set_sessions(rt.sessions.active() as i64, rt.sessions.evicted());
        if deep.pending > 0 && deep.waited {
            m.deep_wait_timeout();
        }
    }
    d.deep_awaited = deep.awaited;
    d.deep_pending = deep.pending;
    d.latency_us = started.elapsed().as_micros() as u64;
    (event, d)
}

/// The action the caller would get in enforce mode.
pub fn would_be(d: &Decision) -> Action {
    d.shadow_action.unwrap_or(d.action)
}

async fn fast(
    event: Event,
    policy: &Arc<Policy>,
    meta: &CallMeta,
    size: usize,
) -> (Event, Decision) {
    if size <= BLOCKING_BYTES {
        let d = evaluate(&event, policy, meta);
        return (event, d);
    }
    let (shared, owned_meta) = (policy.clone(), meta.clone());
    let event = Arc::new(event);
    let ev = event.clone();
    let done = tokio::task::spawn_blocking(move || evaluate(&ev, &shared, &owned_meta)).await;
    // The task has ended either way, so its handle on the event is gone.
    let event = Arc::try_unwrap(event).unwrap_or_else(|shared| (*shared).clone());
    match done {
        Ok(d) => (event, d),
        // Only a panic in the scan ends here; scanning inline gives the same answer or the
        // same panic, which tonic turns into an error for this call alone.
        Err(_) => {
            let d = evaluate(&event, policy, meta);
            (event, d)
        }
    }
}

fn session_hits(
    event: &Event,
    policy: &Policy,
    rt: &Runtime,
    snap: &Snapshot,
    opts: &Options,
    hits: &mut Vec<RuleHit>,
) {
    let sid = &event.context.session_id;
    // A call without a session has no strikes or findings, but tenant and global rate
    // limits still apply to it.
    if !sid.is_empty()
        && let Some(h) = strike_hit(policy, snap.strikes)
    {
        hits.push(h);
    }
    match &opts.candidate_of {
        Some(late) => hits.extend(late.iter().map(late_hit)),
        None if !sid.is_empty() => {
            hits.extend(rt.sessions.take_late_findings(sid).iter().map(late_hit))
        }
        None => {}
    }
    if opts.candidate_of.is_some() {
        return;
    }
    if event.kind == EventKind::ToolCallStart {
        for limit in policy
            .rate_limits
            .iter()
            .filter(|l| l.applies(&event.tool_name))
        {
            if !rt.sessions.rate_allows(limit, sid, &event.context.tenant) {
                hits.push(
                    RuleHit::new(
                        &limit.id,
                        limit.action,
                        RiskLevel::Medium,
                        format!(
                            "rate limit: `{}` was called more than {} times at once or {} times a minute",
                            event.tool_name, limit.burst, limit.per_minute
                        ),
                    )
                    .tagged("rate_limit"),
                );
            }
        }
    }
}

/// The STOP a session gets once its strikes reach `sessions.strike_limit`, if they have.
pub fn strike_hit(policy: &Policy, strikes: u32) -> Option<RuleHit> {
    let limit = policy.sessions.strike_limit;
    (limit > 0 && strikes >= limit).then(|| {
        RuleHit::new(
            STRIKE_LIMIT_RULE,
            Action::Stop,
            RiskLevel::High,
            format!(
                "this session has {strikes} strikes, reaching its limit of {limit}; every later event of the session is stopped"
            ),
        )
        .tagged("session")
    })
}

fn late_hit(f: &Finding) -> RuleHit {
    let mut h = RuleHit::new(
        &f.rule_id,
        f.action,
        f.risk_level,
        format!(
            "late verdict on an earlier event of this session (step `{}`, decision {}): {}",
            f.step_id, f.decision_id, f.explanation
        ),
    )
    .tagged(LATE_FINDING_TAG);
    if !f.guidance.is_empty() {
        h.guidance = Some(f.guidance.clone());
    }
    h
}

/// A resubmitted call's `pause_id`: approved pauses are returned (and used up); denied and
/// expired ones stop the call.
fn redeem(event: &Event, rt: &Runtime, hits: &mut Vec<RuleHit>) -> Option<crate::session::Pause> {
    if event.kind != EventKind::ToolCallStart || event.pause_id.is_empty() {
        return None;
    }
    let fp = fingerprint(event);
    match rt
        .sessions
        .redeem(&event.pause_id, &event.context.session_id, &fp)
    {
        Redeemed::Approved(p) => Some(p),
        Redeemed::Denied(p) => {
            let note = if p.note.is_empty() {
                String::new()
            } else {
                format!(": {}", p.note)
            };
            hits.push(
                RuleHit::new(
                    APPROVAL_DENIED_RULE,
                    Action::Stop,
                    RiskLevel::High,
                    format!("a human (`{}`) denied this call{note}", p.approver),
                )
                .tagged("approval"),
            );
            None
        }
        Redeemed::Expired(_) => {
            hits.push(
                RuleHit::new(
                    APPROVAL_EXPIRED_RULE,
                    Action::Stop,
                    RiskLevel::High,
                    "the approval request expired before a human answered it, which counts as a deny".into(),
                )
                .tagged("approval"),
            );
            None
        }
        Redeemed::Pending(_) | Redeemed::NotThisCall => None,
    }
}

/// The tier the router uses, and whether the prompt forces the jailbreak-class rules.
fn route(event: &Event, policy: &Policy, snap: &Snapshot) -> (Option<RiskLevel>, bool) {
    match event.kind {
        EventKind::ToolCallStart | EventKind::ToolCallResult => {
            (Some(policy.tiers.tier(&event.tool_name)), false)
        }
        EventKind::LlmBefore => {
            let forced = asks_about_system(event);
            // A prompt waits like a high-risk call once the session has used one: that is
            // when a poisoned prompt does the most harm.
            let tier = (snap.used_high_risk_tool || forced).then_some(RiskLevel::High);
            (tier, forced)
        }
        EventKind::LlmStreamChunk => (None, false),
    }
}

/// Prompts that ask about the system itself or try to change what the assistant may do.
fn asks_about_system(event: &Event) -> bool {
    static RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"(?i)\b(?:system\s+(?:prompt|message|instructions?)|(?:your|the)\s+(?:hidden\s+|initial\s+|original\s+)?(?:instructions|guidelines|configuration|capabilities|permissions)\b|(?:developer|god|debug|jailbreak|unrestricted)\s+mode|(?:disable|bypass|turn\s+off|remove)\s+(?:your\s+|the\s+|all\s+)?(?:safety|guardrails?|filters?|restrictions|content\s+polic)|(?:grant|give)\s+(?:me|yourself)\s+(?:admin|root|sudo|elevated|full|unrestricted)\s+(?:access|rights|permissions|privileges)|(?:which|what)\s+(?:model|llm)\s+are\s+you|(?:list|show|print|dump)\s+(?:all\s+)?(?:your\s+|the\s+)?(?:environment\s+variables|env\s+vars|api\s+keys|tools\s+you\s+can))",
        )
        .ok()
    });
    let Some(re) = RE.as_ref() else {
        return false;
    };
    event
        .messages
        .iter()
        .filter(|m| m.role.is_empty() || m.role.eq_ignore_ascii_case("user"))
        .any(|m| re.is_match(&m.content))
}

/// What the router does when a deep rule fails or does not answer in time.
fn fail_action(policy: &Policy, tier: Option<RiskLevel>) -> Action {
    match tier {
        Some(RiskLevel::Critical) if policy.router.critical_fail_closed => Action::Stop,
        Some(RiskLevel::Critical) | Some(RiskLevel::High) => Action::Pause,
        _ if policy.async_cfg.fail_open => Action::Allow,
        _ => Action::Stop,
    }
}

#[derive(Debug, Default)]
struct DeepSummary {
    awaited: u32,
    pending: u32,
    /// The decision waited (rather than deciding at once) and some rules did not answer.
    waited: bool,
    flagged: bool,
}

async fn deep_stage(
    event: &Event,
    policy: &Policy,
    rt: &Runtime,
    meta: &CallMeta,
    d: &mut Decision,
    tier: Option<RiskLevel>,
    forced: bool,
) -> DeepSummary {
    let mut sum = DeepSummary::default();
    if !policy.async_cfg.enabled
        || event.kind == EventKind::LlmStreamChunk
        || crate::decision::merge_actions(&d.hits) == Action::Stop
    {
        return sum;
    }
    let specs: Vec<&DeepRuleSpec> = policy
        .deep
        .iter()
        .filter(|s| s.applies(event.kind, &event.tool_name) || (forced && s.jailbreak))
        .collect();
    if specs.is_empty() {
        return sum;
    }
    let input = Arc::new(deep_input(event, d, policy));
    let wait = match tier {
        Some(RiskLevel::Critical | RiskLevel::High) => policy.router.high_risk_wait,
        Some(RiskLevel::Medium) => policy.router.medium_risk_wait,
        _ => Duration::ZERO,
    };
    // Offline, a tier that waits waits for the answer (up to each rule's own budget), so a
    // replay does not depend on machine load; a tier that does not wait still does not.
    let wait = if rt.offline && !wait.is_zero() {
        None
    } else {
        Some(wait)
    };
    let fail = fail_action(policy, tier);
    let base = FindingBase {
        session_id: event.context.session_id.clone(),
        step_id: event.context.step_id.clone(),
        event: event.kind,
        tool_name: event.tool_name.clone(),
        decision_id: d.decision_id.clone(),
    };

    let pool = rt.pool_for(policy);
    // A late failure on a tier that waited was already answered by the wait-timeout hit;
    // on a tier that does not wait, it is the only answer, given to the next event.
    let late_fail = if wait.is_some_and(|w| w.is_zero()) {
        fail
    } else {
        Action::Allow
    };
    let mut waiting = Vec::new();
    for spec in specs {
        let key = cache_key(policy, spec, &input);
        let late = {
            let (store, spec, base) = (rt.sessions.clone(), spec.clone(), base.clone());
            Box::new(move |r: JobResult| {
                store.record_finding(finding(&base, &spec, &r, true, late_fail))
            })
        };
        let finished = job_span(rt, meta, spec, &d.decision_id);
        match pool.submit(spec.rule.clone(), input.clone(), key, late, finished) {
            Submitted::Cached(v) => {
                sum.awaited += 1;
                judged(rt, &base, spec, Ok(v), fail, d, &mut sum);
            }
            Submitted::Full => {
                let reason = format!(
                    "deep rule `{}` was not run: the deep-rule queue is full ({} jobs); {}",
                    spec.id,
                    pool.capacity(),
                    fail_words(fail)
                );
                d.hits.push(
                    RuleHit::new(DEEP_QUEUE_FULL_RULE, fail, RiskLevel::Medium, reason)
                        .tagged("failure"),
                );
            }
            Submitted::Queued(rx) => waiting.push((spec, rx)),
        }
    }

    let deadline = wait.map(|w| Instant::now() + w);
    for (spec, mut rx) in waiting {
        let got = match deadline {
            None => Some((&mut rx).await),
            Some(at) => match tokio::time::timeout_at(at, &mut rx).await {
                Ok(r) => Some(r),
                Err(_) => {
                    // Closed first, then read: a result is either taken here or goes to
                    // the late sink, never lost in between.
                    rx.close();
                    rx.try_recv().ok().map(Ok)
                }
            },
        };
        match got {
            Some(Ok(result)) => {
                sum.awaited += 1;
                judged(rt, &base, spec, result, fail, d, &mut sum);
            }
            Some(Err(_)) => {
                sum.awaited += 1;
                let gone = Err(DeepError::Transport(
                    "the worker stopped before answering".into(),
                ));
                judged(rt, &base, spec, gone, fail, d, &mut sum);
            }
            None => sum.pending += 1,
        }
    }
    if sum.pending > 0 && wait.is_some_and(|w| !w.is_zero()) {
        sum.waited = true;
        let ms = wait.unwrap_or_default().as_millis();
        let reason = format!(
            "{} deep rule(s) had not answered after {ms} ms; their verdicts will apply to the session's next event; {}",
            sum.pending,
            fail_words(fail)
        );
        d.hits.push(
            RuleHit::new(DEEP_WAIT_TIMEOUT_RULE, fail, RiskLevel::Medium, reason).tagged("failure"),
        );
    }
    sum
}

/// The hook that records a job's span under the decision's span, when tracing is on.
fn job_span(
    rt: &Runtime,
    meta: &CallMeta,
    spec: &DeepRuleSpec,
    decision_id: &str,
) -> Option<FinishHook> {
    let tracing = rt.tracing.clone()?;
    let parent = meta.span.clone()?;
    let (rule, decision_id, queued) = (spec.id.clone(), decision_id.to_string(), SystemTime::now());
    Some(Box::new(move |outcome, started| {
        tracing.deep_span(
            &parent,
            &rule,
            outcome,
            &decision_id,
            queued,
            started,
            SystemTime::now(),
        );
    }))
}

fn fail_words(fail: Action) -> &'static str {
    match fail {
        Action::Allow => "the tier fails open",
        Action::Pause => "the tier pauses for a human",
        _ => "the tier fails closed",
    }
}

/// A verdict (or failure) that arrived while the decision was waiting.
fn judged(
    rt: &Runtime,
    base: &FindingBase,
    spec: &DeepRuleSpec,
    result: JobResult,
    fail: Action,
    d: &mut Decision,
    sum: &mut DeepSummary,
) {
    rt.sessions
        .record_finding(finding(base, spec, &result, false, fail));
    match result {
        Ok(v) => match spec.classify(&v) {
            VerdictKind::Block => d
                .hits
                .push(verdict_hit(spec, &v, spec.action, RiskLevel::High)),
            VerdictKind::Warn => {
                sum.flagged = true;
                d.hits
                    .push(verdict_hit(spec, &v, Action::Allow, RiskLevel::Medium));
            }
            VerdictKind::Pass => {}
        },
        Err(DeepError::Timeout(t)) => {
            let reason = format!(
                "deep rule `{}` did not answer within its {} ms budget; {}",
                spec.id,
                t.as_millis(),
                fail_words(fail)
            );
            d.hits.push(
                RuleHit::new(DEEP_TIMEOUT_RULE, fail, RiskLevel::Medium, reason).tagged("failure"),
            );
        }
        Err(e) => {
            let reason = format!("deep rule `{}` failed: {e}; {}", spec.id, fail_words(fail));
            d.hits.push(
                RuleHit::new(DEEP_ERROR_RULE, fail, RiskLevel::Medium, reason).tagged("failure"),
            );
        }
    }
}

fn verdict_hit(spec: &DeepRuleSpec, v: &Verdict, action: Action, level: RiskLevel) -> RuleHit {
    let reason = if v.explanation.trim().is_empty() {
        format!(
            "deep rule `{}` scored the event {:.2} ({})",
            spec.id,
            v.risk_score,
            spec.classify(v)
        )
    } else {
        v.explanation.trim().to_string()
    };
    RuleHit {
        rule_id: spec.id.clone(),
        action,
        risk_level: level,
        reason,
        policy_tags: v.policy_tags.clone(),
        violated_policy_ids: v.violated_policy_ids.clone(),
        guidance: (!v.optimization_guidance.trim().is_empty())
            .then(|| v.optimization_guidance.trim().to_string()),
    }
}

#[derive(Debug, Clone)]
struct FindingBase {
    session_id: String,
    step_id: String,
    event: EventKind,
    tool_name: String,
    decision_id: String,
}

/// `fail` is what a failed rule means on this tier; a late failure applies it to the
/// session's next event, so a tier that does not wait still fails closed when told to.
fn finding(
    base: &FindingBase,
    spec: &DeepRuleSpec,
    r: &JobResult,
    late: bool,
    fail: Action,
) -> Finding {
    let (verdict, score, explanation, guidance, action) = match r {
        Ok(v) => {
            let kind = spec.classify(v);
            let action = if kind == VerdictKind::Block {
                spec.action
            } else {
                Action::Allow
            };
            (
                Some(kind),
                v.risk_score,
                v.explanation.clone(),
                v.optimization_guidance.clone(),
                action,
            )
        }
        Err(e) => (
            None,
            0.0,
            format!("the rule failed: {e}"),
            String::new(),
            fail,
        ),
    };
    Finding {
        session_id: base.session_id.clone(),
        step_id: base.step_id.clone(),
        rule_id: spec.id.clone(),
        event: base.event,
        tool_name: base.tool_name.clone(),
        verdict,
        risk_score: score,
        explanation,
        guidance,
        action,
        risk_level: if verdict == Some(VerdictKind::Block) {
            RiskLevel::High
        } else {
            RiskLevel::Medium
        },
        decision_id: base.decision_id.clone(),
        late,
        applied: false,
        observed_at: SystemTime::now(),
    }
}

/// The call's arguments as JSON text, redacted where the decision redacted them.
fn shown_arguments(event: &Event, d: &Decision) -> String {
    d.redacted_arguments_json
        .clone()
        .or_else(|| event.arguments.as_ref().map(|a| a.to_string()))
        .unwrap_or_default()
}

/// The event as deep rules see it: the fast path's redactions applied, so no secret the
/// fast rules found leaves the process, and capped so a queued job's memory is bounded.
fn deep_input(event: &Event, d: &Decision, policy: &Policy) -> DeepInput {
    let mut text = String::new();
    let args = || shown_arguments(event, d);
    match event.kind {
        EventKind::LlmBefore => {
            let messages = if d.redacted_messages.is_empty() {
                &event.messages
            } else {
                &d.redacted_messages
            };
            // The operator's system prompt and the model's own turns are not where
            // injected instructions arrive; user and tool messages are.
            for m in messages.iter().filter(|m| {
                !m.role.eq_ignore_ascii_case("system") && !m.role.eq_ignore_ascii_case("assistant")
            }) {
                text.push_str(&m.role);
                text.push_str(": ");
                text.push_str(&m.content);
                text.push('\n');
            }
            for (i, p) in event.plan.iter().enumerate() {
                let args = match d.redacted_plan.get(i) {
                    Some((_, a)) => a.clone(),
                    None => p
                        .arguments
                        .as_ref()
                        .map(|a| a.to_string())
                        .unwrap_or_default(),
                };
                text.push_str(&format!("plan[{i}]: {} {args}\n", p.tool_name));
            }
        }
        EventKind::ToolCallStart => {
            text.push_str("arguments: ");
            text.push_str(&args());
            text.push('\n');
        }
        EventKind::ToolCallResult => {
            text.push_str("arguments: ");
            text.push_str(&args());
            text.push_str("\noutput: ");
            text.push_str(d.redacted_output.as_deref().unwrap_or(&event.output));
            text.push('\n');
        }
        EventKind::LlmStreamChunk => {}
    }
    text.truncate(crate::text::head(&text, MAX_INPUT_BYTES).len());
    DeepInput {
        event: event.kind,
        tool_name: event.tool_name.clone(),
        task_goal: safe_goal(event, policy),
        text,
    }
}

fn cache_key(policy: &Policy, spec: &DeepRuleSpec, input: &DeepInput) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        policy.version_tag.as_str(),
        spec.id.as_str(),
        input.event.as_str(),
        input.tool_name.as_str(),
        input.task_goal.as_str(),
        input.text.as_str(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

/// The identity of a call for pauses: kind, tool name and exact arguments.
pub fn fingerprint(event: &Event) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(event.kind.as_str().as_bytes());
    h.update([0]);
    h.update(event.tool_name.as_bytes());
    h.update([0]);
    if let Some(args) = &event.arguments {
        h.update(args.to_string().as_bytes());
    }
    for m in &event.messages {
        h.update(m.content.as_bytes());
        h.update([0]);
    }
    h.update(event.output.as_bytes());
    h.finalize().into()
}

/// Retries are counted per call of a step: the same tool in the same step, whatever its
/// arguments, because a model asked to retry changes the arguments; counting by exact
/// arguments would let it loop forever.
fn call_key(event: &Event) -> String {
    format!("{}:{}", event.kind.as_str(), event.tool_name)
}

fn exhausted_hit(policy: &Policy) -> RuleHit {
    RuleHit::new(
        RETRY_EXHAUSTED_RULE,
        policy.retry.escalate_to,
        RiskLevel::High,
        format!(
            "the model was asked to retry {} times in this step and is still flagged",
            policy.retry.max_attempts
        ),
    )
    .tagged("retry")
}

fn register_pause(event: &Event, policy: &Policy, rt: &Runtime, d: &mut Decision) {
    let Some(reason) = d.pause.as_ref().map(|p| p.reason.clone()) else {
        return;
    };
    let args = shown_arguments(event, d);
    // What an approval lifts: the hits that asked for a human or a retry, never a STOP.
    let cause = d
        .hits
        .iter()
        .filter(|h| matches!(h.action, Action::Retry | Action::Pause))
        .map(|h| h.rule_id.clone())
        .collect();
    let p = rt.sessions.pause(NewPause {
        session: &event.context.session_id,
        step: &event.context.step_id,
        tool: &event.tool_name,
        fingerprint: fingerprint(event),
        reason: &reason,
        redacted_arguments_json: &args,
        cause,
        ttl: policy.approval_ttl,
    });
    if let Some(spec) = d.pause.as_mut() {
        spec.pause_id = p.id.clone();
        spec.expires_at_unix = p
            .expires_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
    }
    if let Some(m) = &rt.metrics {
        m.set_pauses_pending(rt.sessions.pending_pauses() as i64);
    }
}

/// The guidance for regenerating a set of candidates that were all filtered, from the first
/// filtered candidate's decision; the attempt is counted per step like any RETRY. The
/// second value is the escalation once the attempts are spent.
pub fn regenerate(
    event: &Event,
    d: &Decision,
    policy: &Policy,
    rt: &Runtime,
) -> (crate::decision::RetrySpec, Option<Action>) {
    let (threats, guidance) = threats_and_guidance(&d.hits, |h| h.action >= Action::Retry);
    let sid = &event.context.session_id;
    let attempt = if sid.is_empty() {
        1
    } else {
        rt.sessions
            .next_attempt(sid, &event.context.step_id, "candidates")
            .min(policy.retry.max_attempts.saturating_add(1))
    };
    let escalation = (attempt > policy.retry.max_attempts).then_some(policy.retry.escalate_to);
    let spec = crate::decision::RetrySpec {
        corrective_message: super::corrective_message(
            &safe_goal(event, policy),
            &threats,
            &guidance,
        ),
        attempt,
        max_attempts: policy.retry.max_attempts,
    };
    (spec, escalation)
}

#[cfg(test)]
mod tests;
