//! proto ↔ domain at the edge: requests are validated into `Event`s (errors name the field),
//! and `Decision`s are turned into their wire form.

use serde_json::Value;

use super::status::ApiError;
use crate::decision::{self, Action, RiskLevel, Status as DStatus};
use crate::deep::VerdictKind;
use crate::event::{
    self, Context, Event, EventKind, MAX_ID_BYTES, MAX_TOOL_NAME_BYTES, PlannedAction,
};
use crate::proto;
use crate::session;

/// Parses an `arguments_json` field: empty means no arguments.
pub fn parse_arguments(field: &str, text: &str) -> Result<Option<Value>, ApiError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    // The serde_json message gives line and column only, never the input text, so a secret
    // in malformed JSON is not echoed back.
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| ApiError::invalid(field, format!("invalid JSON: {e}")))
}

/// The request's encoded size, or RESOURCE_EXHAUSTED past the limit.
pub fn check_size(msg: &impl prost::Message, limit: usize) -> Result<usize, ApiError> {
    let size = msg.encoded_len();
    if size > limit {
        return Err(ApiError::TooLarge { size, limit });
    }
    Ok(size)
}

pub fn context(c: Option<proto::EventContext>) -> Result<Context, ApiError> {
    let c = c.unwrap_or_default();
    for (field, value) in [
        ("context.session_id", &c.session_id),
        ("context.step_id", &c.step_id),
        ("context.tenant", &c.tenant),
    ] {
        if value.len() > MAX_ID_BYTES {
            return Err(ApiError::invalid(
                field,
                format!("at most {MAX_ID_BYTES} bytes"),
            ));
        }
    }
    Ok(Context {
        session_id: c.session_id,
        step_id: c.step_id,
        tenant: c.tenant,
        task_goal: c.task_goal,
        labels: c.labels.into_iter().collect(),
        // The edge fills it from the connection.
        caller: String::new(),
    })
}

/// A tool name longer than any real one is refused rather than judged: it is written whole
/// into the call's decision-log line and span.
fn require_tool(field: impl Into<String>, name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if name.len() > MAX_TOOL_NAME_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("at most {MAX_TOOL_NAME_BYTES} bytes"),
        ));
    }
    Ok(())
}

pub fn tool_call_start(r: proto::ToolCallStartRequest) -> Result<Event, ApiError> {
    require_tool("tool_name", &r.tool_name)?;
    let mut e = Event::new(EventKind::ToolCallStart, context(r.context)?);
    e.arguments = parse_arguments("arguments_json", &r.arguments_json)?;
    e.arguments_text = e.arguments.is_some().then_some(r.arguments_json);
    e.tool_name = r.tool_name;
    e.pause_id = r.pause_id;
    Ok(e)
}

pub fn tool_call_result(r: proto::ToolCallResultRequest) -> Result<Event, ApiError> {
    require_tool("tool_name", &r.tool_name)?;
    let mut e = Event::new(EventKind::ToolCallResult, context(r.context)?);
    e.arguments = parse_arguments("arguments_json", &r.arguments_json)?;
    e.arguments_text = e.arguments.is_some().then_some(r.arguments_json);
    e.tool_name = r.tool_name;
    e.output = r.output;
    e.is_error = r.is_error;
    Ok(e)
}

pub fn llm_before(r: proto::LlmBeforeRequest) -> Result<Event, ApiError> {
    let mut e = Event::new(EventKind::LlmBefore, context(r.context)?);
    e.messages = r
        .messages
        .into_iter()
        .map(|m| event::Message {
            role: m.role,
            content: m.content,
        })
        .collect();
    for (i, p) in r.plan.into_iter().enumerate() {
        require_tool(format!("plan[{i}].tool_name"), &p.tool_name)?;
        e.plan.push(PlannedAction {
            arguments: parse_arguments(&format!("plan[{i}].arguments_json"), &p.arguments_json)?,
            tool_name: p.tool_name,
        });
    }
    Ok(e)
}

