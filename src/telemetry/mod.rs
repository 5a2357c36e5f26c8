//! What the outside sees of each decision: Prometheus metrics, the JSON decision log and the
//! admin HTTP endpoints. Recording happens after the decision is made, off the engine's path.

pub mod admin;
pub mod log;
pub mod metrics;
mod per_thread;
mod spool;
pub mod trace;

use std::sync::Arc;
use std::time::Instant;

use crate::decision::Decision;
use crate::event::Event;
use crate::policy::Policy;

pub struct Telemetry {
    pub metrics: Arc<metrics::Metrics>,
    pub log: log::DecisionLog,
    pub tracing: trace::Tracing,
}

/// When a call started, by the monotonic clock only: the request thread reads no wall clock,
/// and the writer thread turns the span's instants into wall time (`trace::wall_time`).
#[derive(Debug, Clone, Copy)]
pub struct CallStart {
    pub at: Instant,
}

impl CallStart {
    pub fn now() -> CallStart {
        CallStart { at: Instant::now() }
    }
}

impl Telemetry {
    pub fn new(
        log: log::DecisionLog,
        tracing: trace::Tracing,
    ) -> Result<Telemetry, metrics::MetricsError> {
        Ok(Telemetry {
            metrics: Arc::new(metrics::Metrics::new()?),
            log,
            tracing,
        })
    }

    /// Records one decision: counts it, fills its trace id from the span ids chosen at the
    /// start of the call (`Tracing::choose`) when the caller sent none, and hands the log
    /// line and the span to the writer thread, which builds both. `view` sees the finished
    /// decision first (the wire form is built there), so nothing is copied. There is no
    /// await between the decision and this call, so a caller that cancels mid-call cannot
    /// skip it.
    #[allow(clippy::too_many_arguments)]
    pub fn record<T>(
        &self,
        event: Event,
        mut d: Decision,
        policy: &Arc<Policy>,
        start: CallStart,
        parent: &opentelemetry::Context,
        chosen: Option<opentelemetry::trace::SpanContext>,
        view: impl FnOnce(&Decision) -> T,
    ) -> T {
        if let Some(sc) = &chosen
            && d.trace_id.is_empty()
        {
            d.trace_id = log::lower_hex(&sc.trace_id().to_bytes());
        }
        let out = view(&d);
        // One clock read ends the call, answer built, for the span and the duration metric.
        let end = Instant::now();
        let span = chosen.map(|sc| trace::PendingSpan {
            context: sc,
            parent: parent.clone(),
            start: start.at,
            end,
        });
        self.metrics.record(
            event.kind,
            &d,
            policy.mode,
            end.saturating_duration_since(start.at),
        );
        if !self.log.record(event, d, policy.clone(), end, span) {
            self.metrics.decision_log_dropped();
        }
        out
    }
}
