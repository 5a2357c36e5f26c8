use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use toolgate::app::{ServeOptions, start};
use toolgate::proto::ToolCallResultRequest;
use toolgate::telemetry::trace::TraceConfig;

use super::common::{DecisionOf, Otlp, client, ctx, default_pack_file, spans_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_spans_are_children_of_the_callers_span_and_carry_no_secrets() {
    let otlp = Otlp::start().await;

    let dir = tempfile::tempdir().unwrap();
    let s = start(ServeOptions {
        tracing: TraceConfig {
            endpoint: Some(otlp.endpoint.clone()),
            service_name: Some("toolgate-test".into()),
        },
        ..super::common::options(Some(default_pack_file(dir.path())))
    })
    .await
    .unwrap();
    let mut c = client(&s).await;
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let mut req = tonic::Request::new(ToolCallResultRequest {
        context: ctx("trace-1"),
        tool_name: "http.get".into(),
        arguments_json: r#"{"url":"https://api.example.com/x"}"#.into(),
        output: format!("token {secret}"),
        is_error: false,
    });
    req.metadata_mut().insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let d = c.tool_call_result(req).await.unwrap().decision();
    assert_eq!(d.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");

    // A call without a parent still gets a trace id of its own in the decision.
    let d2 = c
        .tool_call_start(super::common::start_req("fs.list", "{}"))
        .await
        .unwrap()
        .decision();
    assert_eq!(d2.trace_id.len(), 32);

    // Stopping flushes the batch exporter.
    s.stop().await.unwrap();
    let got = otlp.requests().await;
    let spans = spans_of(&got);
    // Two decision spans, and two deep-rule spans (the default pack runs
    // injection-heuristics and injection-model on tool results) under the first.
    assert_eq!(spans.len(), 4, "{spans:?}");
    let span = spans
        .iter()
        .find(|s| {
            s.name == "toolgate.evaluate" && hex(&s.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736"
        })
        .expect("the child span");
    assert_eq!(hex(&span.parent_span_id), "00f067aa0ba902b7");
    let deep_spans: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "toolgate.deep_rule")
        .collect();
    assert_eq!(deep_spans.len(), 2, "{deep_spans:?}");
    for deep in &deep_spans {
        assert_eq!(hex(&deep.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            deep.parent_span_id, span.span_id,
            "a child of its decision's span"
        );
    }
    let deep = deep_spans
        .iter()
        .find(|s| format!("{:?}", s.attributes).contains("injection-heuristics"))
        .expect("the heuristics' span");
    let deep_attr = |k: &str| {
        deep.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.as_ref())
            .map(|v| format!("{v:?}"))
            .unwrap_or_default()
    };
    assert!(deep_attr("toolgate.rule.id").contains("injection-heuristics"));
    assert!(deep_attr("toolgate.deep.outcome").contains("ok"));
    let attr = |k: &str| -> Option<String> {
        span.attributes.iter().find(|a| a.key == k).and_then(|a| {
            a.value.as_ref().and_then(|v| match &v.value {
                Some(AnyValue::StringValue(s)) => Some(s.clone()),
                Some(AnyValue::BoolValue(b)) => Some(b.to_string()),
                Some(AnyValue::IntValue(i)) => Some(i.to_string()),
                _ => None,
            })
        })
    };
    assert_eq!(attr("gen_ai.tool.name").as_deref(), Some("http.get"));
    assert_eq!(
        attr("gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr("toolgate.event").as_deref(), Some("tool_call_result"));
    assert_eq!(attr("toolgate.action").as_deref(), Some("redact"));
    assert_eq!(attr("toolgate.session.id").as_deref(), Some("trace-1"));
    assert_eq!(attr("toolgate.rule_ids").as_deref(), Some("secrets"));
    assert!(attr("toolgate.policy.version").unwrap().starts_with("1.0@"));
    assert!(span.events.iter().any(|e| e.name == "rule_hit"));
    let service = got[0].resource_spans[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .find(|a| a.key == "service.name")
        .and_then(|a| a.value.as_ref())
        .map(|v| format!("{v:?}"))
        .unwrap();
    assert!(service.contains("toolgate-test"), "{service}");
    assert!(
        !format!("{got:?}").contains(secret),
        "raw secret exported in a span"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
