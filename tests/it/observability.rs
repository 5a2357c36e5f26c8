use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::app::{ServeOptions, start};
use toolgate::proto::ToolCallResultRequest;
use toolgate::telemetry::log::Sink;

use super::common::{DecisionOf, client, ctx, default_pack_file, start_req};

/// A plain HTTP/1.0 GET (no client library needed); returns status code and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_admin_endpoints_and_decision_log() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("decisions.log");
    let s = start(ServeOptions {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        decision_log: Some(Sink::File {
            path: log_path.clone(),
            max_bytes: 10 << 20,
            keep: 2,
        }),
        ..super::common::options(Some(default_pack_file(dir.path())))
    })
    .await
    .unwrap();
    let admin = s.admin_addr.unwrap();
    let mut c = client(&s).await;
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

    let stop = c
        .tool_call_start(start_req("shell.exec", r#"{"command":"rm -rf /"}"#))
        .await
        .unwrap()
        .decision();
    c.tool_call_start(start_req("fs.list", "{}")).await.unwrap();
    c.tool_call_result(ToolCallResultRequest {
        context: ctx("obs"),
        tool_name: "http.get".into(),
        arguments_json: String::new(),
        output: format!("token {secret}"),
        is_error: false,
    })
    .await
    .unwrap();

    let (code, body) = get(admin, "/metrics").await;
    assert_eq!(code, 200);
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value =
        |name: &str, labels: &[(&str, &str)]| super::common::metric_value(&body, name, labels);
    let decisions = "toolgate_decisions_total";
    assert_eq!(
        value(
            decisions,
            &[
                ("event", "tool_call_start"),
                ("action", "stop"),
                ("mode", "enforce")
            ]
        ),
        1.0
    );
    assert_eq!(
        value(
            decisions,
            &[("event", "tool_call_start"), ("action", "allow")]
        ),
        1.0
    );
    assert_eq!(
        value(
            decisions,
            &[("event", "tool_call_result"), ("action", "redact")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "toolgate_rule_hits_total",
            &[("rule", "dangerous-path-delete")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "toolgate_policy_info",
            &[("pack", "default-guardrails"), ("version", "1.0")]
        ),
        1.0
    );
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "toolgate_decision_duration_seconds_count")
    );
    for name in [
        "toolgate_deep_queue_depth",
        "toolgate_fail_open_total",
        "toolgate_sessions_active",
        "toolgate_pauses_pending",
        "toolgate_build_info",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == name),
            "{name} missing"
        );
    }
    // Label values are bounded: no session id or argument text becomes a label.
    assert!(!body.contains("obs\"") && !body.contains("rm -rf"));

    assert_eq!(get(admin, "/healthz").await.0, 200);
    assert_eq!(get(admin, "/readyz").await.0, 200);
    let (code, policy) = get(admin, "/policy").await;
    assert_eq!(code, 200);
    let policy: serde_json::Value = serde_json::from_str(&policy).unwrap();
    assert_eq!(policy["pack"], "default-guardrails");
    assert_eq!(policy["hash"].as_str().unwrap().len(), 12);
    assert!(policy["last_reload_error"].is_null());

    s.stop().await.unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let mut lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{log}");
    // Lines queued on different server threads may be written out of order; each
    // carries the time its decision was made (RFC 3339 in UTC, which sorts as text).
    lines.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    assert!(!log.contains(secret), "raw secret in the decision log");
    let first = &lines[0];
    assert_eq!(first["decision_id"], stop.decision_id.as_str());
    assert_eq!(first["action"], "stop");
    assert_eq!(first["tier"], "high");
    assert_eq!(first["policy_pack"], "default-guardrails");
    assert_eq!(first["hits"][0]["rule_id"], "dangerous-path-delete");
    assert_eq!(
        lines[2]["replay"]["output"],
        "token [REDACTED:github_token]"
    );
}

#[tokio::test]
async fn the_health_listener_serves_probes_only_and_mode_overrides_the_pack() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(ServeOptions {
        health_listen: Some("127.0.0.1:0".parse().unwrap()),
        mode: Some(toolgate::policy::Mode::Shadow),
        ..super::common::options(Some(default_pack_file(dir.path())))
    })
    .await
    .unwrap();
    let health = s.health_addr.unwrap();
    assert_eq!(get(health, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(get(health, "/readyz").await.0, 200);
    assert_eq!(
        get(health, "/metrics").await.0,
        404,
        "metrics stay off the pod IP"
    );
    assert_eq!(get(health, "/policy").await.0, 404);
    // Shadow mode: the would-be STOP is reported, the call allowed.
    let d = client(&s)
        .await
        .tool_call_start(start_req("shell.exec", r#"{"command":"rm -rf /"}"#))
        .await
        .unwrap()
        .decision();
    assert_eq!(d.action(), toolgate::proto::Action::Allow);
    assert_eq!(d.shadow_action(), toolgate::proto::Action::Stop);
    s.stop().await.unwrap();
}
