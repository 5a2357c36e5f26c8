//! The policy pack as written: YAML read into a tree that remembers line numbers,
//! `environments:` overlays deep-merged, then typed serde shapes (`Raw*`) with unknown keys
//! rejected and every error naming its path and line.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

/// Limits on the YAML reader so a hostile pack cannot exhaust memory (alias bombs, depth).
const MAX_PACK_BYTES: usize = 4 * 1024 * 1024;

/// One problem found in a pack, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `sync_rules[3].regex`; empty for the whole document.
    pub path: String,
    pub line: Option<u64>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.path.is_empty()) {
            (Some(l), false) => write!(f, "line {l}: {}: {}", self.path, self.message),
            (Some(l), true) => write!(f, "line {l}: {}", self.message),
            (None, false) => write!(f, "{}: {}", self.path, self.message),
            (None, true) => write!(f, "{}", self.message),
        }
    }
}

/// A YAML value that keeps the line each node was written on.
#[derive(Debug, Clone)]
pub struct Node {
    pub line: u64,
    pub value: NodeValue,
}

#[derive(Debug, Clone)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E>(self) -> Result<NodeValue, E> {
                Ok(NodeValue::Null)
            }
            fn visit_none<E>(self) -> Result<NodeValue, E> {
                Ok(NodeValue::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
                NodeValue::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<NodeValue, E> {
                Ok(NodeValue::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<NodeValue, E> {
                Ok(NodeValue::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeValue, E> {
                i64::try_from(v)
                    .map(NodeValue::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<NodeValue, E> {
                Ok(NodeValue::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<NodeValue, E> {
                Ok(NodeValue::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<NodeValue, E> {
                Ok(NodeValue::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<NodeValue, A::Error> {
                let mut items = Vec::new();
                while let Some(s) = a.next_element::<Spanned<NodeValue>>()? {
                    items.push(Node {
                        line: s.referenced.line(),
                        value: s.value,
                    });
                }
                Ok(NodeValue::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<NodeValue, A::Error> {
                let mut items = Vec::new();
                while let Some(k) = a.next_key::<KeyString>()? {
                    let s = a.next_value::<Spanned<NodeValue>>()?;
                    items.push((
                        k.0,
                        Node {
                            line: s.referenced.line(),
                            value: s.value,
                        },
                    ));
                }
                Ok(NodeValue::Map(items))
            }
        }
        d.deserialize_any(V)
    }
}

/// Map keys as strings, whatever scalar YAML wrote them as (`200: x` → `"200"`).
struct KeyString(String);

impl<'de> Deserialize<'de> for KeyString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NodeValue::deserialize(d)? {
            NodeValue::Str(s) => Ok(KeyString(s)),
            NodeValue::Int(i) => Ok(KeyString(i.to_string())),
            NodeValue::Bool(b) => Ok(KeyString(b.to_string())),
            NodeValue::Float(f) => Ok(KeyString(f.to_string())),
            NodeValue::Null => Ok(KeyString("null".into())),
            NodeValue::Seq(_) | NodeValue::Map(_) => {
                Err(de::Error::custom("map keys must be scalars"))
            }
        }
    }
}

impl Node {
    /// A tree built from JSON (a database row, not a file): every line is 0.
    pub fn from_json(v: &Value) -> Node {
        let value = match v {
            Value::Null => NodeValue::Null,
            Value::Bool(b) => NodeValue::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => NodeValue::Int(i),
                None => NodeValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => NodeValue::Str(s.clone()),
            Value::Array(items) => NodeValue::Seq(items.iter().map(Node::from_json).collect()),
            Value::Object(m) => NodeValue::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), Node::from_json(v)))
                    .collect(),
            ),
        };
        Node { line: 0, value }
    }

    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(items) => {
                let mut m = Map::new();
                for (k, v) in items {
                    m.insert(k.clone(), v.to_json());
                }
                Value::Object(m)
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The line of the node a path like `sync_rules[3].regex` names, or of its nearest
    /// existing ancestor.
    pub fn line_of(&self, path: &str) -> u64 {
        let mut node = self;
        for seg in path_segments(path) {
            let next = match (&node.value, seg) {
                (NodeValue::Map(items), Seg::Key(k)) => {
                    items.iter().find(|(key, _)| key == k).map(|(_, v)| v)
                }
                (NodeValue::Seq(items), Seg::Index(i)) => items.get(i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node.line
    }

    /// Deep merge of an overlay: maps merge key by key; lists of maps that all have an `id`
    /// merge by id (overlay entries update or append); anything else is replaced.
    pub fn merge(&mut self, overlay: Node) {
        match (&mut self.value, overlay.value) {
            (NodeValue::Map(base), NodeValue::Map(over)) => {
                for (k, v) in over {
                    match base.iter_mut().find(|(bk, _)| *bk == k) {
                        Some((_, bv)) => bv.merge(v),
                        None => base.push((k, v)),
                    }
                }
            }
            (NodeValue::Seq(base), NodeValue::Seq(over))
                if all_have_id(base) && all_have_id(&over) =>
            {
                for v in over {
                    let id = id_of(&v);
                    match base.iter_mut().find(|b| id_of(b) == id) {
                        Some(b) => b.merge(v),
                        None => base.push(v),
                    }
                }
            }
            (slot, v) => {
                *slot = v;
                self.line = overlay.line;
            }
        }
    }
}

fn id_of(n: &Node) -> Option<&str> {
    match n.get("id").map(|v| &v.value) {
        Some(NodeValue::Str(s)) => Some(s),
        _ => None,
    }
}

fn all_have_id(items: &[Node]) -> bool {
    items.iter().all(|n| id_of(n).is_some())
}

enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Splits `a.b[2].c` into segments (as serde_path_to_error prints paths).
fn path_segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                out.push(Seg::Key(&rest[..i]));
            }
            rest = &rest[i..];
            while let Some(r) = rest.strip_prefix('[') {
                let Some(close) = r.find(']') else { break };
                if let Ok(n) = r[..close].parse() {
                    out.push(Seg::Index(n));
                }
                rest = &r[close + 1..];
            }
        } else if !rest.is_empty() {
            out.push(Seg::Key(rest));
        }
    }
    out
}

/// How packs and scenario files are read: YAML 1.2 booleans. YAML 1.1 (serde-saphyr's
/// default) also reads `on`, `off`, `yes`, `no`, `y` and `n` as booleans, which turns the rule
/// key `on:` into `true:` and a value such as `kinds: [no]` into `false`; only `true` and
/// `false` (in any of their three spellings) are booleans here.
///
/// Nesting is capped well below the parser's own limit: each level costs tens of KiB of
/// stack in a debug build, and a pack is reloaded on a 2 MiB runtime thread, so a file nested
/// 60 levels deep would overflow it (the fuzz target found this). Real packs nest under 10.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        budget: serde_saphyr::budget! { max_depth: MAX_YAML_DEPTH },
    }
}

/// The deepest nesting a pack or scenario file may have.
const MAX_YAML_DEPTH: usize = 24;

/// Reads YAML text into a line-aware tree.
pub fn parse_yaml(text: &str) -> Result<Node, Problem> {
    if text.len() > MAX_PACK_BYTES {
        return Err(Problem {
            path: String::new(),
            line: None,
            message: format!(
                "pack is {} bytes, over the {MAX_PACK_BYTES} limit",
                text.len()
            ),
        });
    }
    let root: Spanned<NodeValue> = serde_saphyr::from_str_with_options(text, yaml_options())
        .map_err(|e| Problem {
            path: String::new(),
            line: e.location().map(|l| l.line()),
            message: format!("invalid YAML: {}", first_line(&e.to_string())),
        })?;
    Ok(Node {
        line: root.referenced.line(),
        value: root.value,
    })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// `version: 1.0` and `version: "1.0"` both mean the string `1.0`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Version(pub String);

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Version(s)),
            Value::Number(n) => Ok(Version(n.to_string())),
            other => Err(de::Error::custom(format!(
                "expected a version string, found {other}"
            ))),
        }
    }
}

/// A list that may also be written as a single item (`regex: "x"` or `regex: [x, y]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OneOrMany(pub Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            One(String),
            Many(Vec<String>),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::One(s) => OneOrMany(vec![s]),
            Repr::Many(v) => OneOrMany(v),
        })
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPack {
    pub policy_pack: String,
    pub version: Version,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub sync_rules: Vec<RawRule>,
    #[serde(default)]
    pub async_rules: Vec<RawAsyncRule>,
    #[serde(default)]
    pub tool_risks: BTreeMap<String, String>,
    #[serde(default)]
    pub risk_router: RawRiskRouter,
    #[serde(default)]
    pub sessions: RawSessions,
    #[serde(default)]
    pub approvals: RawApprovals,
    #[serde(default)]
    pub retry: RawRetry,
    #[serde(default)]
    pub rate_limits: Vec<RawRateLimit>,
    #[serde(default)]
    pub provenance: RawProvenance,
    #[serde(default)]
    pub sinks: Vec<RawSink>,
    #[serde(default)]
    pub flows: Vec<RawFlow>,
    /// Per-tenant rules kept in PostgreSQL, overlaid on this pack.
    #[serde(default)]
    pub tenants: Option<RawTenants>,
    /// How the inline proxies (gRPC ToolService, MCP) act on what they decide.
    #[serde(default)]
    pub proxy: RawProxy,
    /// Who may ask (by verified identity), and tool tiers for some callers.
    #[serde(default)]
    pub callers: RawCallers,
    /// Identities (globs) that may resolve pauses.
    #[serde(default)]
    pub approvers: Option<Vec<String>>,
    /// Pack-wide parallelism hint from the Python framework; toolgate's scan is one pass, so
    /// it has no meaning here and is ignored with a warning.
    #[serde(default)]
    pub parallel: Option<Value>,
    /// Consumed by the overlay step before typed parsing; kept so the key is known.
    #[serde(default)]
    pub environments: Option<Value>,
    /// Free-form labels for humans and dashboards.
    #[serde(default)]
    pub metadata: BTreeMap<String, Value>,
}