pub fn action(a: Action) -> proto::Action {
    match a {
        Action::Allow => proto::Action::Allow,
        Action::Redact => proto::Action::Redact,
        Action::Retry => proto::Action::Retry,
        Action::Pause => proto::Action::Pause,
        Action::Stop => proto::Action::Stop,
    }
}

pub fn level(l: RiskLevel) -> proto::RiskLevel {
    match l {
        RiskLevel::Safe => proto::RiskLevel::Safe,
        RiskLevel::Low => proto::RiskLevel::Low,
        RiskLevel::Medium => proto::RiskLevel::Medium,
        RiskLevel::High => proto::RiskLevel::High,
        RiskLevel::Critical => proto::RiskLevel::Critical,
    }
}

fn status(s: DStatus) -> proto::DecisionStatus {
    match s {
        DStatus::Pass => proto::DecisionStatus::Pass,
        DStatus::Warn => proto::DecisionStatus::Warn,
        DStatus::Block => proto::DecisionStatus::Block,
    }
}

pub fn decision(d: &decision::Decision) -> proto::Decision {
    proto::Decision {
        action: action(d.action) as i32,
        status: status(d.status) as i32,
        hits: d
            .hits
            .iter()
            .map(|h| proto::RuleHit {
                rule_id: h.rule_id.clone(),
                action: action(h.action) as i32,
                risk_level: level(h.risk_level) as i32,
                reason: h.reason.clone(),
                policy_tags: h.policy_tags.clone(),
                violated_policy_ids: h.violated_policy_ids.clone(),
            })
            .collect(),
        redactions: d
            .redactions
            .iter()
            .map(|r| proto::Redaction {
                field_path: r.field_path.clone(),
                start: r.start as u32,
                end: r.end as u32,
                kind: r.kind.clone(),
                rule_id: r.rule_id.clone(),
            })
            .collect(),
        redacted_output: d.redacted_output.clone().unwrap_or_default(),
        redacted_arguments_json: d.redacted_arguments_json.clone().unwrap_or_default(),
        redacted_messages: d
            .redacted_messages
            .iter()
            .map(|m| proto::Message {
                role: m.role.clone(),
                content: m.content.clone(),
            })
            .collect(),
        redacted_plan: d
            .redacted_plan
            .iter()
            .map(|(tool_name, arguments_json)| proto::PlannedAction {
                tool_name: tool_name.clone(),
                arguments_json: arguments_json.clone(),
            })
            .collect(),
        retry: d.retry.as_ref().map(|r| proto::RetrySpec {
            corrective_message: r.corrective_message.clone(),
            attempt: r.attempt,
            max_attempts: r.max_attempts,
        }),
        stop: d.stop.as_ref().map(|s| proto::StopSpec {
            user_message: s.user_message.clone(),
            error_code: s.error_code.clone(),
        }),
        pause: d.pause.as_ref().map(|p| proto::PauseSpec {
            pause_id: p.pause_id.clone(),
            reason: p.reason.clone(),
            expires_at: Some(prost_types::Timestamp {
                seconds: p.expires_at_unix,
                nanos: 0,
            }),
        }),
        risk: d.risk.as_ref().map(|r| proto::RiskAssessment {
            level: level(r.level) as i32,
            reasons: r.reasons.clone(),
            affected_resources: r.affected_resources.clone(),
            reversible: r.reversible,
            estimated_impact: r.estimated_impact.clone(),
            recommendations: r.recommendations.clone(),
            requires_approval: r.requires_approval,
        }),
        effects: Some(proto::Effects {
            flag_trajectory: d.effects.flag_trajectory,
            strikes: d.effects.strikes,
        }),
        enforced: d.enforced,
        shadow_action: d
            .shadow_action
            .map(|a| action(a) as i32)
            .unwrap_or_default(),
        decision_id: d.decision_id.clone(),
        policy_version: d.policy_version.clone(),
        latency_us: d.latency_us,
        rules_evaluated: d.rules_evaluated,
        trace_id: d.trace_id.clone(),
        deep_rules_awaited: d.deep_awaited,
        deep_rules_pending: d.deep_pending,
        caller: d.caller.clone(),
    }
}

