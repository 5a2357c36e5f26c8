//! Fast-path latency with the deep-rule pool idle, and with it saturated by slow deep jobs
//! (every worker busy, the queue full). The measured call is a 1 KB `tool_call_start`
//! decided through the whole pipeline (session gate, fast rules, routing, effects) on the
//! embedded default pack; the saturating jobs are deep rules that wait on I/O for a minute,
//! as an LLM verifier behind a slow endpoint does.
//!
//! Target from the issue (read from the report, never asserted): saturated within 1.2× of
//! idle.

/// The server binary's allocator, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate::deep::pool::Submitted;
use toolgate::deep::{DeepError, DeepInput, DeepRule, Verdict};
use toolgate::engine::CallMeta;
use toolgate::engine::pipeline::{Options, Runtime, decide};
use toolgate::event::{Context, Event, EventKind};
use toolgate::policy::{Policy, default_policy};

/// A deep rule waiting on a slow service: no CPU, a worker held for a minute.
#[derive(Debug)]
struct SlowService;

#[async_trait::async_trait]
impl DeepRule for SlowService {
    fn id(&self) -> &str {
        "slow-service"
    }

    fn budget(&self) -> Duration {
        Duration::from_secs(120)
    }

    async fn check(&self, _input: Arc<DeepInput>) -> Result<Verdict, DeepError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Err(DeepError::Timeout(Duration::from_secs(60)))
    }
}

fn policy() -> Policy {
    let mut p =
        default_policy(None).unwrap_or_else(|e| panic!("default pack does not compile: {e}"));
    p.sync.limited = false;
    p
}

/// About 1 KB of benign arguments, different per call so no cache is involved.
fn event(i: u64) -> Event {
    let mut e = Event::new(
        EventKind::ToolCallStart,
        Context {
            session_id: format!("bench-{}", i % 64),
            step_id: i.to_string(),
            task_goal: "summarise last quarter's orders".into(),
            ..Default::default()
        },
    );
    e.tool_name = "fs.read".into();
    let body = "Quarterly order summary, region totals and mean order value in cents. ".repeat(13);
    e.arguments = Some(json!({ "path": format!("reports/q3/{i}.md"), "note": body }));
    e
}

fn bench(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio: {e}"));
    let policy = Arc::new(policy());
    let rt = tokio.block_on(async { Runtime::start(&policy, None, false) });
    let meta = CallMeta::default();

    let mut g = c.benchmark_group("fast_path_1KB_tool_call_start");
    let mut i = 0u64;
    // The measured call, the same with the pool idle and saturated.
    let one_call = |i: &mut u64| {
        *i += 1;
        let (_, d) = tokio.block_on(decide(
            event(*i),
            &policy,
            &rt,
            &meta,
            1024,
            Options::default(),
        ));
        black_box(d)
    };
    g.bench_function("pool_idle", |b| b.iter(|| one_call(&mut i)));

    // A benign 1 KB tool result on a medium-tier tool: the default pack's
    // `injection-heuristics` runs on the pool and the decision waits for it. A new session
    // and new text every call, so the verdict cache never answers.
    g.bench_function("tool_call_result_1KB_awaiting_injection_heuristics", |b| {
        b.iter(|| {
            i += 1;
            let mut e = event(i);
            e.kind = EventKind::ToolCallResult;
            e.tool_name = "web.fetch".into();
            e.output =
                format!("Order {i} shipped to the warehouse in region {}. ", i % 17).repeat(20);
            let (_, d) = tokio.block_on(decide(e, &policy, &rt, &meta, 1024, Options::default()));
            assert_eq!(d.deep_awaited, 1);
            black_box(d)
        })
    });

    // Saturate: one job per worker running, then the queue filled to capacity.
    let capacity = policy.async_cfg.queue_capacity as usize + policy.async_cfg.workers as usize;
    let input = Arc::new(DeepInput {
        event: EventKind::ToolCallResult,
        tool_name: "web.fetch".into(),
        task_goal: String::new(),
        text: "output: a slow page".into(),
    });
    let mut queued = 0;
    tokio.block_on(async {
        for n in 0..capacity + 16 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(n as u64).to_le_bytes());
            let submitted = rt.pool().submit(
                Arc::new(SlowService),
                input.clone(),
                key,
                Box::new(|_| {}),
                None,
            );
            if matches!(submitted, Submitted::Queued(_)) {
                queued += 1;
            }
            // Let workers pick up their first job so the queue then fills behind them.
            tokio::task::yield_now().await;
        }
    });
    assert!(
        rt.pool().depth() as usize >= policy.async_cfg.queue_capacity as usize - 1,
        "pool not saturated: depth {} after {queued} queued",
        rt.pool().depth()
    );

    g.bench_function("pool_saturated", |b| b.iter(|| one_call(&mut i)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
