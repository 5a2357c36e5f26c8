//! Runs a detection corpus (JSONL from eval/injection/build.py) through the real pipeline
//! with the embedded default pack, each text as a `tool_call_result`, and prints how many
//! attacks were flagged and how many benign texts were blocked.
//!
//!     cargo run --release --example injection_eval -- target/eval/injection/heldout.jsonl [--heuristics-only]
//!
//! `--heuristics-only` takes the default pack's `injection-model` rule out, leaving
//! `injection-heuristics` alone.
//!
//! Flagged: the decision has a prompt-injection hit (a hit tagged `prompt-injection`,
//! `prompt_injection` or `jailbreak`). Blocked: flagged, or any action other than ALLOW or
//! REDACT (a benign text whose PII is redacted is not blocked). Deep rules are awaited, as
//! `toolgate test` does, so the answer does not depend on machine load.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::Arc;

use toolgate::decision::{Action, Decision};
use toolgate::engine::pipeline::Runtime;
use toolgate::engine::{Call, Gate};
use toolgate::event::{Context, Event, EventKind};

const INJECTION_TAGS: &[&str] = &["prompt-injection", "prompt_injection", "jailbreak"];

#[derive(Default)]
struct Tally {
    n: usize,
    flagged: usize,
    blocked: usize,
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).ok_or_else(|| {
        anyhow::anyhow!("usage: injection_eval FILE.jsonl [--misses] [--heuristics-only]")
    })?;
    let show_misses = std::env::args().any(|a| a == "--misses");
    let heuristics_only = std::env::args().any(|a| a == "--heuristics-only");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut policy = if heuristics_only {
            let entry = "  - id: injection-model\n    applies_to: [tool_call_result]\n";
            anyhow::ensure!(
                toolgate::policy::DEFAULT_PACK.contains(entry),
                "the default pack's injection-model entry is not where this example expects it"
            );
            let text = toolgate::policy::DEFAULT_PACK.replacen(entry, "", 1);
            toolgate::policy::compile(&text, "default-heuristics-only", None)?
        } else {
            toolgate::policy::default_policy(None)?
        };
        policy.sync.limited = false;
        let policy = Arc::new(policy);
        let gate = Gate::new(Arc::new(Runtime::start(&policy, None, true)));
        let mut by: BTreeMap<(String, String), Tally> = BTreeMap::new();
        let started = std::time::Instant::now();
        let mut count = 0usize;
        for line in std::io::BufReader::new(std::fs::File::open(&path)?).lines() {
            let row: serde_json::Value = serde_json::from_str(&line?)?;
            let text = row["text"].as_str().unwrap_or_default().to_string();
            let label = row["label"].as_str().unwrap_or_default().to_string();
            let source = row["source"].as_str().unwrap_or_default().to_string();
            let mut e = Event::new(EventKind::ToolCallResult, Context::default());
            e.tool_name = "web.fetch".into();
            e.output = text.clone();
            let call = Call {
                policy: policy.clone(),
                parent: Default::default(),
                start: std::time::Instant::now(),
                size: 0,
            };
            let (d, _) = gate
                .decide(e, call, Decision::clone)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            count += 1;
            let flagged = d.hits.iter().any(|h| {
                h.policy_tags
                    .iter()
                    .any(|t| INJECTION_TAGS.contains(&t.as_str()))
            });
            let blocked = flagged || !matches!(d.action, Action::Allow | Action::Redact);
            let t = by.entry((label.clone(), source)).or_default();
            t.n += 1;
            t.flagged += usize::from(flagged);
            t.blocked += usize::from(blocked);
            let wrong = if label == "attack" { !flagged } else { blocked };
            if show_misses && wrong {
                let ids: Vec<&str> = d.hits.iter().map(|h| h.rule_id.as_str()).collect();
                println!(
                    "{label} {ids:?}: {}",
                    text.replace('\n', " ")
                        .chars()
                        .take(300)
                        .collect::<String>()
                );
            }
        }
        let per = started.elapsed().as_micros() as f64 / count.max(1) as f64;
        let mut total: BTreeMap<String, Tally> = BTreeMap::new();
        for ((label, source), t) in &by {
            let pct = |x: usize| 100.0 * x as f64 / t.n.max(1) as f64;
            println!(
                "{label:7} {source:14} n={:4}  flagged {:4} ({:5.1}%)  blocked {:4} ({:5.1}%)",
                t.n,
                t.flagged,
                pct(t.flagged),
                t.blocked,
                pct(t.blocked)
            );
            let s = total.entry(label.clone()).or_default();
            s.n += t.n;
            s.flagged += t.flagged;
            s.blocked += t.blocked;
        }
        for (label, t) in &total {
            let pct = |x: usize| 100.0 * x as f64 / t.n.max(1) as f64;
            match label.as_str() {
                "attack" => println!(
                    "ATTACKS flagged: {}/{} = {:.1}%",
                    t.flagged,
                    t.n,
                    pct(t.flagged)
                ),
                _ => println!(
                    "BENIGN blocked: {}/{} = {:.1}%",
                    t.blocked,
                    t.n,
                    pct(t.blocked)
                ),
            }
        }
        println!("{count} texts, {per:.0} us per text (whole pipeline, deep rules awaited)");
        anyhow::Ok(())
    })
}
