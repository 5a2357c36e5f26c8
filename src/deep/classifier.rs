//! placeholder until the helper's module lands
use super::*;
use std::sync::Arc;
use std::time::Duration;
pub const ID: &str = "grpc-classifier";
pub const KEYS: &[&str] = &[
    "endpoint",
    "block_labels",
    "warn_labels",
    "parameters",
    "max_input_bytes",
    "connect_timeout_ms",
];
#[derive(Debug)]
pub struct GrpcClassifier {
    timeout: Duration,
}
impl GrpcClassifier {
    pub fn from_config(
        _cfg: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Self, ConfigProblem> {
        Ok(Self { timeout })
    }
}
#[tonic::async_trait]
impl DeepRule for GrpcClassifier {
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
