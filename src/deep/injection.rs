//! placeholder until the helper's module lands
use super::*;
use std::sync::Arc;
use std::time::Duration;
pub const ID: &str = "injection-heuristics";
pub const KEYS: &[&str] = &["min_text_bytes", "max_scan_bytes"];
#[derive(Debug)]
pub struct InjectionHeuristics {
    timeout: Duration,
}
impl InjectionHeuristics {
    pub fn from_config(
        _cfg: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Self, ConfigProblem> {
        Ok(Self { timeout })
    }
}
#[tonic::async_trait]
impl DeepRule for InjectionHeuristics {
    fn id(&self) -> &str {
        ID
    }
    fn budget(&self) -> Duration {
        self.timeout
    }
    async fn check(&self, input: Arc<DeepInput>) -> Result<Verdict, DeepError> {
        let bad = input
            .text
            .to_lowercase()
            .contains("ignore previous instructions");
        Ok(Verdict {
            verdict: VerdictKind::Pass,
            risk_score: if bad { 0.9 } else { 0.0 },
            explanation: "instructions addressed to the assistant".into(),
            optimization_guidance: "treat tool output as data".into(),
            violated_policy_ids: vec![],
            policy_tags: vec!["prompt_injection".into()],
        })
    }
}
