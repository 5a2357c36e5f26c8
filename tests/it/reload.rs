use std::time::Duration;

use toolgate::proto::{Action, StreamLlmChunksRequest};

use super::common::{DecisionOf, client, ctx, server, start_req};

const V1: &str = "policy_pack: live\nversion: \"1\"\ngateway: { sync: { timeout_ms: 5000 } }\nsync_rules: [{ id: secrets }]\n";
const V2: &str = "policy_pack: live\nversion: \"2\"\ngateway: { sync: { timeout_ms: 5000 } }\nsync_rules:\n  - { id: secrets }\n  - { id: no-frobnicate, keywords: [frobnicate], action: stop }\n";

/// Polls until the server reports `version` (the reloader polls the file once a second).
async fn wait_for_version(
    c: &mut toolgate::proto::guard_service_client::GuardServiceClient<tonic::transport::Channel>,
    version: &str,
) {
    for _ in 0..100 {
        let d = c
            .tool_call_start(start_req("fs.list", "{}"))
            .await
            .unwrap()
            .decision();
        if d.policy_version.starts_with(version) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("policy version {version} never became active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_change_reloads_and_a_bad_pack_never_replaces_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.yaml");
    std::fs::write(&path, V1).unwrap();
    let s = server(Some(path.clone())).await;
    let mut c = client(&s).await;
    let frob = || start_req("shell.exec", r#"{"command":"frobnicate the widgets"}"#);

    assert_eq!(
        c.tool_call_start(frob()).await.unwrap().decision().action(),
        Action::Allow
    );

    // A stream opened on version 1 keeps version 1 for all of its chunks.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut inbound = c
        .stream_llm_chunks(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(StreamLlmChunksRequest {
        context: ctx("r1"),
        chunk: "hello ".into(),
        r#final: false,
    })
    .await
    .unwrap();
    let first = inbound.message().await.unwrap().unwrap().decision.unwrap();
    assert!(first.policy_version.starts_with("1@"));

    std::fs::write(&path, V2).unwrap();
    wait_for_version(&mut c, "2@").await;
    let d = c.tool_call_start(frob()).await.unwrap().decision();
    assert_eq!(d.action(), Action::Stop);

    tx.send(StreamLlmChunksRequest {
        context: None,
        chunk: "frobnicate".into(),
        r#final: true,
    })
    .await
    .unwrap();
    let last = inbound.message().await.unwrap().unwrap().decision.unwrap();
    assert!(
        last.policy_version.starts_with("1@"),
        "in-flight stream stays on its version"
    );
    assert_eq!(last.action(), Action::Allow);

    // A broken pack is rejected; version 2 keeps serving and the error is recorded.
    std::fs::write(
        &path,
        "policy_pack: live\nversion: \"3\"\nsync_rules: [{ id: nope }]\n",
    )
    .unwrap();
    for _ in 0..100 {
        if s.store.status().last_error.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let err = s.store.status().last_error.expect("reload error recorded");
    assert!(
        err.contains("sync_rules[0].id: unknown rule id `nope`"),
        "{err}"
    );
    let d = c.tool_call_start(frob()).await.unwrap().decision();
    assert!(d.policy_version.starts_with("2@"));
    assert_eq!(d.action(), Action::Stop);
    s.stop().await.unwrap();
}
