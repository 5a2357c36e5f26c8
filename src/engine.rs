//! `evaluate(event, policy) -> Decision`: the one place the pipeline is written, top to
//! bottom: fields → fast rules in the time box → tier → approval → merge → shape the answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::decision::{
    Action, Decision, Effects, PauseSpec, RedactionSpan, RetrySpec, RiskLevel, RuleHit, Status,
    StopSpec, apply_spans, merge_actions, merge_spans, normalize_hits,
};
use crate::event::{Event, EventKind, Field, FieldKind, Message, replace_leaf};
use crate::policy::{Mode, Policy};
use crate::risk;
use crate::rules::fast::{CompiledRule, ScanOutcome};

pub const SYNC_TIMEOUT_RULE: &str = "sync_timeout";
pub const APPROVAL_RULE: &str = "approval-required";
/// The most of the task goal a corrective message or a deep rule is given.
const MAX_GOAL_BYTES: usize = 4096;
const NO_EXPLANATION: &str = "High risk detected (risk score exceeded threshold)";

/// Per-call inputs that are not part of the event itself.
#[derive(Debug, Clone, Default)]
pub struct CallMeta {
    /// W3C trace id of the caller's span, when it sent one.
    pub trace_id: String,
    /// The decision's own span, opened when the call started; deep-rule spans are its
    /// children. `None` when tracing is off.
    pub span: Option<opentelemetry::trace::SpanContext>,
}

/// Evaluates one event against one policy snapshot. Pure: same event and policy give the
/// same decision (except ids, latency and a time-box overrun).
pub fn evaluate(event: &Event, policy: &Policy, meta: &CallMeta) -> Decision {
    let started = Instant::now();
    let deadline = started + policy.sync.timeout;
    let fields = event.fields();

    // 1. Fast rules, one pass, inside the time box.
    let mut scan = ScanOutcome::default();
    policy.rules.scan(event, &fields, deadline, &mut scan);
    let rules = &policy.rules.rules;

    // 2. Hits and redaction spans from confirmed matches.
    let mut hits = Vec::new();
    let mut spans = Vec::new();
    let mut triggered: Vec<&CompiledRule> = Vec::new();
    let mut effects = Effects::default();
    for m in &scan.matches {
        let rule = &rules[m.rule];
        if !triggered.iter().any(|r| r.id == rule.id) {
            triggered.push(rule);
            effects = effects.union(rule.effects);
            hits.push(hit_of(rule));
        }
        if rule.action == Action::Redact
            && let (Some(pi), Some(field)) = (m.pattern, fields.get(m.field))
            && field.kind != FieldKind::ArgumentsJoined
        {
            let kind = &policy.rules.patterns[pi].kind;
            spans.push(RedactionSpan {
                field_path: field.path.clone(),
                start: m.start,
                end: m.end,
                kind: kind.clone(),
                rule_id: rule.id.clone(),
                replacement: rule
                    .replacement
                    .clone()
                    .unwrap_or_else(|| format!("[REDACTED:{kind}]")),
            });
        }
    }
    if scan.overrun {
        let (action, outcome) = if policy.sync.fail_open {
            (Action::Allow, "allowed (fail open)")
        } else {
            (Action::Stop, "blocked (fail closed)")
        };
        let reason = format!(
            "fast rules did not finish within the {} µs time box; the unscanned part was {outcome}",
            policy.sync.timeout.as_micros(),
        );
        hits.push(
            RuleHit::new(SYNC_TIMEOUT_RULE, action, RiskLevel::Medium, reason).tagged("failure"),
        );
    }

    // 3. Risk tier of the tool, and approval for tiers that require it.
    let tier = policy.tiers.of_event(event);
    if event.kind == EventKind::ToolCallStart
        && let Some(t) = tier
        && policy.router.require_approval.contains(&t)
        && merge_actions(&hits) < Action::Pause
    {
        let reason = format!(
            "tool `{}` is in the {t} tier, which needs human approval",
            event.tool_name
        );
        hits.push(RuleHit::new(APPROVAL_RULE, Action::Pause, t, reason).tagged("approval"));
    }

    // 4. Merge: the strongest action wins; hits and spans in a canonical order.
    normalize_hits(&mut hits);
    let spans = merge_spans(spans);
    let risk = risk::assess(
        &event.tool_name,
        tier,
        &triggered,
        &fields,
        &spans,
        &policy.router.require_approval,
    );

    // 5. Shape the answer.
    let mut d = Decision {
        action: Action::Allow,
        status: Status::Pass,
        hits,
        redactions: Vec::new(),
        redacted_output: None,
        redacted_arguments_json: None,
        redacted_messages: Vec::new(),
        redacted_chunk: None,
        redacted_plan: Vec::new(),
        retry: None,
        stop: None,
        pause: None,
        risk: Some(risk),
        effects,
        enforced: true,
        shadow_action: None,
        decision_id: next_decision_id(),
        policy_version: policy.version_tag(),
        latency_us: 0,
        rules_evaluated: scan.rules_evaluated,
        deep_awaited: 0,
        deep_pending: 0,
        trace_id: meta.trace_id.clone(),
    };
    apply_redactions(&mut d, event, &fields, &spans);
    d.redactions = spans;
    settle(&mut d, event, policy, 1);
    d.latency_us = started.elapsed().as_micros() as u64;
    d
}

