//! Deep rules: the expensive, model-based checks (an LLM verifier, a classifier service, a
//! local injection scorer). They run on a bounded worker pool (`pool`), never inline in the
//! fast path; the risk router decides how long a decision waits for them. `registry` lists
//! the kinds a pack can name.

pub mod classifier;
pub mod injection;
pub mod llm;
pub mod model;
pub mod pool;
pub mod readings;
pub mod registry;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::event::EventKind;

/// What a deep rule judges: the event as text, with the fast path's redactions already
/// applied so no secret the fast rules found leaves the process.
#[derive(Debug, Clone)]
pub struct DeepInput {
    pub event: EventKind,
    pub tool_name: String,
    /// The user's original instruction, redacted.
    pub task_goal: String,
    /// One `label: text` block per field (`output: …`, `$.command: …`, `user: …`).
    pub text: String,
    /// Where the text the agent reads starts in `text`: a tool result's output, after its
    /// arguments (the agent's own, judged when the call started); 0 for other events.
    pub content_at: usize,
    /// The event's own text already held `[REDACTED:`, before the engine redacted anything:
    /// a mark in `text` may then be the sender's words, not the engine's.
    pub has_lookalike_marks: bool,
    /// The queue's byte budget, taken by the first of this event's jobs to be queued and
    /// given back when the last holder of the input lets it go: one event, one charge,
    /// however many rules read it.
    pub charge: pool::ChargeSlot,
}

impl DeepInput {
    /// The bytes this input holds, as the queue's budget counts them.
    pub fn bytes(&self) -> usize {
        self.text.len() + self.task_goal.len() + self.tool_name.len()
    }

    /// The part of `text` the agent reads (see `content_at`).
    pub fn content(&self) -> &str {
        self.text.get(self.content_at..).unwrap_or(&self.text)
    }
}

pub use crate::decision::VerdictKind;

/// A deep rule's answer. The pool maps it to a decision through the pack's thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub verdict: VerdictKind,
    /// 0 (benign) to 1 (certainly harmful).
    pub risk_score: f64,
    pub explanation: String,
    pub optimization_guidance: String,
    pub violated_policy_ids: Vec<String>,
    pub policy_tags: Vec<String>,
}

/// Why a deep rule gave no verdict. A failure is never a pass: the router resolves it by the
/// tier's fail-open or fail-closed setting, visibly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeepError {
    /// The rule did not answer within its own `timeout_ms`.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The service could not be reached or answered with an error status.
    #[error("{0}")]
    Transport(String),
    /// The service answered, but not in the agreed shape.
    #[error("malformed reply: {0}")]
    Malformed(String),
}

/// A deep rule. Implementations are built once per policy and shared by every job.
#[async_trait::async_trait]
pub trait DeepRule: Send + Sync + fmt::Debug {
    fn id(&self) -> &str;

    /// The longest the pool lets one `check` run, retries included; past it the job is a
    /// `deep_timeout`.
    fn budget(&self) -> Duration;

    /// Judges one event. Called from a pool worker; a CPU-heavy rule must move its work off
    /// the async runtime itself (`tokio::task::spawn_blocking`).
    async fn check(&self, input: Arc<DeepInput>) -> Result<Verdict, DeepError>;

    /// A local rule whose work on this input is small may answer here, on the deciding
    /// thread: a verdict in microseconds is not worth the pool's queue and two thread hops.
    /// `None` sends the job to the pool.
    fn check_inline(&self, _input: &DeepInput) -> Option<Result<Verdict, DeepError>> {
        None
    }

    /// Whether the rule reads `DeepInput::task_goal`. The goal is redacted by a scan of its
    /// own before it is quoted; a rule that never reads it spares every decision that scan.
    fn reads_goal(&self) -> bool {
        true
    }
}

/// A rule-specific setting that could not be used. `key` is relative to the rule's
/// `config` map; the pack compiler prefixes the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    pub key: String,
    pub message: String,
}

impl ConfigProblem {
    pub fn new(key: &str, message: impl Into<String>) -> ConfigProblem {
        ConfigProblem {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// Settings every deep rule takes; read by the pack compiler, not by the rules.
pub const COMMON_KEYS: &[&str] = &[
    "timeout_ms",
    "block_threshold",
    "warn_threshold",
    "action",
    "class",
];

/// Reads a string setting. Missing is `Ok(None)`; any other type is an error naming the key.
pub fn config_str(cfg: &Map<String, Value>, key: &str) -> Result<Option<String>, ConfigProblem> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ConfigProblem::new(key, "must be a string")),
    }
}

/// Reads a non-negative integer setting.
pub fn config_u64(cfg: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigProblem> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ConfigProblem::new(key, "must be a non-negative integer")),
    }
}

/// Reads a number setting.
pub fn config_f64(cfg: &Map<String, Value>, key: &str) -> Result<Option<f64>, ConfigProblem> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite())
            .map(Some)
            .ok_or_else(|| ConfigProblem::new(key, "must be a number")),
    }
}

/// How a deep rule is wired into a policy: which events and tools it judges, how its
/// verdicts map to actions, and the rule itself.
#[derive(Debug, Clone)]
pub struct DeepRuleSpec {
    pub id: String,
    pub rule: Arc<dyn DeepRule>,
    /// Event bits (`EventKind::bit`) this rule judges.
    pub events: u8,
    /// Tool globs; empty means every tool (and events without a tool).
    pub tools: Vec<crate::glob::Glob>,
    /// Verified callers in scope (empty: all, named or not).
    pub callers: Vec<crate::glob::Glob>,
    /// A risk score at or above this is a block verdict.
    pub block_threshold: f64,
    /// A risk score at or above this is a warn verdict.
    pub warn_threshold: f64,
    /// What a block verdict does (RETRY unless the pack says otherwise).
    pub action: crate::decision::Action,
    /// Jailbreak-class rules are forced onto prompts that ask about the system or try to
    /// change the assistant's capabilities, whatever their `applies_to` says.
    pub jailbreak: bool,
    /// From the rule's kind (`registry::DeepRuleKind::local`): it runs in-process with a
    /// bounded CPU cost and no I/O, so it can run inline instead of waiting for a pool worker.
    pub local: bool,
}

impl DeepRuleSpec {
    pub fn applies(&self, kind: EventKind, tool: &str, caller: &str) -> bool {
        self.events & kind.bit() != 0
            && (self.tools.is_empty() || self.tools.iter().any(|g| g.matches(tool)))
            && crate::policy::in_scope(&self.callers, caller)
    }

    /// The verdict after the pack's thresholds: the stronger of what the rule said and what
    /// its score says.
    pub fn classify(&self, v: &Verdict) -> VerdictKind {
        let by_score = if v.risk_score >= self.block_threshold {
            VerdictKind::Block
        } else if v.risk_score >= self.warn_threshold {
            VerdictKind::Warn
        } else {
            VerdictKind::Pass
        };
        v.verdict.max(by_score)
    }
}
