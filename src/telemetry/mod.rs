//! What the outside sees of each decision: Prometheus metrics, the JSON decision log and the
//! admin HTTP endpoints. Recording happens after the decision is made, off the engine's path.

pub mod admin;
pub mod log;
pub mod metrics;
pub mod trace;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::decision::Decision;
use crate::event::Event;
use crate::policy::Policy;

pub struct Telemetry {
    pub metrics: Arc<metrics::Metrics>,
    pub log: log::DecisionLog,
    pub tracing: trace::Tracing,
}

/// When a call started, by the monotonic clock (for durations) and the wall clock (for
/// span timestamps).
#[derive(Debug, Clone, Copy)]
pub struct CallStart {
    pub at: Instant,
    pub wall: SystemTime,
}

impl CallStart {
    pub fn now() -> CallStart {
        CallStart {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
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

    /// Records the decision's span and fills `trace_id` when the caller sent none; returns
    /// the span id for the log line (empty when tracing is off).
    pub fn trace(
        &self,
        event: &Event,
        d: &mut Decision,
        policy: &Policy,
        start: CallStart,
        parent: &opentelemetry::Context,
    ) -> String {
        let open = self.tracing.begin(parent, start.wall);
        self.finish_trace(open, event, d, policy)
    }

    /// Ends a decision span opened at the start of the call (see `Tracing::begin`).
    pub fn finish_trace(
        &self,
        open: Option<trace::OpenSpan>,
        event: &Event,
        d: &mut Decision,
        policy: &Policy,
    ) -> String {
        let Some(open) = open else {
            return String::new();
        };
        let (trace_id, span_id) = trace::finish(open, d, event, policy, SystemTime::now());
        if d.trace_id.is_empty() {
            d.trace_id = trace_id;
        }
        span_id
    }

    /// Records a decision whose span ids were chosen at its start (`Tracing::choose`): fills
    /// the decision's trace id when the caller sent none, and hands the span to the writer
    /// thread with the log line. `view` sees the finished decision first (the wire form is
    /// built there), so nothing is copied.
    #[allow(clippy::too_many_arguments)]
    pub fn record_chosen<T>(
        &self,
        event: Event,
        mut d: Decision,
        policy: &Arc<Policy>,
        start: CallStart,
        parent: &opentelemetry::Context,
        chosen: Option<opentelemetry::trace::SpanContext>,
        view: impl FnOnce(&Decision) -> T,
    ) -> T {
        let mut span_id = String::new();
        let pending = chosen.map(|sc| {
            if d.trace_id.is_empty() {
                d.trace_id = sc.trace_id().to_string();
            }
            span_id = sc.span_id().to_string();
            trace::PendingSpan {
                context: sc,
                parent: parent.clone(),
                start: start.wall,
                end: SystemTime::now(),
            }
        });
        let out = view(&d);
        self.record(event, d, policy, start, span_id, pending);
        out
    }

    /// Counts the decision and hands it to the log writer, which builds the line (and the
    /// span, when `span` is given) on its own thread. There is no await between the
    /// decision and this call, so a caller that cancels mid-call cannot skip it.
    pub fn record(
        &self,
        event: Event,
        d: Decision,
        policy: &Arc<Policy>,
        start: CallStart,
        span_id: String,
        span: Option<trace::PendingSpan>,
    ) {
        self.metrics.record(
            event.kind,
            &d,
            policy.mode.as_str(),
            start.at.elapsed().as_secs_f64(),
        );
        let record = log::Record {
            event,
            decision: d,
            policy: policy.clone(),
            span_id,
            span,
        };
        if !self.log.record(record) {
            self.metrics.decision_log_dropped();
        }
    }
}
