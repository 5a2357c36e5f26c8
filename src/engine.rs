//! `evaluate(event, policy) -> Decision`: the one place the pipeline is written, top to
//! bottom: fields → fast rules in the time box → tier → approval → merge → shape the answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::decision::{
    Action, Decision, Effects, PauseSpec, RedactionSpan, RetrySpec, RiskLevel, RuleHit, Status,
    StopSpec, apply_spans, merge_actions, merge_spans, normalize_hits,
};
use crate::event::{Event, EventKind, Field, FieldKind, Message, replace_leaf};
use crate::policy::{Mode, Policy, SyncFailMode};
use crate::risk;
use crate::rules::budget::Budget;
use crate::rules::fast::{CompiledRule, ScanOutcome, Unscanned};

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
/// same decision (except ids, latency and a scan whose budget ran out).
pub fn evaluate(event: &Event, policy: &Policy, meta: &CallMeta) -> Decision {
    let started = Instant::now();
    let fields = event.fields();

    // 1. Fast rules, one pass, within the work budget.
    let mut scan = ScanOutcome::default();
    let mut budget = if policy.sync.limited {
        let bytes = fields.iter().map(|f| f.text.len()).sum();
        Budget::new(policy.sync.allowance.for_input(bytes, fields.len()))
    } else {
        Budget::unlimited()
    };
    policy.rules.scan(event, &fields, &mut budget, &mut scan);
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
    // What the scan did not read is never passed on as if it were clean: it is withheld
    // from every redacted view (and so from the decision log and the deep rules), and the
    // pack's mode says what the caller is told. Hits found before the budget ran out stay.
    let withheld = scan
        .unscanned
        .map(|at| unscanned_parts(&fields, at, &mut spans));
    if let Some(w) = &withheld {
        hits.push(unscanned_hit(event, policy, w, budget.limit()));
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
    if let Some(w) = withheld {
        w.apply(&mut d, event);
    }
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

/// The replacement for text the scan did not read.
pub const WITHHELD: &str = "[WITHHELD:unscanned]";
/// The redaction kind of withheld text.
pub const UNSCANNED_KIND: &str = "unscanned";

/// What of an event the scan did not read, beyond the text spans it adds.
#[derive(Debug, Clone, Copy)]
struct Withheld {
    /// Some argument leaf was not read: the arguments are withheld whole, since a call
    /// cannot be judged or forwarded in part.
    arguments: bool,
    /// Some plan field was not read: every planned action's arguments are withheld.
    plan: bool,
}

impl Withheld {
    fn apply(self, d: &mut Decision, event: &Event) {
        let whole = || serde_json::Value::String(WITHHELD.into()).to_string();
        if self.arguments {
            d.redacted_arguments_json = Some(whole());
        }
        if self.plan {
            d.redacted_plan = event
                .plan
                .iter()
                .map(|p| (p.tool_name.clone(), whole()))
                .collect();
        }
    }
}

/// Adds a withholding span for the unread rest of each text field from `at` on, and says
/// which structured parts were not read.
fn unscanned_parts(
    fields: &[Field<'_>],
    at: Unscanned,
    spans: &mut Vec<RedactionSpan>,
) -> Withheld {
    let mut w = Withheld {
        arguments: false,
        plan: false,
    };
    for (i, f) in fields.iter().enumerate().skip(at.field) {
        let from = if i == at.field { at.offset } else { 0 };
        match f.kind {
            FieldKind::Output | FieldKind::Chunk | FieldKind::Messages => {
                if from < f.text.len() {
                    // A match that overlaps it merges with it (`merge_spans`).
                    spans.push(RedactionSpan {
                        field_path: f.path.clone(),
                        start: from,
                        end: f.text.len(),
                        kind: UNSCANNED_KIND.into(),
                        rule_id: SYNC_TIMEOUT_RULE.into(),
                        replacement: WITHHELD.into(),
                    });
                }
            }
            FieldKind::Arguments | FieldKind::ArgumentsJoined => w.arguments = true,
            FieldKind::Plan => w.plan = true,
            // The tool name is the first field and is always read.
            FieldKind::ToolName => {}
        }
    }
    w
}

/// The `sync_timeout` hit: its action is what the pack's `fail_open` makes of the unread part.
fn unscanned_hit(
    event: &Event,
    policy: &Policy,
    w: &Withheld,
    limit: Option<std::time::Duration>,
) -> RuleHit {
    let call_unread = event.kind == EventKind::ToolCallStart && w.arguments;
    let (action, outcome) = match policy.sync.fail_open {
        SyncFailMode::Closed => (Action::Stop, "the event is blocked (fail_open: false)"),
        SyncFailMode::Withhold if call_unread => (
            Action::Stop,
            "the call is blocked, since its arguments were not all read",
        ),
        SyncFailMode::Withhold => (Action::Redact, "the unread part is withheld"),
        SyncFailMode::Unscanned => (
            Action::Allow,
            "the unread part is allowed unscanned (fail_open: unscanned)",
        ),
    };
    let budget = limit.map_or(0, |l| l.as_micros());
    let reason = format!(
        "the fast rules ran out of their {budget} µs CPU budget before reading the whole event; {outcome}"
    );
    RuleHit::new(SYNC_TIMEOUT_RULE, action, RiskLevel::Medium, reason).tagged("failure")
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
            "the safety check could not read all of it, so it was blocked".to_string(),
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
