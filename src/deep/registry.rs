//! The registry of deep-rule kinds: the one table that says which `async_rules[].id` a pack
//! may name, which settings each kind takes, its defaults, whether it runs in-process, and
//! how to build it. The pack compiler looks ids up here and nowhere else, so adding a kind
//! is one entry, and an id without an entry is an error rather than some other rule.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{ConfigProblem, DeepRule, classifier, injection, llm, model};

/// Which prompts a rule is forced onto (see `DeepRuleSpec::jailbreak`); the pack's `class`
/// setting overrides a kind's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeepClass {
    /// Also runs on prompts that ask about the system or try to change the assistant's
    /// capabilities, whatever the rule's `applies_to` says.
    Jailbreak,
    /// Runs only where `applies_to` and `tools` say.
    Content,
}

impl DeepClass {
    pub fn parse(s: &str) -> Option<DeepClass> {
        match s {
            "jailbreak" => Some(DeepClass::Jailbreak),
            "content" => Some(DeepClass::Content),
            _ => None,
        }
    }
}

/// A built rule plus warnings about settings that work but probably not as intended. Keys
/// in both are relative to the rule's `config` map.
pub type BuiltDeepRule = (Arc<dyn DeepRule>, Vec<ConfigProblem>);

/// Builds a rule from its `config` map (common keys included, shorthands already folded in)
/// and its per-call timeout, already read by the compiler from `timeout_ms`.
pub type BuildDeepRule = fn(&Map<String, Value>, Duration) -> Result<BuiltDeepRule, ConfigProblem>;

/// One kind of deep rule a pack can name.
#[derive(Clone, Copy)]
pub struct DeepRuleKind {
    /// The `async_rules[].id` that selects this kind.
    pub id: &'static str,
    /// Rule-specific `config` keys; any other key besides `COMMON_KEYS` is warned about and
    /// ignored.
    pub keys: &'static [&'static str],
    /// The config key the rule-level `endpoint:` shorthand fills when the pack does not set it
    /// there itself.
    pub endpoint_key: &'static str,
    /// Used when the pack sets no `timeout_ms`.
    pub default_timeout: Duration,
    /// Used when the pack sets no `class`.
    pub default_class: DeepClass,
    /// Runs in-process, CPU-bound with a bounded cost and no I/O, so it may run inline
    /// rather than on the pool; false for anything that calls a service.
    pub local: bool,
    pub build: BuildDeepRule,
}

// By hand: the derived form would print `build` as a bare address.
impl fmt::Debug for DeepRuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeepRuleKind")
            .field("id", &self.id)
            .field("keys", &self.keys)
            .field("endpoint_key", &self.endpoint_key)
            .field("default_timeout", &self.default_timeout)
            .field("default_class", &self.default_class)
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

/// Every deep-rule kind, in the order error messages list them.
pub const DEEP_RULE_KINDS: &[DeepRuleKind] = &[
    DeepRuleKind {
        id: llm::ID,
        keys: llm::KEYS,
        // The design's `endpoint` is the verifier's OpenAI-style base url.
        endpoint_key: "base_url",
        default_timeout: Duration::from_millis(2000),
        default_class: DeepClass::Jailbreak,
        local: false,
        build: build_llm_verifier,
    },
    DeepRuleKind {
        id: classifier::ID,
        keys: classifier::KEYS,
        endpoint_key: "endpoint",
        default_timeout: Duration::from_millis(500),
        default_class: DeepClass::Content,
        local: false,
        build: build_grpc_classifier,
    },
    DeepRuleKind {
        id: injection::ID,
        keys: injection::KEYS,
        // Takes no endpoint: a shorthand one lands on a key the rule does not know, and is
        // warned about as such.
        endpoint_key: "endpoint",
        default_timeout: Duration::from_millis(1000),
        default_class: DeepClass::Jailbreak,
        local: true,
        build: build_injection_heuristics,
    },
    DeepRuleKind {
        id: model::ID,
        keys: model::KEYS,
        endpoint_key: "endpoint",
        default_timeout: Duration::from_millis(1000),
        // Trained on what agents read, not on what users ask: forced onto a prompt about
        // the system prompt, it flagged ordinary questions ("how do I write a system
        // prompt for my bot?").
        default_class: DeepClass::Content,
        local: true,
        build: build_injection_model,
    },
];