fn timestamp(t: std::time::SystemTime) -> prost_types::Timestamp {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

pub fn pause(p: &session::Pause, state: session::PauseState) -> proto::Pause {
    use session::PauseState as S;
    let state = match state {
        S::Pending => proto::PauseState::Pending,
        S::Approved => proto::PauseState::Approved,
        S::Denied => proto::PauseState::Denied,
        S::Expired => proto::PauseState::Expired,
        S::Used => proto::PauseState::Used,
    };
    proto::Pause {
        pause_id: p.id.clone(),
        session_id: p.session_id.clone(),
        step_id: p.step_id.clone(),
        tool_name: p.tool_name.clone(),
        reason: p.reason.clone(),
        state: state as i32,
        created_at: Some(timestamp(p.created_at)),
        expires_at: Some(timestamp(p.expires_at)),
        approver: p.approver.clone(),
        note: p.note.clone(),
        redacted_arguments_json: p.redacted_arguments_json.clone(),
    }
}

pub fn finding(f: &session::Finding) -> proto::Finding {
    let verdict = match f.verdict {
        Some(VerdictKind::Pass) => proto::Verdict::Pass,
        Some(VerdictKind::Warn) => proto::Verdict::Warn,
        Some(VerdictKind::Block) => proto::Verdict::Block,
        None => proto::Verdict::Error,
    };
    proto::Finding {
        session_id: f.session_id.clone(),
        step_id: f.step_id.clone(),
        rule_id: f.rule_id.clone(),
        event_type: f.event.as_str().to_string(),
        tool_name: f.tool_name.clone(),
        verdict: verdict as i32,
        risk_score: f.risk_score,
        explanation: f.explanation.clone(),
        decision_id: f.decision_id.clone(),
        late: f.late,
        applied: f.applied,
        observed_at: Some(timestamp(f.observed_at)),
    }
}

pub fn session(
    s: &session::Session,
    strike_limit: u32,
    pauses: Vec<proto::Pause>,
) -> proto::Session {
    proto::Session {
        session_id: s.id.clone(),
        strikes: s.strikes,
        strike_limit,
        flag_trajectory: s.flag_trajectory,
        used_high_risk_tool: s.used_high_risk_tool,
        findings: s.findings.iter().map(finding).collect(),
        pauses,
        last_seen: Some(timestamp(s.last_seen_at)),
        provenance: s.provenance().map(|p| {
            let describe = |src: &Option<crate::flow::provenance::Source>| {
                src.as_ref().map(|s| s.describe()).unwrap_or_default()
            };
            proto::Provenance {
                events: p.seq,
                untrusted_values: p.untrusted_values() as u32,
                trusted_values: p.trusted_values() as u32,
                incomplete: p.incomplete(),
                last_untrusted_source: describe(&p.untrusted_seen),
                private_data_source: describe(&p.private_read),
                injection_source: describe(&p.injection),
            }
        }),
    }
}

/// The most candidates one FilterCandidates call may carry.
pub const MAX_CANDIDATES: usize = 64;

/// Each candidate becomes a `tool_call_start` event of the same context.
pub fn candidates(r: proto::FilterCandidatesRequest) -> Result<Vec<Event>, ApiError> {
    if r.candidates.is_empty() {
        return Err(ApiError::invalid("candidates", "must not be empty"));
    }
    if r.candidates.len() > MAX_CANDIDATES {
        return Err(ApiError::invalid(
            "candidates",
            format!("at most {MAX_CANDIDATES} candidates per call"),
        ));
    }
    let ctx = context(r.context)?;
    r.candidates
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            require_tool(format!("candidates[{i}].tool_name"), &c.tool_name)?;
            let mut e = Event::new(EventKind::ToolCallStart, ctx.clone());
            e.arguments = parse_arguments(
                &format!("candidates[{i}].arguments_json"),
                &c.arguments_json,
            )?;
            e.tool_name = c.tool_name;
            Ok(e)
        })
        .collect()
}