/// `tenants:`: where the per-tenant rules live and how long a tenant's rows are trusted
/// without a change notification.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTenants {
    /// The environment variable holding the PostgreSQL URL (never the URL itself: it
    /// carries a password).
    pub database_url_env: Option<String>,
    pub cache_ttl_s: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawGateway {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub sync: RawSync,
    #[serde(default, rename = "async")]
    pub async_: RawAsync,
    /// Largest gRPC message accepted, in bytes.
    #[serde(default)]
    pub max_message_bytes: Option<u64>,
    #[serde(default)]
    pub parallel: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSync {
    pub timeout_ms: Option<f64>,
    pub fail_open: Option<RawFailOpen>,
    #[serde(default)]
    pub parallel: Option<Value>,
}

/// `gateway.sync.fail_open`: `true`, `false` or the word `unscanned`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RawFailOpen {
    Bool(bool),
    Word(String),
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAsync {
    pub enabled: Option<bool>,
    pub fail_open: Option<bool>,
    pub workers: Option<u32>,
    pub queue_capacity: Option<u32>,
    /// MiB of event text the queued jobs may hold at once, all jobs of one event counted once.
    pub queue_max_mib: Option<u32>,
    #[serde(default)]
    pub parallel: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawEffects {
    #[serde(default)]
    pub flag_trajectory: bool,
    #[serde(default)]
    pub increment_strike: bool,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    pub id: String,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub description: Option<String>,
    /// Custom rule: one regex or a list.
    #[serde(default)]
    pub regex: Option<OneOrMany>,
    /// Custom rule: literal keywords (matched case-insensitively, on word boundaries).
    #[serde(default)]
    pub keywords: Option<Vec<String>>,
    #[serde(default)]
    pub case_sensitive: Option<bool>,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default, alias = "risk", alias = "risk_level")]
    pub level: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Optional RETRY guidance ("Please adjust your response considering: …").
    #[serde(default)]
    pub guidance: Option<String>,
    /// The step a planner should take instead when this rule blocks (safety review API).
    #[serde(default)]
    pub fallback_step: Option<String>,
    #[serde(default, alias = "on", alias = "events")]
    pub applies_to: Option<Vec<String>>,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Verified caller identities (globs) the rule applies to; absent: every caller.
    #[serde(default)]
    pub callers: Option<Vec<String>>,
    #[serde(default)]
    pub fields: Option<Vec<String>>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub reversible: Option<bool>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default, alias = "policy_ids")]
    pub violated_policy_ids: Option<Vec<String>>,
    #[serde(default)]
    pub replacement: Option<String>,
    /// Name of what a custom rule finds, used in redactions (`kind: employee_id`).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub effects: Option<RawEffects>,
    /// Rule-specific settings; open by design (packs from the Python framework put their own
    /// keys here). Keys a rule does not know produce a warning, not an error.
    #[serde(default)]
    pub config: Map<String, Value>,
    #[serde(default)]
    pub parallel: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAsyncRule {
    pub id: String,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default, alias = "on", alias = "events")]
    pub applies_to: Option<Vec<String>>,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Verified caller identities (globs) the rule applies to; absent: every caller.
    #[serde(default)]
    pub callers: Option<Vec<String>>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub config: Map<String, Value>,
    #[serde(default)]
    pub parallel: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRiskRouter {
    pub high_risk_wait_ms: Option<u64>,
    pub medium_risk_wait_ms: Option<u64>,
    pub critical_fail_closed: Option<bool>,
    #[serde(default)]
    pub require_approval: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSessions {
    pub strike_limit: Option<u32>,
    pub ttl_s: Option<u64>,
    pub max_sessions: Option<u64>,
    /// `memory` (one process) or `redis` (shared by every replica).
    pub backend: Option<String>,
    /// With `redis`: the environment variable holding the Redis URL.
    pub url_env: Option<String>,
    /// With `redis`: how long one round trip may take before the fail mode applies.
    pub timeout_ms: Option<u64>,
    /// With `redis`: tool tiers whose calls STOP while Redis cannot be reached; the others
    /// go on with this replica's own view of the session, with a hit saying so.
    pub fail_closed_tiers: Option<Vec<String>>,
    /// With `redis`: the prefix of every key toolgate writes.
    pub key_prefix: Option<String>,
    /// With `redis`: an environment variable holding a secret that keys the hashes of
    /// flow values (else they are keyed by `key_prefix`).
    pub hash_key_env: Option<String>,
}

/// `proxy:`: what the inline proxies do with a PAUSE, and with tool definitions.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    /// `return` (answer at once with the pause id) or `hold` (wait for the human).
    pub on_pause: Option<String>,
    pub hold_timeout_s: Option<u64>,
    #[serde(default)]
    pub tool_definitions: RawToolDefinitions,
}

