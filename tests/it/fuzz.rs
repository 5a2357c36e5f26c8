//! Fuzz targets that run under `cargo test`, on stable: each target replays its committed
//! seed corpus (`tests/fuzz/<target>/`), then mutates the seeds for a bounded time and checks
//! that nothing panics and that the target's invariant holds. There is no coverage feedback
//! (that needs cargo-fuzz on nightly); the seeds carry the structure instead.
//!
//! - `FUZZ_SECS`: seconds per target (default 6; CI's whole fuzz run stays under a minute).
//! - `FUZZ_SEED`: the run's random seed, printed on failure, to replay a run exactly.
//!
//! An input that fails is written to `target/fuzz-failures/<target>/` and the test names
//! it: add it to the target's seed directory as a regression seed once it is fixed. A stack
//! overflow aborts the process before anything can be written: rerun with the printed
//! `FUZZ_SEED` and `FUZZ_TRACE=1`, which writes each input to `…/<target>/last` first.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolgate::engine::{CallMeta, evaluate};
use toolgate::event::{Event, EventKind, Normalized};
use toolgate::policy::Policy;

/// Bytes that make parsers change state: quotes, escapes, separators, line breaks, and the
/// starts of multi-byte UTF-8 sequences.
const INTERESTING: &[u8] = b"\"\\{}[]:,\n\r\t -#*/$'`%&;|\x00\x7f\xc3\xa9\xe2\x80\x8b\xf0";
/// Tokens spliced in whole: grammar a byte mutation rarely builds by itself.
const TOKENS: &[&str] = &[
    "null",
    "true",
    "1e308",
    "-0",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "[[[[[[[[",
    "]]]]",
    "{\"a\":",
    "data: ",
    "event: ",
    "id: ",
    "\r\n\r\n",
    "\n\n",
    "tools/call",
    "jsonrpc",
    "rm -rf /",
    "AKIAIOSFODNN7EXAMPLE",
    "sync_rules:\n  - id: x\n    regex: ",
    "(a+)+$",
    "\u{202e}",
    "\u{200b}",
    "\u{ff52}\u{ff4d}",
];

/// A small deterministic generator (xorshift64*): a run is replayed from its seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let out: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!out.is_empty(), "{} has no seeds", dir.display());
    out
}

/// One to eight mutations of a seed, or of two seeds spliced.
fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = corpus[rng.below(corpus.len())].clone();
    if rng.below(8) == 0 {
        let other = &corpus[rng.below(corpus.len())];
        let cut = rng.below(v.len() + 1);
        let from = rng.below(other.len() + 1);
        v.truncate(cut);
        v.extend_from_slice(&other[from..]);
    }
    for _ in 0..=rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, INTERESTING[rng.below(INTERESTING.len())]),
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(v.len() - 1)..end);
            }
            3 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                v.splice(at..at, t.iter().copied());
            }
            4 if !v.is_empty() => {
                // Repeat a run: deep nesting and long tokens come from here.
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(32)).min(v.len());
                let run = v[start..end].to_vec();
                for _ in 0..=rng.below(64) {
                    v.splice(at..at, run.iter().copied());
                }
            }
            _ => v.insert(at, rng.next() as u8),
        }
    }
    // Inputs stay small enough that a debug build tries thousands of them.
    v.truncate(64 * 1024);
    v
}

/// Replays the seeds, then fuzzes until the time is up.
fn run(target: &str, check: impl Fn(&[u8])) {
    let corpus = seeds(target);
    let secs: f64 = std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6.0);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    let mut rng = Rng(seed);
    let fail = |input: &[u8], why: String| -> ! {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/fuzz-failures")
            .join(target);
        std::fs::create_dir_all(&dir).unwrap();
        let name = format!("{:016x}", fnv(input));
        std::fs::write(dir.join(&name), input).unwrap();
        panic!(
            "fuzz target `{target}` failed (FUZZ_SEED={seed}): {why}; the input is in {}",
            dir.join(name).display()
        );
    };
    for s in &corpus {
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| check(s))) {
            fail(s, format!("seed: {}", panic_text(&e)));
        }
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tried = 0u64;
    let trace = std::env::var_os("FUZZ_TRACE").is_some();
    let last = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/fuzz-failures")
        .join(target);
    if trace {
        std::fs::create_dir_all(&last).unwrap();
    }
    eprintln!("fuzz {target}: FUZZ_SEED={seed}");
    while Instant::now() < deadline {
        let input = mutate(&mut rng, &corpus);
        if trace {
            std::fs::write(last.join("last"), &input).unwrap();
        }
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| check(&input))) {
            fail(&input, panic_text(&e));
        }
        tried += 1;
    }
    eprintln!("fuzz {target}: {} seeds, {tried} mutants", corpus.len());
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}

fn policy() -> Policy {
    let mut p = toolgate::policy::default_policy(None).unwrap();
    // Decisions must not depend on how loaded the test machine is.
    p.sync.limited = false;
    p
}

/// Invariants every decision keeps: redacted arguments are JSON, and a REDACT or a block
/// carries a reason for each hit.
fn decide_and_check(event: &Event, policy: &Policy) {
    let d = evaluate(event, policy, &CallMeta::default());
    if let Some(a) = &d.redacted_arguments_json {
        assert!(
            serde_json::from_str::<serde_json::Value>(a).is_ok(),
            "redacted arguments are not JSON: {a}"
        );
    }
    for h in &d.hits {
        assert!(!h.rule_id.is_empty(), "a hit without a rule id");
    }
}

