//! What the outside sees of each decision: Prometheus metrics, the JSON decision log and the
//! admin HTTP endpoints. Recording happens after the decision is made, off the engine's path.

pub mod admin;
pub mod log;
pub mod metrics;

use std::time::Instant;

use crate::decision::Decision;
use crate::event::Event;
use crate::policy::Policy;

pub struct Telemetry {
    pub metrics: metrics::Metrics,
    pub log: log::DecisionLog,
}

impl Telemetry {
    pub fn new(log: log::DecisionLog) -> Result<Telemetry, metrics::MetricsError> {
        Ok(Telemetry {
            metrics: metrics::Metrics::new()?,
            log,
        })
    }

    /// Records one decision. There is no await between the decision and this call, so a
    /// caller that cancels mid-call cannot skip its log line.
    pub fn record(&self, event: &Event, d: &Decision, policy: &Policy, started: Instant) {
        self.metrics.record(
            event.kind,
            d,
            policy.mode.as_str(),
            started.elapsed().as_secs_f64(),
        );
        if !self.log.record(event, d, policy, "") {
            self.metrics.decision_log_dropped();
        }
    }
}
