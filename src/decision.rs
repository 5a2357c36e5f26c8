//! Action, Decision and the merge (STOP > PAUSE > RETRY > REDACT > ALLOW), plus redaction
//! spans: how they are unioned and applied so the raw secret appears nowhere in the answer.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What the caller must do. Ordered by priority: the merge takes the maximum.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    Allow,
    Redact,
    Retry,
    Pause,
    Stop,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::Allow,
        Action::Redact,
        Action::Retry,
        Action::Pause,
        Action::Stop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Redact => "redact",
            Action::Retry => "retry",
            Action::Pause => "pause",
            Action::Stop => "stop",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        let s = s.to_ascii_lowercase();
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    Safe,
    Low,
    #[default]
    Medium,
    High,
    Critical,
}

impl RiskLevel {
    pub const ALL: [RiskLevel; 5] = [
        RiskLevel::Safe,
        RiskLevel::Low,
        RiskLevel::Medium,
        RiskLevel::High,
        RiskLevel::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::Safe => "safe",
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
            RiskLevel::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<RiskLevel> {
        let s = s.to_ascii_lowercase();
        RiskLevel::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Block,
}

impl Status {
    /// pass = ALLOW with no hits; warn = ALLOW with hits or REDACT; block = RETRY/PAUSE/STOP.
    pub fn of(action: Action, has_hits: bool) -> Status {
        match action {
            Action::Allow if !has_hits => Status::Pass,
            Action::Allow | Action::Redact => Status::Warn,
            Action::Retry | Action::Pause | Action::Stop => Status::Block,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    pub rule_id: String,
    pub action: Action,
    pub risk_level: RiskLevel,
    pub reason: String,
    pub policy_tags: Vec<String>,
    pub violated_policy_ids: Vec<String>,
    /// "Please adjust your response considering: …" for a RETRY; internal, the corrective
    /// message carries it.
    #[serde(skip)]
    pub guidance: Option<String>,
}

impl RuleHit {
    pub fn new(rule_id: &str, action: Action, risk_level: RiskLevel, reason: String) -> RuleHit {
        RuleHit {
            rule_id: rule_id.to_string(),
            action,
            risk_level,
            reason,
            policy_tags: Vec::new(),
            violated_policy_ids: Vec::new(),
            guidance: None,
        }
    }

    pub fn tagged(mut self, tag: &str) -> RuleHit {
        self.policy_tags.push(tag.to_string());
        self
    }
}

/// A byte range of one field to be replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedactionSpan {
    pub field_path: String,
    pub start: usize,
    pub end: usize,
    pub kind: String,
    pub rule_id: String,
    #[serde(skip)]
    pub replacement: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetrySpec {
    pub corrective_message: String,
    pub attempt: u32,
    pub max_attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopSpec {
    pub user_message: String,
    pub error_code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseSpec {
    pub pause_id: String,
    pub reason: String,
    /// Seconds since the Unix epoch.
    pub expires_at_unix: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct RiskAssessment {
    pub level: RiskLevel,
    pub reasons: Vec<String>,
    pub affected_resources: Vec<String>,
    pub reversible: bool,
    pub estimated_impact: String,
    pub recommendations: Vec<String>,
    pub requires_approval: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Effects {
    pub flag_trajectory: bool,
    pub strikes: u32,
}

impl Effects {
    pub fn union(self, other: Effects) -> Effects {
        Effects {
            flag_trajectory: self.flag_trajectory || other.flag_trajectory,
            strikes: self.strikes.max(other.strikes),
        }
    }
}

/// A deep rule's verdict, before the pack's thresholds turn its score into an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictKind {
    Pass,
    Warn,
    Block,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Pass => "pass",
            VerdictKind::Warn => "warn",
            VerdictKind::Block => "block",
        }
    }

    pub fn parse(s: &str) -> Option<VerdictKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pass" => Some(VerdictKind::Pass),
            "warn" => Some(VerdictKind::Warn),
            "block" => Some(VerdictKind::Block),
            _ => None,
        }
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Hit ids the engine gives its own outcomes (a scan that ran out, a session gate, an
/// approval, a deep rule that failed); every edge, the log and the tests read them here.
pub mod reserved {
    pub const SYNC_TIMEOUT_RULE: &str = "sync_timeout";
    pub const APPROVAL_RULE: &str = "approval-required";
    pub const STRIKE_LIMIT_RULE: &str = "strike_limit";
    pub const APPROVED_RULE: &str = "approved";
    pub const APPROVAL_DENIED_RULE: &str = "approval_denied";
    pub const APPROVAL_EXPIRED_RULE: &str = "approval_expired";
    pub const RETRY_EXHAUSTED_RULE: &str = "retry_exhausted";
    pub const DEEP_QUEUE_FULL_RULE: &str = "deep_queue_full";
    pub const DEEP_ERROR_RULE: &str = "deep_error";
    pub const DEEP_TIMEOUT_RULE: &str = "deep_timeout";
    pub const DEEP_WAIT_TIMEOUT_RULE: &str = "deep_wait_timeout";
    pub const SESSION_STORE_UNAVAILABLE_RULE: &str = "session_store_unavailable";
    /// Tags the hits that carry a late verdict on an earlier event: an approval of this
    /// call never lifts them, since the human did not see them.
    pub const LATE_FINDING_TAG: &str = "late_finding";
}

/// The complete answer for one event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub action: Action,
    pub status: Status,
    pub hits: Vec<RuleHit>,
    pub redactions: Vec<RedactionSpan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redacted_output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redacted_arguments_json: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted_messages: Vec<crate::event::Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redacted_chunk: Option<String>,
    /// The plan with redactions applied: (tool name, arguments JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted_plan: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskAssessment>,
    pub effects: Effects,
    pub enforced: bool,
    /// In shadow mode: the action enforce mode would have taken.
    pub shadow_action: Option<Action>,
    pub decision_id: String,
    pub policy_version: String,
    pub latency_us: u64,
    pub rules_evaluated: u32,
    /// Deep rules this decision waited for, and those still running when it was made.
    pub deep_awaited: u32,
    pub deep_pending: u32,
    pub trace_id: String,
    /// The caller's verified identity (`Context::caller`); empty without one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub caller: String,
}

/// The winning action: the highest priority among the hits, ALLOW when there are none.
pub fn merge_actions<'a>(hits: impl IntoIterator<Item = &'a RuleHit>) -> Action {
    hits.into_iter()
        .map(|h| h.action)
        .max()
        .unwrap_or(Action::Allow)
}

/// Sorts hits so the result does not depend on the order rules ran in: strongest action
/// first, then highest level, then rule id. Duplicate rule ids keep the strongest.
pub fn normalize_hits(hits: &mut Vec<RuleHit>) {
    hits.sort_by(|a, b| {
        b.action
            .cmp(&a.action)
            .then(b.risk_level.cmp(&a.risk_level))
            .then(a.rule_id.cmp(&b.rule_id))
    });
    let mut seen = std::collections::HashSet::new();
    hits.retain(|h| seen.insert(h.rule_id.clone()));
}

/// Unions redaction spans: per field, overlapping or touching spans merge into one. The
/// merged span keeps the kind and rule of the span that starts first (ties: the lexically
/// smaller rule id), so the result is independent of input order.
pub fn merge_spans(mut spans: Vec<RedactionSpan>) -> Vec<RedactionSpan> {
    spans.sort_by(|a, b| {
        a.field_path
            .cmp(&b.field_path)
            .then(a.start.cmp(&b.start))
            .then(b.end.cmp(&a.end))
            .then(a.rule_id.cmp(&b.rule_id))
            .then(a.kind.cmp(&b.kind))
    });
    let mut out: Vec<RedactionSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        if let Some(last) = out.last_mut()
            && last.field_path == s.field_path
            && s.start <= last.end
        {
            last.end = last.end.max(s.end);
            continue;
        }
        out.push(s);
    }
    out
}

/// Applies merged spans of one field to its text. Spans must be sorted, non-overlapping and
/// on char boundaries (as `merge_spans` and the scanner guarantee); others are skipped.
pub fn apply_spans(text: &str, spans: &[&RedactionSpan]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for s in spans {
        if s.start < pos
            || s.end > text.len()
            || !text.is_char_boundary(s.start)
            || !text.is_char_boundary(s.end)
        {
            continue;
        }
        out.push_str(&text[pos..s.start]);
        out.push_str(&s.replacement);
        pos = s.end;
    }
    out.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn span(path: &str, start: usize, end: usize, rule: &str) -> RedactionSpan {
        RedactionSpan {
            field_path: path.into(),
            start,
            end,
            kind: "secret".into(),
            rule_id: rule.into(),
            replacement: "[X]".into(),
        }
    }

    fn hit(id: &str, action: Action) -> RuleHit {
        RuleHit::new(id, action, RiskLevel::High, String::new())
    }

    #[test]
    fn priority_order() {
        let hits = [
            hit("a", Action::Redact),
            hit("b", Action::Pause),
            hit("c", Action::Retry),
        ];
        assert_eq!(merge_actions(&hits), Action::Pause);
        assert_eq!(merge_actions(&[]), Action::Allow);
        assert!(Action::Stop > Action::Pause && Action::Retry > Action::Redact);
    }

    #[test]
    fn status_view() {
        assert_eq!(Status::of(Action::Allow, false), Status::Pass);
        assert_eq!(Status::of(Action::Allow, true), Status::Warn);
        assert_eq!(Status::of(Action::Redact, true), Status::Warn);
        assert_eq!(Status::of(Action::Retry, true), Status::Block);
    }

    #[test]
    fn overlapping_spans_merge() {
        let merged = merge_spans(vec![
            span("output", 5, 10, "b"),
            span("output", 0, 6, "a"),
            span("output", 20, 25, "a"),
            span("$.x", 0, 3, "a"),
        ]);
        assert_eq!(merged.len(), 3);
        assert_eq!((merged[1].start, merged[1].end), (0, 10));
        assert_eq!(
            apply_spans("0123456789abcdefghijklmnopq", &[&merged[1], &merged[2]]),
            "[X]abcdefghij[X]pq"
        );
    }

    proptest! {
        #[test]
        fn merge_is_order_independent_and_disjoint(
            raw in proptest::collection::vec((0usize..60, 1usize..15, 0usize..3), 0..20),
            seed in any::<u64>(),
        ) {
            let spans: Vec<_> = raw.iter().map(|(s, l, r)| span("f", *s, s + l, ["a", "b", "c"][*r])).collect();
            let mut shuffled = spans.clone();
            // Deterministic shuffle from the seed.
            let n = shuffled.len();
            if n > 1 {
                let mut x = seed;
                for i in (1..n).rev() {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    shuffled.swap(i, (x >> 33) as usize % (i + 1));
                }
            }
            let a = merge_spans(spans);
            let b = merge_spans(shuffled);
            prop_assert_eq!(&a, &b);
            for w in a.windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
        }

        #[test]
        fn hit_order_does_not_change_the_winner(actions in proptest::collection::vec(0usize..5, 0..10)) {
            let hits: Vec<_> = actions.iter().enumerate().map(|(i, a)| hit(&format!("r{i}"), Action::ALL[*a])).collect();
            let mut rev = hits.clone();
            rev.reverse();
            prop_assert_eq!(merge_actions(&hits), merge_actions(&rev));
            let mut h1 = hits.clone();
            let mut h2 = rev;
            normalize_hits(&mut h1);
            normalize_hits(&mut h2);
            prop_assert_eq!(h1, h2);
        }
    }
}
