//! Proxy mode: toolgate stands where the agent's tool server was, forwards the traffic to
//! the real server and guards every tool call and tool result on the way through.

pub mod context;
pub mod definitions;
pub mod error;
mod guard;
mod h2_client;
pub mod jsonrpc;
mod listing;
pub mod mcp;
pub mod outstanding;
mod relay;
pub mod sse;
pub mod tool_service;
mod upstream;

use crate::decision::{Action, Decision, RedactionSpan};

/// What the proxy needs of a Decision to act on it; taken in `Telemetry::record`'s view so
/// the decision itself goes to the log thread uncopied.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub action: Action,
    pub decision_id: String,
    pub rule_ids: Vec<String>,
    pub pause_id: Option<String>,
    /// What the model is told when the call is blocked: the RETRY corrective message, the
    /// PAUSE reason with its pause id, or the STOP user message.
    pub message: String,
    pub redacted_arguments_json: Option<String>,
    /// The whole output with every redaction applied.
    pub redacted_output: Option<String>,
    /// The redactions of the output, sorted and disjoint, so a result made of several text
    /// items can be redacted item by item.
    pub output_spans: Vec<RedactionSpan>,
}

impl Verdict {
    pub fn of(d: &Decision) -> Verdict {
        let message = match d.action {
            // Nothing to tell the model: the call or result goes on.
            Action::Allow | Action::Redact => Some(String::new()),
            Action::Retry => d.retry.as_ref().map(|r| r.corrective_message.clone()),
            Action::Pause => d.pause.as_ref().map(|p| {
                format!(
                    "{} (paused for human approval, pause id {})",
                    p.reason, p.pause_id
                )
            }),
            Action::Stop => d.stop.as_ref().map(|s| s.user_message.clone()),
        }
        .unwrap_or_else(|| {
            format!(
                "this tool call was blocked by the safety policy ({})",
                d.action
            )
        });
        let mut output_spans: Vec<RedactionSpan> = d
            .redactions
            .iter()
            .filter(|s| s.field_path == "output")
            .cloned()
            .collect();
        output_spans.sort_by_key(|s| (s.start, s.end));
        Verdict {
            action: d.action,
            decision_id: d.decision_id.clone(),
            rule_ids: d.hits.iter().map(|h| h.rule_id.clone()).collect(),
            pause_id: d.pause.as_ref().map(|p| p.pause_id.clone()),
            message,
            redacted_arguments_json: d.redacted_arguments_json.clone(),
            redacted_output: d.redacted_output.clone(),
            output_spans,
        }
    }

    /// RETRY, PAUSE and STOP keep the call (or its result) from going on.
    pub fn blocks(&self) -> bool {
        matches!(self.action, Action::Retry | Action::Pause | Action::Stop)
    }
}
