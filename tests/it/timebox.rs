//! The fast scan's budget is not a bypass: padding, a long output, a wide argument object, a
//! cold start, a reload and a busy machine never turn unread content into an ALLOW or a
//! pass-through. These run against the embedded default pack as shipped (its 5 ms budget),
//! not the relaxed one the other tests use.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::json;
use tonic::transport::Channel;
use toolgate::app::{Running, ServeOptions, start};
use toolgate::proto::guard_service_client::GuardServiceClient;
use toolgate::proto::{Action, Decision, ToolCallResultRequest, ToolCallStartRequest};
use toolgate::telemetry::log::Sink;

use super::common::{DecisionOf, ctx};

const KEY: &str = "AKIAIOSFODNN7EXAMPLE";

/// A server on the default pack exactly as embedded, with a decision log file.
async fn shipped_server(dir: &std::path::Path) -> (Running, PathBuf, PathBuf) {
    let policy = dir.join("default.yaml");
    std::fs::write(&policy, toolgate::policy::DEFAULT_PACK).unwrap();
    assert!(toolgate::policy::DEFAULT_PACK.contains("timeout_ms: 5,"));
    let log = dir.join("decisions.log");
    let s = start(ServeOptions {
        decision_log: Some(Sink::File {
            path: log.clone(),
            max_bytes: 1 << 30,
            keep: 1,
        }),
        ..super::common::options(Some(policy.clone()))
    })
    .await
    .expect("server starts");
    (s, policy, log)
}

async fn client(s: &Running) -> GuardServiceClient<Channel> {
    GuardServiceClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap()
        .max_encoding_message_size(8 << 20)
        .max_decoding_message_size(64 << 20)
}

fn call(args: serde_json::Value) -> ToolCallStartRequest {
    ToolCallStartRequest {
        context: ctx("tb"),
        tool_name: "shell.exec".into(),
        arguments_json: args.to_string(),
        pause_id: String::new(),
    }
}

fn result(args: String, output: String) -> ToolCallResultRequest {
    ToolCallResultRequest {
        context: ctx("tb"),
        tool_name: "http.get".into(),
        arguments_json: args,
        output,
        is_error: false,
    }
}

/// Prose, not one repeated byte: the scan's anchors and digit screens see ordinary text.
fn padding(bytes: usize) -> String {
    let line =
        "The quarterly report lists 12 regions and their totals; see section 4.2 for notes.\n";
    line.repeat(bytes / line.len() + 1)
}

fn never_carries(d: &Decision, secret: &str) {
    let text = format!("{d:?}");
    assert!(!text.contains(secret), "the decision carries the secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_after_padding_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _, _) = shipped_server(dir.path()).await;
    let mut c = client(&s).await;
    for mib in [1usize, 3] {
        let args = json!({ "note": padding(mib << 20), "command": "rm -rf /" });
        let d = c.tool_call_start(call(args)).await.unwrap().decision();
        assert_eq!(d.action(), Action::Stop, "{mib} MiB: {:?}", d.hits);
    }
    let items: Vec<u32> = (0..300_000).collect();
    let d = c
        .tool_call_start(call(json!({ "items": items, "command": "rm -rf /" })))
        .await
        .unwrap()
        .decision();
    assert_eq!(d.action(), Action::Stop, "300,000 items: {:?}", d.hits);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_after_a_long_output_never_leaves_and_never_reaches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _, log) = shipped_server(dir.path()).await;
    let mut c = client(&s).await;

    let mut output = padding(3 * (1 << 20) + (3 << 18));
    output.push_str("\naws key ");
    output.push_str(KEY);
    let d = c
        .tool_call_result(result("{}".into(), output))
        .await
        .unwrap()
        .decision();
    assert_eq!(d.action(), Action::Redact, "{:?}", d.hits);
    assert!(
        d.redacted_output.ends_with("[REDACTED:aws_access_key]")
            || d.redacted_output.ends_with("[WITHHELD:unscanned]")
    );
    never_carries(&d, KEY);

    // 200,000 keys of arguments before the output: the output is still read or withheld.
    let mut args = serde_json::Map::new();
    for i in 0..200_000 {
        args.insert(format!("k{i}"), json!(i));
    }
    let args = serde_json::Value::Object(args).to_string();
    let d = c
        .tool_call_result(result(args, format!("token {KEY} end")))
        .await
        .unwrap()
        .decision();
    assert_eq!(d.action(), Action::Redact, "{:?}", d.hits);
    never_carries(&d, KEY);

    s.stop().await.unwrap();
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        lines.lines().count(),
        2,
        "both decisions are logged:\n{lines}"
    );
    assert!(!lines.contains(KEY), "the decision log carries the raw key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_start_and_after_a_reload_is_judged_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (s, policy, _) = shipped_server(dir.path()).await;
    let mut c = client(&s).await;
    let delete = || call(json!({ "command": "rm -rf / --no-preserve-root" }));
    let d = c.tool_call_start(delete()).await.unwrap().decision();
    assert_eq!(d.action(), Action::Stop, "first call: {:?}", d.hits);
    assert!(d.hits.iter().all(|h| h.rule_id != "sync_timeout"));

    let v2 = toolgate::policy::DEFAULT_PACK.replacen("version: \"1.0\"", "version: \"1.1\"", 1);
    assert_ne!(
        v2,
        toolgate::policy::DEFAULT_PACK,
        "the pack names its version"
    );
    std::fs::write(&policy, v2).unwrap();
    for _ in 0..100 {
        if s.store.load().version == "1.1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(s.store.load().version, "1.1", "the reload happened");
    let d = c.tool_call_start(delete()).await.unwrap().decision();
    assert!(d.policy_version.starts_with("1.1@"));
    assert_eq!(
        d.action(),
        Action::Stop,
        "first call after reload: {:?}",
        d.hits
    );
    assert!(d.hits.iter().all(|h| h.rule_id != "sync_timeout"));
}

/// Two processes that spin until dropped, to take the machine's cores from the server.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> Busy {
        Busy(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_calls_beside_busy_processes_are_never_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _, _) = shipped_server(dir.path()).await;
    let busy = Busy::start(2);
    let commands = [
        "rm -rf /",
        "rm -rf / --no-preserve-root",
        "sudo rm -rf /etc",
        "mkfs.ext4 /dev/sda1",
        "git push --force origin main",
    ];
    let mut tasks = Vec::new();
    for w in 0..10 {
        let mut c = client(&s).await;
        tasks.push(tokio::spawn(async move {
            let mut allowed = Vec::new();
            for i in 0..50 {
                let cmd = commands[(w + i) % commands.len()];
                let d = c
                    .tool_call_start(call(json!({ "command": cmd })))
                    .await
                    .unwrap()
                    .decision();
                if d.action() == Action::Allow {
                    allowed.push((cmd, d.hits));
                }
            }
            allowed
        }));
    }
    let mut allowed = Vec::new();
    for t in tasks {
        allowed.extend(t.await.unwrap());
    }
    drop(busy);
    assert!(
        allowed.is_empty(),
        "{} of 500 allowed: {:?}",
        allowed.len(),
        allowed.first()
    );
}
