//! Prometheus metrics. Label values are bounded: event kinds, actions, modes, rule ids from
//! the loaded policy and fixed outcome names; never session ids or tool arguments.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::decision::{Action, Decision};
use crate::engine::SYNC_TIMEOUT_RULE;
use crate::event::EventKind;
use crate::policy::Policy;

/// Latency buckets from 5 µs to 1 s: the fast path lives in the first few.
const LATENCY_BUCKETS: [f64; 14] = [
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005,
    0.01, 0.05, 0.25, 1.0,
];

#[derive(Debug, thiserror::Error)]
#[error("metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

pub struct Metrics {
    registry: Registry,
    decisions: IntCounterVec,
    rule_hits: IntCounterVec,
    deep_queue_depth: IntGauge,
    deep_jobs: IntCounterVec,
    deep_wait_timeouts: IntCounter,
    fail_open: IntCounter,
    policy_reloads: IntCounterVec,
    policy_info: IntGaugeVec,
    sessions_active: IntGauge,
    sessions_evicted: IntCounter,
    /// The store's eviction total last reported, so the counter grows by the difference.
    evicted_seen: std::sync::atomic::AtomicU64,
    pauses_pending: IntGauge,
    decision_log_dropped: IntCounter,
    /// `decisions` for every (event, action, mode), indexed as in `record`.
    decision_series: Vec<IntCounter>,
    duration_fast: Histogram,
    duration_total: Histogram,
}

