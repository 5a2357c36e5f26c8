//! Decision cost with telemetry off (the engine alone) and on (the engine, then the span,
//! metrics and decision log line the server records for every call). The target:
//! telemetry on within 1.1× of off. Read the report; nothing is asserted here.

/// The server binary's allocator, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate::engine::gate::Finished;
use toolgate::engine::{CallMeta, Recorder, TraceParent, evaluate};
use toolgate::event::{Context, Event, EventKind};
use toolgate::policy::default_policy;
use toolgate::telemetry::Telemetry;
use toolgate::telemetry::log::{DecisionLog, Sink};
use toolgate::telemetry::trace::{TraceConfig, Tracing};

fn event() -> Event {
    let mut e = Event::new(
        EventKind::ToolCallStart,
        Context {
            session_id: "bench".into(),
            step_id: "1".into(),
            ..Context::default()
        },
    );
    e.tool_name = "shell.exec".into();
    let mut script = String::new();
    let mut i = 0;
    while script.len() < 900 {
        script.push_str(&format!(
            "total_{i} = sum(r.amount for r in rows if r.region == {i})\n"
        ));
        i += 1;
    }
    let arguments = json!({"command": "python3 scripts/report.py --region all", "script": script});
    // As the server's edge leaves it: the parsed tree and the text it came from.
    e.arguments_text = Some(arguments.to_string());
    e.arguments = Some(arguments);
    e
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let _guard = rt.enter();
    let policy = Arc::new(default_policy(None).unwrap_or_else(|e| panic!("{e}")));
    let e = event();
    assert!(evaluate(&e, &policy, &CallMeta::default()).hits.is_empty());

    let dir = std::env::temp_dir().join(format!("toolgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    // Spans go to a batch exporter aimed at a port nothing listens on: the export runs on
    // the exporter's own thread, and the spans are built on the log writer's thread.
    let tracing = Tracing::start(&TraceConfig {
        endpoint: Some("http://127.0.0.1:9".into()),
        service_name: Some("bench".into()),
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let log = DecisionLog::start(
        Some(Sink::File {
            path: dir.join("decisions.log"),
            max_bytes: 64 << 20,
            keep: 1,
        }),
        b"bench-key".to_vec(),
        Some(tracing.clone()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let telemetry = Arc::new(Telemetry::new(log, tracing).unwrap_or_else(|e| panic!("{e}")));
    let parent = TraceParent::default();

    // Both sides start from an owned event, as the server does after decoding a request: the
    // server hands that event to the log instead of copying it.
    let mut g = c.benchmark_group("telemetry/tool_call_start_1KB");
    g.measurement_time(Duration::from_secs(3)).sample_size(50);
    g.bench_function("off", |b| {
        b.iter(|| {
            let ev = e.clone();
            black_box(evaluate(black_box(&ev), &policy, &CallMeta::default()))
        })
    });
    // What the server does per call: choose the span's ids, decide, count, hand the record
    // (line and span to build) to the writer thread.
    let on = |ev: Event| {
        let start = std::time::Instant::now();
        let span = telemetry.open(&parent);
        let d = evaluate(black_box(&ev), &policy, &CallMeta::default());
        telemetry.decision(Finished {
            event: ev,
            decision: d,
            policy: policy.clone(),
            parent: parent.clone(),
            span,
            start,
            end: std::time::Instant::now(),
        });
    };
    g.bench_function("on", |b| b.iter(|| on(e.clone())));
    // One part at a time, to show where the overhead is.
    g.bench_function("span_ids_only", |b| {
        b.iter(|| {
            let ev = e.clone();
            let chosen = telemetry.tracing.choose(&parent);
            (
                evaluate(black_box(&ev), &policy, &CallMeta::default()),
                chosen,
            )
        })
    });
    g.bench_function("metrics_only", |b| {
        b.iter(|| {
            let ev = e.clone();
            let start = std::time::Instant::now();
            let d = evaluate(black_box(&ev), &policy, &CallMeta::default());
            telemetry
                .metrics
                .record(ev.kind, &d, policy.mode, start.elapsed());
            d
        })
    });
    g.bench_function("log_only", |b| {
        b.iter(|| {
            let ev = e.clone();
            let d = evaluate(black_box(&ev), &policy, &CallMeta::default());
            let at = std::time::Instant::now();
            telemetry.log.record(ev, d, policy.clone(), at, None)
        })
    });
    g.finish();
    // A record the writer had no room for is dropped (and counted) instead of costing the
    // caller; drops during a run would make `on` look cheaper than it is, so say so.
    let dropped = telemetry
        .metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix("toolgate_decision_log_dropped_total "))
        .unwrap_or("?")
        .to_string();
    println!("decision log lines dropped during the runs: {dropped}");
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
