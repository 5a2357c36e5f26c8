//! Policy packs: the YAML shape (`pack`), its compiled runtime form (`compile`), the atomic
//! snapshot the server reads (`store`) and the reload loop (`reload`).

pub mod compile;
pub mod pack;
pub mod reload;
pub mod store;

use std::time::{Duration, SystemTime};

use crate::decision::{Action, RiskLevel};
use crate::router::ToolTiers;
use crate::rules::fast::FastRuleSet;

pub use crate::rules::budget::Allowance;
pub use compile::{CompileError, compile, compile_file, default_policy};
pub use pack::Problem;

/// The embedded default pack: what `serve` and `check` use without `--policy`.
pub const DEFAULT_PACK: &str = include_str!("../../deploy/policies/default.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Shadow,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// The fast scan's work budget in thread CPU time: `timeout_ms` whatever the size, plus
    /// an allowance per MiB and per field, so a scan that works at its usual rate always
    /// finishes and only work out of proportion to the input runs it out.
    pub allowance: Allowance,
    /// False: no budget (offline `check` and `test`, which judge rules, not machine speed).
    pub limited: bool,
    /// What a scan that did not finish means for the part it did not read.
    pub fail_open: SyncFailMode,
}

/// `gateway.sync.fail_open`. Whatever the mode, text the scan did not clear is withheld from
/// the decision's redacted views and from the decision log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncFailMode {
    /// `false`: the event is STOPped.
    Closed,
    /// `true` (the default): unscanned output, messages and chunks are withheld (REDACT with
    /// `[WITHHELD:unscanned]`); a tool call whose arguments were not all scanned is STOPped,
    /// since a call cannot be forwarded with part of it withheld.
    Withhold,
    /// `unscanned`: the caller is told ALLOW and may pass the unscanned part on as it is.
    /// Only a pack that says so gets this.
    Unscanned,
}

impl SyncFailMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncFailMode::Closed => "false",
            SyncFailMode::Withhold => "true",
            SyncFailMode::Unscanned => "unscanned",
        }
    }
}

#[derive(Debug, Clone)]
pub struct AsyncConfig {
    pub enabled: bool,
    pub fail_open: bool,
    pub workers: u32,
    pub queue_capacity: u32,
    /// Bytes of event text queued jobs may hold at once (each event counted once).
    pub queue_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct RouterConfig {
    pub high_risk_wait: Duration,
    pub medium_risk_wait: Duration,
    pub critical_fail_closed: bool,
    /// Tiers whose allowed calls become a PAUSE for a human.
    pub require_approval: Vec<RiskLevel>,
}

#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub strike_limit: u32,
    pub ttl: Duration,
    pub max_sessions: u64,
    /// Session state shared by every replica through Redis; `None` keeps it in memory.
    pub shared: Option<SharedSessions>,
}

/// `sessions.backend: redis`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedSessions {
    pub url_env: String,
    pub timeout: Duration,
    pub fail_closed_tiers: Vec<RiskLevel>,
    pub key_prefix: String,
    /// The environment variable whose value keys flow-value hashes; `None`: the key prefix
    /// does.
    pub hash_key_env: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RetryConfig {
    pub max_attempts: u32,
    pub escalate_to: Action,
}

/// Who shares one rate-limit bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateScope {
    Session,
    Tenant,
    Global,
}

/// A token bucket per scope key: `burst` calls at once, refilled at `per_minute`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    pub id: String,
    /// Empty means every tool call.
    pub tools: Vec<crate::glob::Glob>,
    pub per: RateScope,
    pub burst: u32,
    pub per_minute: f64,
    pub action: Action,
}

impl RateLimit {
    pub fn applies(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|g| g.matches(tool))
    }
}

/// `tenants:`: per-tenant rules from PostgreSQL, overlaid on this pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantsConfig {
    /// The environment variable that holds the database URL.
    pub database_url_env: String,
    /// How long a tenant's rows are used before they are read again, when no change
    /// notification arrived in between.
    pub cache_ttl: Duration,
}

