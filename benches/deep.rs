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
use toolgate::deep::injection::score;
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
        content_at: 0,
        has_lookalike_marks: false,
        charge: Default::default(),
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

/// A documentation page as a fetch tool returns it: headings, prose, lists, a table, a JSON
/// example and a link, with numbers changing per section so no two sections are equal.
fn web_page(n: usize) -> String {
    let mut s = String::from(
        "# Invoices and credit notes\n\n> This guide covers how the billing service issues \
         invoices, how credit notes correct them, and how both appear in exports.\n\n",
    );
    let mut i = 0usize;
    while s.len() < n {
        s.push_str(&format!(
            "## Section {i}\n\nIn short, a credit note reduces the amount due on an open invoice. \
             Section {i} was last reviewed on 2026-{m:02}-{d:02}. Amounts are stored in minor \
             units, so {c} means {w}.{f:02} in the account currency; rounding happens once, on \
             the invoice total, never per line. If you need a copy, the export job posts it to \
             the reporting bucket overnight.\n\n\
             - Invoice numbers are sequential per account and never reused.\n\
             - A draft can be edited for {h} hours; after that it is finalised.\n\
             - See also [the API reference](https://docs.example.org/api/v2/invoices#s-{i}).\n\n\
             | field | type | example |\n|---|---|---|\n| `amount_due` | integer | {c} |\n\n\
             ```json\n{{\"invoice\": \"inv_{i}\", \"amount_due\": {c}, \"status\": \"open\"}}\n```\n\n",
            m = 1 + i % 12,
            d = 1 + (i * 3) % 28,
            c = 1250 + i * 389,
            w = (1250 + i * 389) / 100,
            f = (1250 + i * 389) % 100,
            h = 24 + (i % 4) * 24,
        ));
        i += 1;
    }
    cut_to(s, n)
}

/// A JSON listing as a repository-search tool returns it.
fn json_listing(n: usize) -> String {
    let names = [
        "billing-core",
        "ledger-sync",
        "invoice-renderer",
        "payment-webhooks",
    ];
    let mut s = String::from("{\"total_count\": 0, \"items\": [");
    let mut i = 0usize;
    while s.len() < n {
        let name = names[i % names.len()];
        s.push_str(&format!(
            "{{\"id\": {id}, \"full_name\": \"acme/{name}\", \"description\": \"Service {i}: \
             {name} for the finance platform\", \"language\": \"Rust\", \"stargazers_count\": \
             {stars}, \"updated_at\": \"2026-11-{d:02}T{h:02}:14:09Z\", \"default_branch\": \"main\"}}, ",
            id = 40_112 + i * 37,
            stars = 12 + (i * 7) % 90,
            d = 1 + i % 28,
            h = i % 24,
        ));
        i += 1;
    }
    cut_to(s, n)
}

/// Service logs as a log-search tool returns them.
fn logs(n: usize) -> String {
    let mut s = String::new();
    let mut i = 0usize;
    while s.len() < n {
        s.push_str(&format!(
            "2026-11-23T10:{m:02}:{sec:02}.{ms:03}Z INFO billing::export job={i} rows={r} \
             duration_ms={dur} bucket=s3://reports/nightly status=ok\n\
             2026-11-23T10:{m:02}:{sec:02}.{ms:03}Z WARN http: retrying GET \
             https://api.example.org/v2/accounts/{r}/invoices after 503 (attempt {a})\n",
            m = i % 60,
            sec = (i * 7) % 60,
            ms = (i * 37) % 1000,
            r = 100 + i * 13,
            dur = 40 + (i * 11) % 900,
            a = 1 + i % 3,
        ));
        i += 1;
    }
    cut_to(s, n)
}

/// `s` cut to at most `n` bytes, at a char boundary.
fn cut_to(mut s: String, n: usize) -> String {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// Builds a benign text of about `n` bytes.
type TextMaker = fn(usize) -> String;

/// Benign tool output of 1, 16 and 64 KB, each named `{kind}_{size}KB`.
fn texts() -> Vec<(String, String)> {
    let kinds: [(&str, TextMaker); 3] = [
        ("web_page", web_page),
        ("json", json_listing),
        ("logs", logs),
    ];
    let mut out = Vec::new();
    for size in [1024, 16 * 1024, 64 * 1024] {
        for (kind, make) in kinds {
            out.push((format!("{kind}_{}KB", size / 1024), make(size)));
        }
    }
    out
}

/// The `injection-heuristics` scorer alone on benign tool output.
fn injection_scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("injection_scan");
    for (name, text) in texts() {
        g.throughput(criterion::Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| b.iter(|| black_box(score(black_box(&text)))));
    }
    g.finish();
}

/// The `injection-model` classifier alone on the same texts.
fn injection_model(c: &mut Criterion) {
    let mut g = c.benchmark_group("injection_model");
    let model = toolgate::deep::model::built_in().expect("the built-in weights load");
    for (name, text) in texts() {
        g.throughput(criterion::Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(model.logit(black_box(&text))))
        });
    }
    g.finish();
}

/// The search for encoded forms (rot13, Morse, escapes…) that both injection rules make on
/// every text, on the same benign texts: none has a trace, so this is the search alone. The
/// readings are decoded as asked for, so the bench asks for all of them.
fn injection_readings(c: &mut Criterion) {
    let mut g = c.benchmark_group("injection_readings");
    for (name, text) in texts() {
        g.throughput(criterion::Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(toolgate::deep::readings::readings(black_box(&text)).count()))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench, injection_scan, injection_model, injection_readings
}
criterion_main!(benches);