impl Metrics {
    pub fn new() -> Result<Metrics, MetricsError> {
        let registry = Registry::new();
        let decisions = IntCounterVec::new(
            Opts::new(
                "toolgate_decisions_total",
                "Decisions made, by event, action and mode",
            ),
            &["event", "action", "mode"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "toolgate_decision_duration_seconds",
                "Time to decide: `fast` is the engine's rule evaluation, `total` the whole call",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["stage"],
        )?;
        let rule_hits = IntCounterVec::new(
            Opts::new("toolgate_rule_hits_total", "Rule hits, by rule id"),
            &["rule"],
        )?;
        let deep_queue_depth = IntGauge::new(
            "toolgate_deep_queue_depth",
            "Deep-rule jobs waiting for a worker",
        )?;
        let deep_jobs = IntCounterVec::new(
            Opts::new(
                "toolgate_deep_jobs_total",
                "Deep-rule jobs, by rule and outcome",
            ),
            &["rule", "outcome"],
        )?;
        let deep_wait_timeouts = IntCounter::new(
            "toolgate_deep_wait_timeouts_total",
            "Decisions that stopped waiting for a deep rule",
        )?;
        let fail_open = IntCounter::new(
            "toolgate_fail_open_total",
            "Decisions that failed open (a time box or a dependency gave out)",
        )?;
        let policy_reloads = IntCounterVec::new(
            Opts::new("toolgate_policy_reloads_total", "Policy reloads, by result"),
            &["result"],
        )?;
        let policy_info = IntGaugeVec::new(
            Opts::new("toolgate_policy_info", "The policy in force (value 1)"),
            &["pack", "version", "hash"],
        )?;
        let sessions_active = IntGauge::new("toolgate_sessions_active", "Sessions with state")?;
        let sessions_evicted = IntCounter::new(
            "toolgate_sessions_evicted_total",
            "Sessions evicted because the store was at sessions.max_sessions",
        )?;
        let pauses_pending =
            IntGauge::new("toolgate_pauses_pending", "Pauses waiting for a human")?;
        let decision_log_dropped = IntCounter::new(
            "toolgate_decision_log_dropped_total",
            "Decision log lines dropped because the writer fell behind",
        )?;
        let build_info = IntGaugeVec::new(
            Opts::new(
                "toolgate_build_info",
                "Build of the running binary (value 1)",
            ),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        let mut decision_series = Vec::new();
        for kind in EventKind::ALL {
            for action in Action::ALL {
                for mode in [crate::policy::Mode::Enforce, crate::policy::Mode::Shadow] {
                    decision_series.push(decisions.with_label_values(&[
                        kind.as_str(),
                        action.as_str(),
                        mode.as_str(),
                    ]));
                }
            }
        }
        // Resolving them here also makes every series exist at zero from the start, so a
        // dashboard's rate() sees the first decision of each kind.
        let duration_fast = duration.with_label_values(&["fast"]);
        let duration_total = duration.with_label_values(&["total"]);
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(rule_hits.clone()))?;
        registry.register(Box::new(deep_queue_depth.clone()))?;
        registry.register(Box::new(deep_jobs.clone()))?;
        registry.register(Box::new(deep_wait_timeouts.clone()))?;
        registry.register(Box::new(fail_open.clone()))?;
        registry.register(Box::new(policy_reloads.clone()))?;
        registry.register(Box::new(policy_info.clone()))?;
        registry.register(Box::new(sessions_active.clone()))?;
        registry.register(Box::new(sessions_evicted.clone()))?;
        registry.register(Box::new(pauses_pending.clone()))?;
        registry.register(Box::new(decision_log_dropped.clone()))?;
        registry.register(Box::new(build_info))?;
        Ok(Metrics {
            registry,
            decisions,
            rule_hits,
            deep_queue_depth,
            deep_jobs,
            deep_wait_timeouts,
            fail_open,
            policy_reloads,
            policy_info,
            sessions_active,
            sessions_evicted,
            evicted_seen: std::sync::atomic::AtomicU64::new(0),
            pauses_pending,
            decision_log_dropped,
            decision_series,
            duration_fast,
            duration_total,
        })
    }

    /// Counts one decision. `total_seconds` is the whole call as the server saw it.
    pub fn record(&self, kind: EventKind, d: &Decision, mode: &str, total_seconds: f64) {
        let action = d.shadow_action.unwrap_or(d.action);
        // The (event, action, mode) series are resolved once, at start-up: a label lookup
        // hashes three strings under a lock, which is most of what counting costs.
        let shadow = usize::from(mode == crate::policy::Mode::Shadow.as_str());
        let i = (kind as usize * Action::ALL.len() + action as usize) * 2 + shadow;
        match self.decision_series.get(i) {
            Some(c) => c.inc(),
            None => self
                .decisions
                .with_label_values(&[kind.as_str(), action.as_str(), mode])
                .inc(),
        }
        self.duration_fast.observe(d.latency_us as f64 / 1e6);
        self.duration_total.observe(total_seconds);
        for h in &d.hits {
            self.rule_hits.with_label_values(&[&h.rule_id]).inc();
            if h.rule_id == SYNC_TIMEOUT_RULE && h.action == crate::decision::Action::Allow {
                self.fail_open.inc();
            }
        }
    }

    /// Sets the policy-info series to the policy in force (only one series at a time).
    pub fn set_policy(&self, p: &Policy) {
        self.policy_info.reset();
        self.policy_info
            .with_label_values(&[&p.name, &p.version, &p.hash])
            .set(1);
    }

    pub fn reload(&self, ok: bool) {
        self.policy_reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    pub fn decision_log_dropped(&self) {
        self.decision_log_dropped.inc();
    }

    /// Gauges owned by later parts (deep rules, sessions, pauses) start at zero and are set
    /// through these.
    pub fn set_deep_queue_depth(&self, n: i64) {
        self.deep_queue_depth.set(n);
    }

    pub fn deep_job(&self, rule: &str, outcome: &str) {
        self.deep_jobs.with_label_values(&[rule, outcome]).inc();
    }

    pub fn deep_wait_timeout(&self) {
        self.deep_wait_timeouts.inc();
    }

    /// Sessions held now, and the store's running total of evictions.
    pub fn set_sessions(&self, active: i64, evicted_total: u64) {
        self.sessions_active.set(active);
        let prev = self
            .evicted_seen
            .fetch_max(evicted_total, std::sync::atomic::Ordering::Relaxed);
        if evicted_total > prev {
            self.sessions_evicted.inc_by(evicted_total - prev);
        }
    }

    pub fn set_pauses_pending(&self, n: i64) {
        self.pauses_pending.set(n);
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into memory cannot fail for these metric types; an error would only drop
        // the scrape, never the process.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}