#[test]
fn fuzz_event_json() {
    let p = policy();
    run("event_json", |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        let Ok(spec) = serde_json::from_str::<toolgate::scenario::EventSpec>(text) else {
            return;
        };
        if let Ok(event) = spec.into_event() {
            decide_and_check(&event, &p);
        }
    });
}

#[test]
fn fuzz_arguments() {
    let p = policy();
    run("arguments", |b| {
        let text = String::from_utf8_lossy(b);
        let Ok(Some(args)) = toolgate::api::convert::parse_arguments("arguments_json", &text)
        else {
            return;
        };
        let mut e = Event::new(EventKind::ToolCallStart, Default::default());
        e.tool_name = "shell.exec".into();
        e.arguments = Some(args);
        e.arguments_text = Some(text.into_owned());
        decide_and_check(&e, &p);
    });
}

#[test]
fn fuzz_policy_yaml() {
    let mut probe = Event::new(EventKind::ToolCallStart, Default::default());
    probe.tool_name = "shell.exec".into();
    probe.arguments = Some(serde_json::json!({"command": "rm -rf / && echo AKIAIOSFODNN7EXAMPLE"}));
    run("policy_yaml", |b| {
        let text = String::from_utf8_lossy(b);
        match toolgate::policy::compile(&text, "fuzz.yaml", None) {
            Ok(mut p) => {
                p.sync.limited = false;
                decide_and_check(&probe, &p);
            }
            // An invalid pack names where: every problem has a path or a line.
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    });
}

#[test]
fn fuzz_sse() {
    run("sse", |b| {
        // The same bytes read whole and read in pieces give the same events, and every byte
        // is forwarded once: a split anywhere, even inside a CRLF, changes nothing. (An event
        // that ends on a CR is complete at once; an LF that follows is carried with the next
        // event's bytes, so only the cut between raw slices may move.)
        let limit = 4096;
        let whole = toolgate::proxy::sse::SseParser::new(limit).push(b);
        let mut pieces = toolgate::proxy::sse::SseParser::new(limit);
        let step = 1 + fnv(b) as usize % 7;
        let mut events = Vec::new();
        let mut err = None;
        for chunk in b.chunks(step) {
            match pieces.push(chunk) {
                Ok(mut e) => events.append(&mut e),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let fields = |e: &[toolgate::proxy::sse::SseEvent]| {
            e.iter()
                .map(|e| (e.id.clone(), e.event.clone(), e.data.clone()))
                .collect::<Vec<_>>()
        };
        let bytes = |e: &[toolgate::proxy::sse::SseEvent]| {
            e.iter().flat_map(|e| e.raw.to_vec()).collect::<Vec<u8>>()
        };
        // Over the limit both readings may refuse, at different points: nothing to compare.
        if let (Ok(w), None) = (whole, err) {
            assert_eq!(fields(&w), fields(&events), "pieces and whole disagree");
            let (a, b) = (bytes(&w), bytes(&events));
            // Pieces may hold back a trailing LF that a whole read carried.
            assert!(
                a == b || (b.len() + 1 == a.len() && a.starts_with(&b)),
                "bytes forwarded differ"
            );
        }
    });
}

#[test]
fn fuzz_jsonrpc() {
    run("jsonrpc", |b| {
        let Ok(msg) = serde_json::from_slice::<serde_json::Value>(b) else {
            return;
        };
        use toolgate::proxy::jsonrpc;
        let _ = jsonrpc::classify(&msg);
        let _ = jsonrpc::tools_list_id(&msg);
        let _ = jsonrpc::is_reply(&msg);
        let _ = jsonrpc::reply_text(&msg);
        if let Some(id) = msg.get("id") {
            let _ = jsonrpc::id_text(id);
        }
    });
}

#[test]
fn fuzz_normalizer() {
    run("normalizer", |b| {
        let text = String::from_utf8_lossy(b);
        let n = Normalized::new(&text);
        let len = n.text.len();
        // Every range of the normalized text (on its char boundaries, as a match is) maps
        // back inside the original, on char boundaries, in order: a redaction can cut there.
        let on_char = |mut i: usize| {
            while !n.text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let cuts = [0, len / 3, len / 2, len.saturating_sub(1), len].map(on_char);
        for &s in &cuts {
            for &e in &cuts {
                if s > e {
                    continue;
                }
                let (a, z) = n.original_range(s, e);
                assert!(a <= z && z <= text.len(), "{s}..{e} -> {a}..{z}");
                assert!(text.is_char_boundary(a) && text.is_char_boundary(z));
            }
        }
    });
}

#[test]
fn fuzz_redactor() {
    let p = policy();
    // A key from the documentation's pattern, not a real one.
    let key = "AKIAZ7Q3LDM4XKE2WB5N";
    run("redactor", |b| {
        let text = String::from_utf8_lossy(b);
        // The key stands as its own word somewhere in the text.
        let mut at = fnv(b) as usize % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let output = format!("{} {key} {}", &text[..at], &text[at..]);
        let mut e = Event::new(EventKind::ToolCallResult, Default::default());
        e.tool_name = "files.read".into();
        e.output = output;
        let d = evaluate(&e, &p, &CallMeta::default());
        assert_ne!(
            d.action,
            toolgate::decision::Action::Allow,
            "the key passed"
        );
        if let Some(r) = &d.redacted_output {
            assert!(!r.contains(key), "the key survived redaction");
        }
    });
}