/// `proxy.tool_definitions:`: MCP `tools/list` answers.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawToolDefinitions {
    /// A description or schema that addresses the model: `hide` or `flag`.
    pub poisoned: Option<String>,
    /// A definition that changed since first seen: `block` or `flag`.
    pub changed: Option<String>,
}

/// `callers:`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCallers {
    /// Identity globs the pack knows; absent: every verified identity.
    pub known: Option<Vec<String>>,
    /// `allow` (the default) or `deny`: what a caller outside `known`, or with no verified
    /// identity, gets.
    pub unknown: Option<String>,
    /// Tool tiers for some callers, looked up before `tool_risks`.
    #[serde(default)]
    pub tool_risks: Vec<RawCallerTiers>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCallerTiers {
    #[serde(default)]
    pub callers: Vec<String>,
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawApprovals {
    pub ttl_s: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    /// Names the hit; `rate-limit-N` when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Tool globs; empty means every tool call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// `session` (default), `tenant` or `global`.
    #[serde(default)]
    pub per: Option<String>,
    pub burst: Option<u32>,
    pub per_minute: Option<f64>,
    /// What a call over the limit gets: `retry` (default), `pause` or `stop`.
    #[serde(default)]
    pub action: Option<String>,
}

/// `provenance:`: what counts as untrusted, what is always allowed, and the actions of the
/// flow stage's own rules.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProvenance {
    pub untrusted_tools: Option<Vec<String>>,
    pub trusted_tools: Option<Vec<String>>,
    pub untrusted_roles: Option<Vec<String>>,
    pub private_tools: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
    pub untrusted_destination_action: Option<String>,
    pub tainted_sink_action: Option<String>,
    pub trifecta_action: Option<String>,
    pub max_values: Option<u32>,
}

