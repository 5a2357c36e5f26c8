//! OpenTelemetry traces: one `toolgate.evaluate` span per decision, a child of the caller's
//! span (W3C `traceparent`/`tracestate` from gRPC metadata), exported over OTLP/gRPC by a batch
//! processor that drops rather than blocks. Off unless an OTLP endpoint is configured.

use std::time::{Duration, Instant, SystemTime};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, Tracer,
    TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracerProvider};

use crate::decision::{Decision, RiskLevel};
use crate::engine::{SpanIds, TraceParent};
use crate::event::Event;

/// Where spans go. Built from the standard `OTEL_*` variables by `from_env`.
#[derive(Debug, Clone, Default)]
pub struct TraceConfig {
    /// OTLP/gRPC endpoint; `None` turns tracing off.
    pub endpoint: Option<String>,
    pub service_name: Option<String>,
}

impl TraceConfig {
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`; off when
    /// neither is set or `OTEL_TRACES_EXPORTER=none`. `OTEL_SERVICE_NAME` and
    /// `OTEL_RESOURCE_ATTRIBUTES` are read by the SDK's resource detectors.
    pub fn from_env() -> TraceConfig {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> TraceConfig {
        let off = get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        let endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| get("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .filter(|e| !e.trim().is_empty() && !off);
        TraceConfig {
            endpoint,
            service_name: get("OTEL_SERVICE_NAME"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start the OTLP trace exporter: {0}")]
pub struct TraceError(String);

#[derive(Clone)]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

thread_local! {
    /// Ids chosen on the request thread for a span built later on the writer thread.
    static CHOSEN: std::cell::Cell<Option<(TraceId, SpanId)>> = const { std::cell::Cell::new(None) };
}

/// Random ids, except while a span whose ids were chosen earlier is being built: the decision
/// id, the log line and the deep-rule spans name the decision's span before it exists.
#[derive(Debug, Default)]
struct ChosenIds(RandomIdGenerator);

impl IdGenerator for ChosenIds {
    fn new_trace_id(&self) -> TraceId {
        CHOSEN
            .with(|c| c.get())
            .map(|(t, _)| t)
            .unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        CHOSEN
            .with(|c| c.get())
            .map(|(_, s)| s)
            .unwrap_or_else(|| self.0.new_span_id())
    }
}

/// A decision span to be built off the request thread: its ids, its parent and when it ran,
/// by the monotonic clock.
pub struct PendingSpan {
    pub ids: SpanIds,
    pub parent: TraceParent,
    pub start: Instant,
    pub end: Instant,
}

/// The engine's span ids as an OpenTelemetry span context.
pub fn span_context(ids: &SpanIds, remote: bool, state: &str) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(ids.trace_id),
        SpanId::from_bytes(ids.span_id),
        TraceFlags::new(ids.flags),
        remote,
        state.parse().unwrap_or_default(),
    )
}

/// The caller's span as an OpenTelemetry parent context (empty when it sent none).
fn parent_context(p: &TraceParent) -> Context {
    match &p.ids {
        Some(ids) => Context::new().with_remote_span_context(span_context(ids, true, &p.state)),
        None => Context::new(),
    }
}

/// What a propagator extracted, as the engine's plain trace parent.
fn trace_parent(cx: &Context) -> TraceParent {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return TraceParent::default();
    }
    TraceParent {
        ids: Some(SpanIds {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        }),
        state: sc.trace_state().header(),
    }
}

/// The wall time of a monotonic instant already passed, against a pair of clock readings
/// taken together now. The request thread reads only the monotonic clock (a wall-clock read
/// per call was a measurable part of its telemetry cost); the span is built within
/// milliseconds, over which the two clocks agree to well under a microsecond.
pub fn wall_time(at: Instant, now: (Instant, SystemTime)) -> SystemTime {
    now.1 - now.0.saturating_duration_since(at)
}

/// Reads `traceparent`/`tracestate` from gRPC metadata.
struct MetadataExtractor<'a>(&'a tonic::metadata::MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// The caller's span context, or an empty context when the call carried none.
pub fn parent_from_metadata(md: &tonic::metadata::MetadataMap) -> TraceParent {
    trace_parent(&TraceContextPropagator::new().extract(&MetadataExtractor(md)))
}

/// Reads `traceparent`/`tracestate` from HTTP headers (proxy mode).
struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The caller's span context from HTTP headers, or an empty context when it sent none.
pub fn parent_from_headers(headers: &http::HeaderMap) -> TraceParent {
    trace_parent(&TraceContextPropagator::new().extract(&HeaderExtractor(headers)))
}

/// A client span around one call to an upstream server (proxy mode). Empty, and free, when
/// tracing is off. Dropping it ends it.
pub struct ClientSpan(Option<opentelemetry_sdk::trace::Span>);

impl ClientSpan {
    /// The W3C `traceparent` naming this span, for the upstream request; `None` when off.
    pub fn traceparent(&self) -> Option<String> {
        let sc = self.0.as_ref()?.span_context();
        Some(format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ))
    }

    pub fn set_attribute(&mut self, attribute: KeyValue) {
        if let Some(s) = self.0.as_mut() {
            s.set_attribute(attribute);
        }
    }

    /// Marks the call failed; `why` names the kind of failure, never payload text.
    pub fn fail(&mut self, why: impl Into<String>) {
        if let Some(s) = self.0.as_mut() {
            s.set_status(opentelemetry::trace::Status::error(why.into()));
        }
    }

    /// Ends the span now; later calls (and the drop) do nothing more.
    pub fn end(&mut self) {
        if let Some(s) = self.0.as_mut() {
            s.end();
        }
    }
}

impl Tracing {
    /// Starts a client span (`SpanKind::Client`) as a child of a decision's span, the way
    /// `deep_span` parents deep-rule jobs: the decision span is built later on the writer
    /// thread, so its chosen context stands in as a remote parent. `decision` is what
    /// `choose` returned; `None` (tracing off) gives an empty span, and `attributes` is
    /// then never called, so an untraced call builds nothing.
    pub fn client_span(
        &self,
        decision: Option<&SpanIds>,
        name: &'static str,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> ClientSpan {
        let (Some(provider), Some(decision)) = (self.provider.as_ref(), decision) else {
            return ClientSpan(None);
        };
        let tracer = provider.tracer("toolgate");
        let parent = Context::new().with_remote_span_context(span_context(decision, true, ""));
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes())
            .start_with_context(&tracer, &parent);
        ClientSpan(Some(span))
    }
}

impl Tracing {
    pub fn off() -> Tracing {
        Tracing { provider: None }
    }

    /// Builds the exporter; must run inside a tokio runtime (the gRPC channel needs one).
    pub fn start(cfg: &TraceConfig) -> Result<Tracing, TraceError> {
        let Some(endpoint) = &cfg.endpoint else {
            return Ok(Tracing::off());
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.clone())
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| TraceError(e.to_string()))?;
        let mut resource = Resource::builder();
        if let Some(name) = &cfg.service_name {
            resource = resource.with_service_name(name.clone());
        } else if std::env::var("OTEL_SERVICE_NAME").is_err() {
            resource = resource.with_service_name("toolgate");
        }
        let provider = SdkTracerProvider::builder()
            .with_id_generator(ChosenIds::default())
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Tracing {
            provider: Some(provider),
        })
    }

    pub fn enabled(&self) -> bool {
        self.provider.is_some()
    }

    /// Chooses the decision span's ids now, on the request thread, so the decision, its log
    /// line and its deep-rule spans can name it; the span itself is built later by
    /// `build_decision_span`. `None` when tracing is off.
    pub fn choose(&self, parent: &TraceParent) -> Option<SpanIds> {
        self.provider.as_ref()?;
        let ids = RandomIdGenerator::default();
        let (trace_id, flags) = match &parent.ids {
            Some(p) => (p.trace_id, p.flags),
            None => (ids.new_trace_id().to_bytes(), TraceFlags::SAMPLED.to_u8()),
        };
        Some(SpanIds {
            trace_id,
            span_id: ids.new_span_id().to_bytes(),
            flags,
        })
    }

    /// Builds and ends a decision span with the ids chosen by `choose`; `tier` is the
    /// tool's (`ToolTiers::of_event`), and `now` a pair of clock readings that places the
    /// span's instants on the wall clock.
    pub fn build_decision_span(
        &self,
        p: &PendingSpan,
        d: &Decision,
        event: &Event,
        tier: Option<RiskLevel>,
        now: (Instant, SystemTime),
    ) {
        let Some(provider) = self.provider.as_ref() else {
            return;
        };
        let tracer = provider.tracer("toolgate");
        CHOSEN.with(|c| {
            c.set(Some((
                TraceId::from_bytes(p.ids.trace_id),
                SpanId::from_bytes(p.ids.span_id),
            )))
        });
        let span = tracer
            .span_builder("toolgate.evaluate")
            .with_kind(SpanKind::Internal)
            .with_start_time(wall_time(p.start, now))
            .start_with_context(&tracer, &parent_context(&p.parent));
        CHOSEN.with(|c| c.set(None));
        finish(span, d, event, tier, wall_time(p.end, now));
    }

    /// One deep-rule job, a child of its decision's span: when it was queued, when it ran,
    /// how it ended. A late verdict's span ends after its decision's, which is what
    /// happened.
    #[allow(clippy::too_many_arguments)]
    pub fn deep_span(
        &self,
        decision: &SpanIds,
        rule: &str,
        outcome: &str,
        decision_id: &str,
        queued: SystemTime,
        started: SystemTime,
        end: SystemTime,
    ) {
        let Some(provider) = self.provider.as_ref() else {
            return;
        };
        let tracer = provider.tracer("toolgate");
        let parent = Context::new().with_remote_span_context(span_context(decision, true, ""));
        let queue_us = started
            .duration_since(queued)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        let mut span = tracer
            .span_builder("toolgate.deep_rule")
            .with_kind(SpanKind::Internal)
            .with_start_time(queued)
            .with_attributes(vec![
                KeyValue::new("toolgate.rule.id", rule.to_string()),
                KeyValue::new("toolgate.deep.outcome", outcome.to_string()),
                KeyValue::new("toolgate.deep.queue_us", queue_us),
                KeyValue::new("toolgate.decision.id", decision_id.to_string()),
            ])
            .start_with_context(&tracer, &parent);
        span.end_with_timestamp(end);
    }

    /// Flushes queued spans and stops the exporter. Blocks: call from a blocking thread.
    pub fn shutdown(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.shutdown()
        {
            tracing::warn!(error = %e, "trace exporter shutdown");
        }
    }
}

/// Sets the decision's attributes and one `rule_hit` event per hit (rule, action, level,
/// never matched text) on the decision's span and ends it.
fn finish(
    mut span: opentelemetry_sdk::trace::Span,
    d: &Decision,
    e: &Event,
    tier: Option<RiskLevel>,
    end: SystemTime,
) {
    let tier = tier.map_or("", RiskLevel::as_str);
    let rule_ids: Vec<&str> = d.hits.iter().map(|h| h.rule_id.as_str()).collect();
    let operation = match e.kind {
        crate::event::EventKind::LlmBefore | crate::event::EventKind::LlmStreamChunk => "chat",
        crate::event::EventKind::ToolCallStart | crate::event::EventKind::ToolCallResult => {
            "execute_tool"
        }
    };
    let mut attrs = vec![
        KeyValue::new("toolgate.event", e.kind.as_str()),
        KeyValue::new("gen_ai.operation.name", operation),
        KeyValue::new("toolgate.session.id", e.context.session_id.clone()),
        KeyValue::new("toolgate.action", d.action.as_str()),
        KeyValue::new("toolgate.enforced", d.enforced),
        KeyValue::new("toolgate.rule_ids", rule_ids.join(",")),
        KeyValue::new("toolgate.policy.version", d.policy_version.clone()),
        KeyValue::new("toolgate.latency_us", d.latency_us as i64),
        KeyValue::new("toolgate.decision.id", d.decision_id.clone()),
        KeyValue::new("toolgate.deep.awaited", i64::from(d.deep_awaited)),
        KeyValue::new("toolgate.deep.pending", i64::from(d.deep_pending)),
    ];
    if !e.tool_name.is_empty() {
        attrs.push(KeyValue::new("gen_ai.tool.name", e.tool_name.clone()));
    }
    if !tier.is_empty() {
        attrs.push(KeyValue::new("toolgate.tier", tier));
    }
    if !e.context.caller.is_empty() {
        attrs.push(KeyValue::new("toolgate.caller", e.context.caller.clone()));
    }
    if let Some(a) = d.shadow_action {
        attrs.push(KeyValue::new("toolgate.shadow_action", a.as_str()));
    }
    span.set_attributes(attrs);
    for h in &d.hits {
        span.add_event(
            "rule_hit",
            vec![
                KeyValue::new("rule.id", h.rule_id.clone()),
                KeyValue::new("rule.action", h.action.as_str()),
                KeyValue::new("rule.level", h.risk_level.as_str()),
            ],
        );
    }
    span.end_with_timestamp(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_places_an_instant_by_its_distance_from_now() {
        let now = (Instant::now(), SystemTime::now());
        let earlier = now.0.checked_sub(Duration::from_millis(5)).unwrap();
        assert_eq!(wall_time(earlier, now), now.1 - Duration::from_millis(5));
        // An instant after the readings (cannot happen for a passed call) is placed at now.
        assert_eq!(wall_time(now.0 + Duration::from_millis(1), now), now.1);
    }

    #[test]
    fn config_from_standard_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(TraceConfig::from_lookup(env(&[])).endpoint.is_none());
        let c = TraceConfig::from_lookup(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")]));
        assert_eq!(c.endpoint.as_deref(), Some("http://c:4317"));
        let c = TraceConfig::from_lookup(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4317"),
        ]));
        assert_eq!(c.endpoint.as_deref(), Some("http://t:4317"));
        let c = TraceConfig::from_lookup(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ]));
        assert!(c.endpoint.is_none());
    }

    #[test]
    fn traceparent_is_read_from_metadata() {
        let mut md = tonic::metadata::MetadataMap::new();
        md.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let p = parent_from_metadata(&md);
        assert_eq!(p.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.ids.unwrap().flags, 1);
        assert_eq!(
            parent_from_metadata(&tonic::metadata::MetadataMap::new()),
            TraceParent::default()
        );
    }

    #[test]
    fn traceparent_is_read_from_http_headers() {
        let mut h = http::HeaderMap::new();
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let p = parent_from_headers(&h);
        assert_eq!(p.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            parent_from_headers(&http::HeaderMap::new()),
            TraceParent::default()
        );
    }

    #[test]
    fn client_span_is_empty_when_tracing_is_off() {
        let ids = SpanIds {
            trace_id: TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736")
                .unwrap()
                .to_bytes(),
            span_id: [1; 8],
            flags: 1,
        };
        let mut span = Tracing::off().client_span(Some(&ids), "toolgate.upstream", || {
            unreachable!("attributes are not built when tracing is off")
        });
        assert!(span.traceparent().is_none());
        span.end();
    }
}