/// Derives everything that follows from the hits: the winning action, the status, the
/// RETRY / STOP / PAUSE specs, the risk level, and shadow mode. Called again whenever a
/// later stage adds hits, so the answer is always consistent with its hits.
pub fn settle(d: &mut Decision, event: &Event, policy: &Policy, attempt: u32) {
    normalize_hits(&mut d.hits);
    let would_be = merge_actions(&d.hits);
    d.action = would_be;
    d.status = Status::of(would_be, !d.hits.is_empty());
    d.retry = None;
    d.stop = None;
    if would_be != Action::Pause {
        d.pause = None;
    }
    match would_be {
        Action::Retry => d.retry = Some(retry_spec(event, &d.hits, policy, attempt)),
        Action::Stop => d.stop = Some(stop_spec(&d.hits)),
        Action::Pause => {
            let keep_id = d.pause.take().map(|p| p.pause_id);
            let mut p = pause_spec(&d.hits, policy);
            if let Some(id) = keep_id {
                p.pause_id = id;
            }
            d.pause = Some(p);
        }
        Action::Allow | Action::Redact => {}
    }
    if let Some(risk) = d.risk.as_mut() {
        for h in d.hits.iter().filter(|h| h.action >= Action::Retry) {
            if h.risk_level > risk.level {
                risk.level = h.risk_level;
            }
        }
        risk.requires_approval |= risk.level >= RiskLevel::High;
    }
    d.enforced = policy.mode != Mode::Shadow;
    d.shadow_action = None;
    if policy.mode == Mode::Shadow {
        d.shadow_action = Some(would_be);
        d.action = Action::Allow;
        d.status = Status::of(Action::Allow, !d.hits.is_empty());
    }
}

fn hit_of(rule: &CompiledRule) -> RuleHit {
    RuleHit {
        rule_id: rule.id.clone(),
        action: rule.action,
        risk_level: rule.level,
        reason: rule.reason.clone(),
        policy_tags: rule.tags.clone(),
        violated_policy_ids: rule.violated_policy_ids.clone(),
        guidance: rule.guidance.clone(),
    }
}

/// Fills the redacted views of the fields that have spans. The raw text of a span never
/// reaches the decision.
fn apply_redactions(
    d: &mut Decision,
    event: &Event,
    fields: &[Field<'_>],
    spans: &[RedactionSpan],
) {
    if spans.is_empty() {
        return;
    }
    let spans_for = |path: &str| -> Vec<&RedactionSpan> {
        spans.iter().filter(|s| s.field_path == path).collect()
    };
    if spans.iter().any(|s| s.field_path == "output") {
        d.redacted_output = Some(apply_spans(&event.output, &spans_for("output")));
    }
    if spans.iter().any(|s| s.field_path == "chunk") {
        d.redacted_chunk = Some(apply_spans(&event.chunk, &spans_for("chunk")));
    }
    if let Some(args) = &event.arguments
        && spans.iter().any(|s| s.field_path.starts_with('$'))
    {
        let mut redacted = args.clone();
        for f in fields.iter().filter(|f| f.kind == FieldKind::Arguments) {
            let own = spans_for(&f.path);
            if !own.is_empty() {
                replace_leaf(&mut redacted, &f.path, apply_spans(&f.text, &own));
            }
        }
        d.redacted_arguments_json = serde_json::to_string(&redacted).ok();
    }
    if spans.iter().any(|s| s.field_path.starts_with("plan[")) {
        d.redacted_plan = event
            .plan
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let prefix = format!("plan[{i}].arguments");
                let args = p.arguments.as_ref().map(|args| {
                    let mut redacted = args.clone();
                    for f in fields.iter().filter(|f| f.path.starts_with(&prefix)) {
                        let own = spans_for(&f.path);
                        if !own.is_empty() {
                            replace_leaf(
                                &mut redacted,
                                &f.path[prefix.len()..],
                                apply_spans(&f.text, &own),
                            );
                        }
                    }
                    redacted.to_string()
                });
                let name_path = format!("plan[{i}].tool_name");
                let tool_name = apply_spans(&p.tool_name, &spans_for(&name_path));
                (tool_name, args.unwrap_or_default())
            })
            .collect();
    }
    if spans.iter().any(|s| s.field_path.starts_with("messages[")) {
        d.redacted_messages = event
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| Message {
                role: m.role.clone(),
                content: apply_spans(&m.content, &spans_for(&format!("messages[{i}].content"))),
            })
            .collect();
    }
}

