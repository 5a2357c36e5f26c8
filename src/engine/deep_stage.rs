//! The deep stage: the slow, model-based rules that apply to an event go onto the bounded
//! pool, and the decision waits for them as long as the route plan allows. A verdict that
//! arrives later is not lost: it becomes a finding on the session.

use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::CallMeta;
use super::gate::DeepJob;
use super::pipeline::Runtime;
use super::route::RoutePlan;
use super::settle::Goal;
use crate::decision::reserved::{
    DEEP_ERROR_RULE, DEEP_QUEUE_FULL_RULE, DEEP_TIMEOUT_RULE, DEEP_WAIT_TIMEOUT_RULE,
};
use crate::decision::{Action, Decision, RiskLevel, RuleHit};
use crate::deep::pool::{FinishHook, JobResult, MAX_INPUT_BYTES, Submitted};
use crate::deep::{DeepError, DeepInput, DeepRuleSpec, Verdict, VerdictKind};
use crate::event::{Event, EventKind};
use crate::policy::Policy;
use crate::rules::REDACTION_MARK;
use crate::session::Finding;

#[derive(Debug, Default)]
pub struct DeepSummary {
    pub awaited: u32,
    pub pending: u32,
    /// The decision waited (rather than deciding at once) and some rules did not answer.
    pub waited: bool,
    /// A rule warned: the session's trajectory is flagged.
    pub flagged: bool,
}

/// Runs the deep rules that apply to the event on the pool and waits for them as long as the
/// route plan says; what does not answer in time becomes a session finding later.
pub async fn deep_stage(
    event: &Event,
    policy: &Policy,
    rt: &Runtime,
    meta: &CallMeta,
    plan: &RoutePlan,
    goal: &mut Goal,
    d: &mut Decision,
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
        .filter(|s| {
            s.applies(event.kind, &event.tool_name, &event.context.caller)
                || (plan.forced_jailbreak && s.jailbreak)
        })
        .collect();
    if specs.is_empty() {
        return sum;
    }
    let goal_text = if specs.iter().any(|s| s.rule.reads_goal()) {
        goal.get(event, policy)
    } else {
        ""
    };
    let input = Arc::new(deep_input(event, d, goal_text));
    let (wait, fail) = (plan.wait, plan.fail);
    let base = FindingBase {
        session_id: event.context.session_id.clone(),
        step_id: event.context.step_id.clone(),
        event: event.kind,
        tool_name: event.tool_name.clone(),
        decision_id: d.decision_id.clone(),
    };

    let pool = rt.pool_for(policy);
    let late_fail = plan.late_fail();
    let mut waiting = Vec::new();
    let digest = input_digest(&input);
    for spec in specs {
        let key = cache_key(policy, spec, &digest);
        let late = {
            let (store, spec, base) = (rt.sessions.clone(), spec.clone(), base.clone());
            Box::new(move |r: JobResult| {
                store.record_finding(finding(&base, &spec, &r, true, late_fail))
            })
        };
        let mut finished = job_span(rt, meta, spec, &d.decision_id);
        // A local rule that answers quickly answers here: no queue, no thread hops.
        if spec.local
            && let Some(result) = pool.inline(&spec.rule, &input, key, &mut finished)
        {
            sum.awaited += 1;
            judged(rt, &base, spec, result, fail, d, &mut sum);
            continue;
        }
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
    let decision_span = meta.span?;
    let recorder = rt.recorder.clone();
    let (rule, decision_id, queued) = (spec.id.clone(), decision_id.to_string(), SystemTime::now());
    Some(Box::new(move |outcome, started| {
        recorder.deep_job(&DeepJob {
            decision_span,
            rule: &rule,
            outcome,
            decision_id: &decision_id,
            queued,
            started,
            ended: SystemTime::now(),
        });
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
        injection: matches!(verdict, Some(VerdictKind::Warn | VerdictKind::Block))
            && r.as_ref()
                .is_ok_and(|v| crate::flow::Signals::of_tags(&v.policy_tags).injection),
        observed_at: SystemTime::now(),
    }
}

/// The call's arguments as JSON text, redacted where the decision redacted them.
pub(super) fn shown_arguments(event: &Event, d: &Decision) -> String {
    d.redacted_arguments_json
        .clone()
        .or_else(|| event.arguments.as_ref().map(|a| a.to_string()))
        .unwrap_or_default()
}

/// The event as deep rules see it: the fast path's redactions applied, so no secret the
/// fast rules found leaves the process, and capped so a queued job's memory is bounded.
fn deep_input(event: &Event, d: &Decision, goal: &str) -> DeepInput {
    let mut text = String::new();
    let mut content_at = 0;
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
            content_at = text.len();
            text.push_str(d.redacted_output.as_deref().unwrap_or(&event.output));
            text.push('\n');
        }
        EventKind::LlmStreamChunk => {}
    }
    text.truncate(crate::text::head(&text, MAX_INPUT_BYTES).len());
    DeepInput {
        event: event.kind,
        tool_name: event.tool_name.clone(),
        task_goal: goal.to_string(),
        content_at: content_at.min(text.len()),
        has_lookalike_marks: has_lookalike_marks(event, d, &text),
        text,
        charge: Default::default(),
    }
}

/// Whether the text the event arrived with, before any redaction, already holds something
/// shaped like the engine's redaction mark. A reader that sets the engine's marks aside
/// must not set aside the sender's: `[REDACTED:ignore-all-previous-instructions]` is an
/// order in a mark's clothes.
fn has_lookalike_marks(event: &Event, d: &Decision, text: &str) -> bool {
    let holds = |t: &str| t.contains(REDACTION_MARK);
    // Nothing redacted: every mark in the deep rules' text is the sender's.
    if d.redactions.is_empty() {
        return holds(text);
    }
    let holds_json =
        |v: &Option<serde_json::Value>| v.as_ref().is_some_and(|v| holds(&v.to_string()));
    match event.kind {
        EventKind::ToolCallResult => holds(&event.output),
        // The mark has no character JSON escapes, so the serialized tree holds it exactly
        // when a string in it does.
        EventKind::ToolCallStart => holds_json(&event.arguments),
        EventKind::LlmBefore => {
            event.messages.iter().any(|m| holds(&m.content))
                || event.plan.iter().any(|p| holds_json(&p.arguments))
        }
        EventKind::LlmStreamChunk => false,
    }
}

/// The digest of one event's deep input, taken once however many rules read it.
fn input_digest(input: &DeepInput) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        input.event.as_str(),
        input.tool_name.as_str(),
        input.task_goal.as_str(),
        input.text.as_str(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    // The same text split elsewhere is another input: a rule may read only the content.
    h.update((input.content_at as u64).to_le_bytes());
    h.finalize().into()
}

/// A verdict's cache key: the policy version, the rule and the input's digest.
fn cache_key(policy: &Policy, spec: &DeepRuleSpec, digest: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [policy.version_tag.as_str(), spec.id.as_str()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.update(digest);
    h.finalize().into()
}
