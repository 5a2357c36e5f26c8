//! placeholder until the helper's module lands
use super::*;
use std::sync::Arc;
use std::time::Duration;
pub const ID: &str = "llm-verifier";
pub const KEYS: &[&str] = &[
    "base_url",
    "model",
    "api_key_env",
    "max_retries",
    "backoff_ms",
    "system_prompt",
    "max_input_bytes",
];
#[derive(Debug)]
pub struct LlmVerifier {
    timeout: Duration,
}
impl LlmVerifier {
    pub fn from_config(
        _cfg: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<(Self, Vec<ConfigProblem>), ConfigProblem> {
        Ok((Self { timeout }, vec![]))
    }
}
#[tonic::async_trait]
impl DeepRule for LlmVerifier {
    fn id(&self) -> &str {
        ID
    }
    fn budget(&self) -> Duration {
        self.timeout
    }
    async fn check(&self, _input: Arc<DeepInput>) -> Result<Verdict, DeepError> {
        Err(DeepError::Transport("placeholder".into()))
    }
}
