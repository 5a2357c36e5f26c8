//! proto ↔ domain at the edge: requests are validated into `Event`s (errors name the field),
//! and `Decision`s are turned into their wire form.

use serde_json::Value;

use super::status::ApiError;
use crate::decision::{self, Action, RiskLevel, Status as DStatus};
use crate::event::{self, Context, Event, EventKind, PlannedAction};
use crate::proto;

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

pub fn context(c: Option<proto::EventContext>) -> Context {
    let c = c.unwrap_or_default();
    Context {
        session_id: c.session_id,
        step_id: c.step_id,
        tenant: c.tenant,
        task_goal: c.task_goal,
        labels: c.labels.into_iter().collect(),
    }
}

fn require_tool(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::invalid("tool_name", "must not be empty"));
    }
    Ok(())
}

pub fn tool_call_start(r: proto::ToolCallStartRequest) -> Result<Event, ApiError> {
    require_tool(&r.tool_name)?;
    let mut e = Event::new(EventKind::ToolCallStart, context(r.context));
    e.arguments = parse_arguments("arguments_json", &r.arguments_json)?;
    e.tool_name = r.tool_name;
    Ok(e)
}

pub fn tool_call_result(r: proto::ToolCallResultRequest) -> Result<Event, ApiError> {
    require_tool(&r.tool_name)?;
    let mut e = Event::new(EventKind::ToolCallResult, context(r.context));
    e.arguments = parse_arguments("arguments_json", &r.arguments_json)?;
    e.tool_name = r.tool_name;
    e.output = r.output;
    e.is_error = r.is_error;
    Ok(e)
}

pub fn llm_before(r: proto::LlmBeforeRequest) -> Result<Event, ApiError> {
    let mut e = Event::new(EventKind::LlmBefore, context(r.context));
    e.messages = r
        .messages
        .into_iter()
        .map(|m| event::Message {
            role: m.role,
            content: m.content,
        })
        .collect();
    for (i, p) in r.plan.into_iter().enumerate() {
        if p.tool_name.trim().is_empty() {
            return Err(ApiError::invalid(
                format!("plan[{i}].tool_name"),
                "must not be empty",
            ));
        }
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
    }
}