/// A pack named a deep rule no entry of `DEEP_RULE_KINDS` has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown deep rule id `{id}` (known: {})", known_ids())]
pub struct UnknownDeepRule {
    pub id: String,
}

/// The kind a pack's `async_rules[].id` selects.
pub fn deep_rule_kind(id: &str) -> Result<&'static DeepRuleKind, UnknownDeepRule> {
    DEEP_RULE_KINDS
        .iter()
        .find(|k| k.id == id)
        .ok_or_else(|| UnknownDeepRule { id: id.to_string() })
}

fn known_ids() -> String {
    DEEP_RULE_KINDS
        .iter()
        .map(|k| k.id)
        .collect::<Vec<_>>()
        .join(", ")
}

fn build_llm_verifier(
    cfg: &Map<String, Value>,
    timeout: Duration,
) -> Result<BuiltDeepRule, ConfigProblem> {
    let (rule, warnings) = llm::LlmVerifier::from_config(cfg, timeout)?;
    Ok((Arc::new(rule), warnings))
}

fn build_grpc_classifier(
    cfg: &Map<String, Value>,
    timeout: Duration,
) -> Result<BuiltDeepRule, ConfigProblem> {
    let rule = classifier::GrpcClassifier::from_config(cfg, timeout)?;
    Ok((Arc::new(rule), Vec::new()))
}

fn build_injection_heuristics(
    cfg: &Map<String, Value>,
    timeout: Duration,
) -> Result<BuiltDeepRule, ConfigProblem> {
    let rule = injection::InjectionHeuristics::from_config(cfg, timeout)?;
    Ok((Arc::new(rule), Vec::new()))
}

fn build_injection_model(
    cfg: &Map<String, Value>,
    timeout: Duration,
) -> Result<BuiltDeepRule, ConfigProblem> {
    let rule = model::InjectionModel::from_config(cfg, timeout)?;
    Ok((Arc::new(rule), Vec::new()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_unique_and_match_the_rules_they_build() {
        let mut seen = HashSet::new();
        for kind in DEEP_RULE_KINDS {
            assert!(seen.insert(kind.id), "duplicate kind `{}`", kind.id);
            assert_eq!(deep_rule_kind(kind.id).unwrap().id, kind.id);
        }
        // Each constructor builds its own rule, not a neighbour's.
        let built = |id: &str, cfg: Value| {
            let kind = deep_rule_kind(id).unwrap();
            let (rule, _) = (kind.build)(cfg.as_object().unwrap(), kind.default_timeout)
                .unwrap_or_else(|p| panic!("{id}: {}: {}", p.key, p.message));
            rule.id().to_string()
        };
        let cfg = serde_json::json!({"base_url": "http://127.0.0.1:1", "model": "m"});
        assert_eq!(built(llm::ID, cfg), llm::ID);
        let cfg = serde_json::json!({"endpoint": "http://127.0.0.1:1"});
        assert_eq!(built(classifier::ID, cfg), classifier::ID);
        assert_eq!(built(injection::ID, serde_json::json!({})), injection::ID);
        assert_eq!(built(model::ID, serde_json::json!({})), model::ID);
    }

    #[test]
    fn only_the_in_process_scorers_are_local() {
        let local: Vec<&str> = DEEP_RULE_KINDS
            .iter()
            .filter(|k| k.local)
            .map(|k| k.id)
            .collect();
        assert_eq!(local, vec![injection::ID, model::ID]);
        assert!(!deep_rule_kind(llm::ID).unwrap().local);
        assert!(!deep_rule_kind(classifier::ID).unwrap().local);
    }

    #[test]
    fn unknown_id_lists_the_known_ones() {
        let err = deep_rule_kind("foo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown deep rule id `foo` (known: llm-verifier, grpc-classifier, injection-heuristics, injection-model)"
        );
    }
}