/// The risk-guidance form: goal, threat lines, optional guidance, the three reminders.
pub fn corrective_message(task_goal: &str, threats: &[String], guidance: &[String]) -> String {
    let mut m = String::new();
    m.push_str("Original task goal: ");
    m.push_str(if task_goal.trim().is_empty() {
        "(not provided)"
    } else {
        task_goal.trim()
    });
    m.push_str("\n\nPrevious response was flagged due to:\n");
    if threats.is_empty() {
        m.push_str("- Threat risk: ");
        m.push_str(NO_EXPLANATION);
        m.push('\n');
    }
    for t in threats {
        m.push_str("- Threat risk: ");
        m.push_str(t);
        m.push('\n');
    }
    if !guidance.is_empty() {
        m.push_str("\nPlease adjust your response considering: ");
        m.push_str(&guidance.join("; "));
        m.push('\n');
    }
    m.push_str(
        "\nReminders:\n\
         1. Keep to the original task goal.\n\
         2. Re-explain your reasoning with security considerations in mind.\n\
         3. Give the corrected action.",
    );
    m
}

/// The task goal as the corrective message may quote it: the goal is the caller's text and
/// is not itself a scanned field, so it goes through the same rules as a user message and
/// only its redacted form is used.
pub(crate) fn safe_goal(event: &Event, policy: &Policy) -> String {
    let goal = event.context.task_goal.trim();
    if goal.is_empty() {
        return String::new();
    }
    // Scanned whole, then cut: cutting first could split a secret too short to match.
    let mut probe = Event::new(EventKind::LlmBefore, Default::default());
    probe.messages.push(Message {
        role: "user".into(),
        content: goal.to_string(),
    });
    let d = evaluate(&probe, policy, &CallMeta::default());
    if d.hits.iter().any(|h| h.rule_id == SYNC_TIMEOUT_RULE) {
        // Not scanned to the end, so not known to be free of secrets: not quoted.
        return "(withheld: the goal could not be checked in time)".into();
    }
    let mut safe = d
        .redacted_messages
        .into_iter()
        .next()
        .map(|m| m.content)
        .unwrap_or_else(|| goal.to_string());
    // A goal is a sentence or two; a long one is cut so quoting it stays bounded.
    if safe.len() > MAX_GOAL_BYTES {
        safe.truncate(crate::text::head(&safe, MAX_GOAL_BYTES).len());
        safe.push('…');
    }
    safe
}

/// The threat lines (reasons) and guidance of the hits `which` selects, for the
/// risk-guidance form.
pub(crate) fn threats_and_guidance(
    hits: &[RuleHit],
    which: impl Fn(&RuleHit) -> bool,
) -> (Vec<String>, Vec<String>) {
    let picked = hits.iter().filter(|h| which(h));
    let threats = picked
        .clone()
        .filter(|h| !h.reason.trim().is_empty())
        .map(|h| h.reason.clone())
        .collect();
    let guidance = picked.filter_map(|h| h.guidance.clone()).collect();
    (threats, guidance)
}

fn retry_spec(event: &Event, hits: &[RuleHit], policy: &Policy, attempt: u32) -> RetrySpec {
    let (threats, guidance) = threats_and_guidance(hits, |h| h.action == Action::Retry);
    RetrySpec {
        corrective_message: corrective_message(&safe_goal(event, policy), &threats, &guidance),
        attempt,
        max_attempts: policy.retry.max_attempts,
    }
}

fn stop_spec(hits: &[RuleHit]) -> StopSpec {
    // Hits are sorted strongest first, so the first STOP hit is the one to explain.
    let top = hits.iter().find(|h| h.action == Action::Stop);
    let (reason, code) = match top {
        Some(h) if h.rule_id == SYNC_TIMEOUT_RULE => (
            "the safety check could not finish in time, so the action was blocked".to_string(),
            "sync_timeout".to_string(),
        ),
        Some(h) => (h.reason.clone(), format!("policy_violation:{}", h.rule_id)),
        None => (
            "blocked by policy".to_string(),
            "policy_violation".to_string(),
        ),
    };
    StopSpec {
        user_message: format!("This request was stopped by the safety policy: {reason}."),
        error_code: code,
    }
}

fn pause_spec(hits: &[RuleHit], policy: &Policy) -> PauseSpec {
    let reason = hits
        .iter()
        .find(|h| h.action == Action::Pause)
        .map(|h| h.reason.clone())
        .unwrap_or_else(|| "needs human approval".into());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    // The id is given by the session store when the pipeline registers the pause; a pause
    // nothing can resubmit (other events, shadow mode) has none.
    PauseSpec {
        pause_id: String::new(),
        reason,
        expires_at_unix: now.saturating_add(policy.approval_ttl.as_secs() as i64),
    }
}

static DECISION_SEQ: AtomicU64 = AtomicU64::new(0);

/// Unique per process and start time: start nanos, then a sequence number.
fn next_decision_id() -> String {
    static START: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let seq = DECISION_SEQ.fetch_add(1, Ordering::Relaxed);
    format!("d-{:012x}-{seq:08x}", *START & 0xffff_ffff_ffff)
}

pub mod pipeline;

#[cfg(test)]
mod tests;
