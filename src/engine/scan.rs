//! The fast scan: every fast rule over every field of an event in one pass, within its work
//! budget, giving hits, redaction spans, redacted views and the risk assessment. Text the
//! scan did not read is withheld from every redacted view, never passed on as clean.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::decision::reserved::SYNC_TIMEOUT_RULE;
use crate::decision::{
    Action, Decision, Effects, RedactionSpan, RiskLevel, RuleHit, Status, apply_spans, merge_spans,
    normalize_hits,
};
use crate::event::{Event, EventKind, Field, FieldKind, Message, replace_leaf};
use crate::policy::{Policy, SyncFailMode};
use crate::risk;
use crate::rules::budget::Budget;
use crate::rules::fast::{CompiledRule, ScanOutcome, Unread, Unscanned, WINDOW};

/// Runs every fast rule over every field of `event`, within the work budget, and returns
/// the decision unsettled: hits, redactions and risk, action still ALLOW (`settle` derives
/// it). Pure: same event and policy give the same draft (except ids and a budget overrun).
pub fn scan(
    event: &Event,
    policy: &Policy,
    tool_tier: Option<RiskLevel>,
    trace_id: &str,
) -> Decision {
    let fields = event.fields();

    // 1. Fast rules, one pass, within the work budget.
    let mut outcome = ScanOutcome::default();
    let mut budget = if policy.sync.limited {
        let (bytes, longest) = fields.iter().fold((0, 0), |(sum, max), f| {
            (sum + f.text.len(), max.max(f.text.len()))
        });
        let limit = policy.sync.allowance.for_input(bytes, fields.len());
        Budget::for_scan(limit, fields.len(), longest, WINDOW)
    } else {
        Budget::unlimited()
    };
    policy.rules.scan(event, &fields, &mut budget, &mut outcome);
    let rules = &policy.rules.rules;

    // 2. Hits and redaction spans from confirmed matches.
    let mut hits = Vec::new();
    let mut spans = Vec::new();
    let mut triggered: Vec<&CompiledRule> = Vec::new();
    let mut effects = Effects::default();
    for m in &outcome.matches {
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
                    .unwrap_or_else(|| crate::rules::redaction_mark(kind)),
            });
        }
    }
    // What the scan did not read is never passed on as if it were clean: it is withheld
    // from every redacted view (and so from the decision log and the deep rules), and the
    // pack's mode says what the caller is told. Hits found before the budget ran out stay.
    let withheld = outcome
        .unscanned
        .map(|at| (unscanned_parts(&fields, at, &mut spans), at.cause));
    if let Some((w, cause)) = &withheld {
        hits.push(unscanned_hit(event, policy, w, *cause, budget.limit()));
    }

    // 3. Hits and spans in a canonical order; the risk of what triggered. Resources are
    //    named only from fields the scan read to the end: an unread one may hold a secret.
    normalize_hits(&mut hits);
    let spans = merge_spans(spans);
    let read = outcome.unscanned.map_or(fields.len(), |at| at.field);
    let risk = risk::assess(
        &event.tool_name,
        tool_tier,
        &triggered,
        &fields[..read],
        &spans,
        &policy.router.require_approval,
    );

    // 4. The draft answer.
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
        rules_evaluated: outcome.rules_evaluated,
        deep_awaited: 0,
        deep_pending: 0,
        trace_id: trace_id.to_string(),
        caller: String::new(),
    };
    apply_redactions(&mut d, event, &fields, &spans);
    if let Some((w, _)) = withheld {
        w.apply(&mut d, event);
    }
    d.redactions = spans;
    d
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
    cause: Unread,
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
    // One hit for both causes: the same fail mode, error code and fail-open count apply.
    let reason = match cause {
        Unread::Budget => {
            let budget = limit.map_or(0, |l| l.as_micros());
            format!(
                "the fast rules ran out of their {budget} µs CPU budget before reading the whole event; {outcome}"
            )
        }
        Unread::Decoding => format!(
            "a command's encoding or expansions went past what the fast rules decode, so what it runs was not all read; {outcome}"
        ),
    };
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
