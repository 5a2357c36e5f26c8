//! What a tenant's overlay costs: the time to compile the pack with one tenant's rows merged
//! in (what a NOTIFY or a pack reload triggers per tenant), and the memory each compiled
//! overlay holds. In process, on the embedded default pack with three custom-rule rows per
//! tenant. Run with `cargo bench --bench tenants`; `TENANT_BENCH_N` (100) sets the count.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use toolgate::policy::default_policy;
use toolgate::tenants::{Row, compile_rows};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn rows(tenant: usize) -> Vec<Row> {
    // `TENANT_BENCH_ROWS=tiers`: rows that only set tool tiers (no patterns of their own).
    let tiers_only = std::env::var("TENANT_BENCH_ROWS").is_ok_and(|v| v == "tiers");
    (0..3)
        .map(|i| Row {
            // Tier rows name rules of the pack and change nothing in them.
            rule_id: if tiers_only {
                ["pii", "secrets", "sudo"][i].to_string()
            } else {
                format!("t{tenant}-rule-{i}")
            },
            enabled: true,
            rule: if tiers_only {
                json!({})
            } else {
                json!({
                    "keywords": [format!("project-{tenant}-{i}"), "quarterly export"],
                    "action": "retry",
                    "applies_to": ["tool_call_start"],
                })
            },
            tool_risks: json!({ format!("team{tenant}.*"): "high" }),
            version: 1,
        })
        .collect()
}

fn main() {
    let n: usize = std::env::var("TENANT_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let base = default_policy(None).expect("default pack");
    // One compile first, so lazily built tables are not charged to the first tenant.
    let _ = compile_rows(&base, "warm", &rows(0)).expect("compiles");
    let before = rss_kib();
    let mut times = Vec::with_capacity(n);
    let mut kept = Vec::with_capacity(n);
    for t in 0..n {
        let start = Instant::now();
        let p = compile_rows(&base, &format!("tenant-{t}"), &rows(t)).expect("compiles");
        times.push(start.elapsed());
        kept.push(Arc::new(p));
    }
    let after = rss_kib();
    times.sort();
    let median = times[n / 2];
    let p90 = times[n * 9 / 10];
    println!("tenant overlays: {n} compiled over the default pack, 3 rows each");
    println!(
        "compile per overlay: median {:.1} ms, p90 {:.1} ms",
        median.as_secs_f64() * 1000.0,
        p90.as_secs_f64() * 1000.0
    );
    println!(
        "resident memory: {} KiB before, {} KiB after: {:.0} KiB per overlay",
        before,
        after,
        (after.saturating_sub(before)) as f64 / n as f64
    );
    drop(kept);
}