/// `callers:` and `approvers:`: who may ask, and who may resolve pauses. Identities are the
/// verified ones the connection gives (`Context::caller`), never a field of the request.
#[derive(Debug, Clone, Default)]
pub struct CallerConfig {
    /// Identities the pack knows; empty: every verified identity.
    pub known: Vec<crate::glob::Glob>,
    /// Refuse a caller outside `known`, or one with no verified identity.
    pub deny_unknown: bool,
    /// Who may resolve pauses (mTLS identities); empty: only the approver token, if set.
    pub approvers: Vec<crate::glob::Glob>,
}

impl CallerConfig {
    /// Whether this caller may ask at all.
    pub fn admits(&self, caller: &str) -> bool {
        !self.deny_unknown || (!caller.is_empty() && in_scope(&self.known, caller))
    }

    /// Whether this caller's identity is in `approvers`.
    pub fn is_approver(&self, caller: &str) -> bool {
        !caller.is_empty() && self.approvers.iter().any(|g| g.matches(caller))
    }
}

/// A `callers:` scope: empty means every caller, named or not; otherwise the caller must
/// have a verified identity that one glob matches.
pub fn in_scope(callers: &[crate::glob::Glob], caller: &str) -> bool {
    callers.is_empty() || (!caller.is_empty() && callers.iter().any(|g| g.matches(caller)))
}

/// What a proxy does when a call is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPause {
    /// Answer at once with the pause id; the agent resubmits the call with it.
    Return,
    /// Keep the call open until a human answers, the pause expires or `hold_timeout` passes.
    Hold,
}

/// What the MCP proxy does with a tool definition it does not trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionAction {
    /// Leave it listed and callable, with a decision and a warning in its description.
    Flag,
    /// Leave it out of `tools/list`.
    Hide,
    /// Leave it out of `tools/list` and refuse calls to it until a human approves.
    Block,
}

/// `proxy:`: the inline proxies' settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyConfig {
    pub on_pause: OnPause,
    pub hold_timeout: Duration,
    /// A description or schema with instructions aimed at the model.
    pub poisoned: DefinitionAction,
    /// A definition whose hash differs from the one pinned on first sight (a rug pull).
    pub changed: DefinitionAction,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            on_pause: OnPause::Return,
            hold_timeout: Duration::from_secs(300),
            poisoned: DefinitionAction::Hide,
            changed: DefinitionAction::Block,
        }
    }
}

/// A compiled, immutable policy. Requests hold an `Arc<Policy>` from start to end, so a
/// reload never changes the rules under a call in flight.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    pub version: String,
    /// First 12 hex chars of the SHA-256 of the pack text (and environment).
    pub hash: String,
    /// `version@hash`, built once: every Decision carries it.
    pub version_tag: String,
    /// Where it came from: a file path or `embedded`.
    pub source: String,
    pub env: Option<String>,
    pub mode: Mode,
    pub sync: SyncConfig,
    pub async_cfg: AsyncConfig,
    pub max_message_bytes: usize,
    pub rules: FastRuleSet,
    pub tiers: ToolTiers,
    pub router: RouterConfig,
    pub sessions: SessionConfig,
    pub approval_ttl: Duration,
    pub retry: RetryConfig,
    /// Deep rules, in pack order.
    pub deep: Vec<crate::deep::DeepRuleSpec>,
    pub rate_limits: Vec<RateLimit>,
    /// Sinks, flow rules and what counts as untrusted.
    pub flow: crate::flow::FlowConfig,
    pub tenants: Option<TenantsConfig>,
    pub proxy: ProxyConfig,
    pub callers: CallerConfig,
    /// The pack text this was compiled from: a tenant's overlay is compiled over it.
    pub text: std::sync::Arc<str>,
    /// Set on a tenant's policy: the tenant whose rows it carries.
    pub tenant: Option<String>,
    /// Non-fatal findings (ignored keys, unknown config keys) for `validate` and the log.
    pub warnings: Vec<Problem>,
    pub loaded_at: SystemTime,
}

impl Policy {
    /// The version string every Decision carries: the pack's version and content hash, so
    /// two different packs that both say `1.0` are still told apart.
    pub fn version_tag(&self) -> String {
        self.version_tag.clone()
    }
}
