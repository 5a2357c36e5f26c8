//! What the outside sees of each decision: Prometheus metrics, the JSON decision log and the
//! admin HTTP endpoints. Recording happens after the decision is made, off the engine's path.

pub mod admin;
pub mod log;
pub mod metrics;
mod per_thread;
mod spool;
pub mod trace;

use std::sync::Arc;

use crate::deep::pool::PoolObserver;
use crate::engine::gate::{DeepJob, Finished};
use crate::engine::{Recorder, SpanIds, TraceParent};
use crate::policy::Policy;
use crate::policy::reload::ReloadObserver;

pub struct Telemetry {
    pub metrics: Arc<metrics::Metrics>,
    pub log: log::DecisionLog,
    pub tracing: trace::Tracing,
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
}

/// The engine reports here: each finished decision is counted, and its log line and span
/// are handed to the writer thread, which builds both. The request thread reads only the
/// monotonic clock; the writer turns the span's instants into wall time.
impl Recorder for Telemetry {
    fn open(&self, parent: &TraceParent) -> Option<SpanIds> {
        self.tracing.choose(parent)
    }

    fn decision(&self, done: Finished) {
        let Finished {
            event,
            decision,
            policy,
            parent,
            span,
            start,
            end,
        } = done;
        let span = span.map(|ids| trace::PendingSpan {
            ids,
            parent,
            start,
            end,
        });
        self.metrics.record(
            event.kind,
            &decision,
            policy.mode,
            end.saturating_duration_since(start),
        );
        if !self.log.record(event, decision, policy, end, span) {
            self.metrics.decision_log_dropped();
        }
    }

    fn deep_job(&self, job: &DeepJob<'_>) {
        self.tracing.deep_span(
            &job.decision_span,
            job.rule,
            job.outcome,
            job.decision_id,
            job.queued,
            job.started,
            job.ended,
        );
    }

    fn sessions(&self, active: usize, evicted: u64) {
        self.metrics.set_sessions(active as i64, evicted);
    }

    fn pauses_pending(&self, pending: usize) {
        self.metrics.set_pauses_pending(pending as i64);
    }

    fn deep_wait_timeout(&self) {
        self.metrics.deep_wait_timeout();
    }

    fn session_store(&self, ok: bool) {
        self.metrics.session_store(ok);
    }
}

impl PoolObserver for Telemetry {
    fn queue_depth(&self, depth: i64) {
        self.metrics.set_deep_queue_depth(depth);
    }

    fn job(&self, rule: &str, outcome: &str) {
        self.metrics.deep_job(rule, outcome);
    }
}

impl crate::tenants::TenantObserver for Telemetry {
    fn database_up(&self, up: bool) {
        self.metrics.set_tenant_database_up(up);
    }

    fn overlays(&self, count: usize) {
        self.metrics.set_tenant_overlays(count);
    }

    fn rejected(&self) {
        self.metrics.tenant_rejected();
    }
}

impl ReloadObserver for Telemetry {
    fn loaded(&self, policy: &Policy) {
        self.metrics.set_policy(policy);
        self.metrics.reload(true);
    }

    fn failed(&self) {
        self.metrics.reload(false);
    }
}