/// One entry of `sinks:`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSink {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub destinations: Vec<String>,
}

/// One entry of `flows:`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub id: String,
    #[serde(default)]
    pub from: RawFlowFrom,
    #[serde(default)]
    pub to: RawFlowTo,
    pub action: Option<String>,
    #[serde(default, alias = "risk", alias = "risk_level")]
    pub level: Option<String>,
    pub within: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFlowFrom {
    pub events: Option<Vec<String>>,
    #[serde(default)]
    pub tools: Vec<String>,
    pub when: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFlowTo {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    pub max_attempts: Option<u32>,
    /// What a RETRY becomes past `max_attempts`: `stop` (default) or `pause`.
    pub escalate_to: Option<String>,
}

/// Parses pack text: YAML → line-aware tree → overlay for `env` → typed shape. On failure
/// every problem carries its path and line.
pub fn read_pack(text: &str, env: Option<&str>) -> Result<(RawPack, Node), Vec<Problem>> {
    read_pack_with(text, env, None)
}

/// The pack's tree with its overlays merged (the environment's, then `extra`), before it is
/// read into typed shapes.
pub fn merged_tree(
    text: &str,
    env: Option<&str>,
    extra: Option<Node>,
) -> Result<Node, Vec<Problem>> {
    let mut root = parse_yaml(text).map_err(|p| vec![p])?;
    if !matches!(root.value, NodeValue::Map(_)) {
        return Err(vec![Problem {
            path: String::new(),
            line: Some(root.line),
            message: "a policy pack must be a YAML mapping".into(),
        }]);
    }
    if let Some(env) = env {
        let overlay = root
            .get("environments")
            .and_then(|e| e.get(env))
            .cloned()
            .ok_or_else(|| {
                vec![Problem {
                    path: format!("environments.{env}"),
                    line: root.get("environments").map(|n| n.line),
                    message: format!("no overlay for environment `{env}`"),
                }]
            })?;
        if !matches!(overlay.value, NodeValue::Map(_)) {
            return Err(vec![Problem {
                path: format!("environments.{env}"),
                line: Some(overlay.line),
                message: "an environment overlay must be a mapping".into(),
            }]);
        }
        root.merge(overlay);
    }
    if let Some(extra) = extra {
        root.merge(extra);
    }
    Ok(root)
}

/// `read_pack`, with one more overlay merged last (a tenant's rows), after the environment's.
pub fn read_pack_with(
    text: &str,
    env: Option<&str>,
    extra: Option<Node>,
) -> Result<(RawPack, Node), Vec<Problem>> {
    let root = merged_tree(text, env, extra)?;
    let json = root.to_json();
    let raw: RawPack = serde_path_to_error::deserialize(json).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        vec![Problem {
            line: Some(root.line_of(&path)),
            message: e.inner().to_string(),
            path,
        }]
    })?;
    Ok((raw, root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_tracked_through_paths() {
        let text =
            "policy_pack: p\nversion: 1.0\nsync_rules:\n  - id: a\n  - id: b\n    regex: \"(\"\n";
        let (raw, root) = read_pack(text, None).unwrap();
        assert_eq!(raw.version.0, "1.0");
        assert_eq!(root.line_of("sync_rules[1].regex"), 6);
        assert_eq!(root.line_of("sync_rules[1]"), 5);
        assert_eq!(root.line_of("sync_rules[0].id"), 4);
    }

    #[test]
    fn unknown_key_names_path_and_line() {
        let text =
            "policy_pack: p\nversion: \"1\"\ngateway:\n  sync:\n    timeout_ms: 5\n    bogus: 1\n";
        let err = read_pack(text, None).unwrap_err();
        assert_eq!(err[0].path, "gateway.sync.bogus");
        assert!(err[0].message.contains("bogus"), "{}", err[0].message);
        assert_eq!(err[0].line, Some(6));
    }

    #[test]
    fn environment_overlay_deep_merges_and_merges_rules_by_id() {
        let text = r#"
policy_pack: p
version: "1"
gateway: { mode: shadow, sync: { timeout_ms: 5, fail_open: true } }
sync_rules:
  - { id: secrets }
  - { id: pii, config: { allow_emails: ["a@b.c"] } }
environments:
  prod:
    gateway: { mode: enforce }
    sync_rules:
      - { id: pii, enabled: false }
      - { id: sudo }
"#;
        let (raw, _) = read_pack(text, Some("prod")).unwrap();
        assert_eq!(raw.gateway.mode.as_deref(), Some("enforce"));
        assert_eq!(raw.gateway.sync.timeout_ms, Some(5.0));
        let ids: Vec<_> = raw.sync_rules.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, vec!["secrets", "pii", "sudo"]);
        assert_eq!(raw.sync_rules[1].enabled, Some(false));
        assert!(raw.sync_rules[1].config.contains_key("allow_emails"));
        let err = read_pack(text, Some("staging")).unwrap_err();
        assert!(err[0].message.contains("staging"));
    }

    #[test]
    fn yaml_1_1_boolean_words_are_strings_and_true_false_are_booleans() {
        let text = "on: 1\noff: 2\nyes: 3\nno: 4\ny: 5\nn: 6\nOn: 7\nNO: 8\n\
                    a: true\nb: false\nc: True\nd: FALSE\ne: yes\nf: off\ng: [on, n]\n";
        let root = parse_yaml(text).unwrap();
        let NodeValue::Map(items) = &root.value else {
            panic!("not a map: {root:?}");
        };
        let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "on", "off", "yes", "no", "y", "n", "On", "NO", "a", "b", "c", "d", "e", "f", "g"
            ]
        );
        let json = root.to_json();
        assert_eq!(json["on"], 1);
        assert_eq!(json["n"], 6);
        for (key, want) in [("a", true), ("b", false), ("c", true), ("d", false)] {
            assert_eq!(json[key], Value::Bool(want), "{key}");
        }
        assert_eq!(json["e"], "yes");
        assert_eq!(json["f"], "off");
        assert_eq!(json["g"], serde_json::json!(["on", "n"]));
    }

    #[test]
    fn a_rule_scoped_with_on_reads_its_events() {
        let text = "policy_pack: p\nversion: \"1\"\nsync_rules:\n  - id: mine\n    keywords: [x]\n    on: [tool_call_start]\nasync_rules:\n  - id: injection-heuristics\n    on: [tool_call_result]\n";
        let (raw, _) = read_pack(text, None).unwrap();
        assert_eq!(
            raw.sync_rules[0].applies_to,
            Some(vec!["tool_call_start".to_string()])
        );
        assert_eq!(
            raw.async_rules[0].applies_to,
            Some(vec!["tool_call_result".to_string()])
        );
    }

    #[test]
    fn a_yes_where_a_boolean_belongs_is_an_error_naming_path_and_line() {
        // `gateway.sync.fail_open` also takes a word (`unscanned`); the async one is a bool.
        let text = "policy_pack: p\nversion: \"1\"\ngateway:\n  async:\n    fail_open: yes\n";
        let err = read_pack(text, None).unwrap_err();
        assert_eq!(err[0].path, "gateway.async.fail_open");
        assert_eq!(err[0].line, Some(5));
        assert!(err[0].message.contains("yes"), "{}", err[0].message);
        let (raw, _) = read_pack(&text.replace("yes", "true"), None).unwrap();
        assert_eq!(raw.gateway.async_.fail_open, Some(true));
    }

    #[test]
    fn bad_yaml_has_a_line() {
        let err = read_pack("policy_pack: p\nversion: [\n", None).unwrap_err();
        assert!(err[0].line.is_some());
        assert!(err[0].message.starts_with("invalid YAML"));
    }
}
