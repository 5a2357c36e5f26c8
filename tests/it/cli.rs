use std::io::Write;
use std::process::{Command, Stdio};

fn toolgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
}

#[test]
fn validate_accepts_shipped_packs_and_names_path_and_line_on_errors() {
    {
        let pack = "deploy/policies/default.yaml";
        let out = toolgate().args(["validate", pack]).output().unwrap();
        assert!(
            out.status.success(),
            "{pack}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "policy_pack: x\nversion: \"1\"\nsync_rules:\n  - id: mine\n    regex: \"([a-z\"\n",
    )
    .unwrap();
    let out = toolgate().arg("validate").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:5: sync_rules[0].regex: invalid regex"),
        "{err}"
    );
}

#[test]
fn check_prints_the_decision_as_json() {
    let mut child = toolgate()
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"event_type":"tool_call_start","tool_name":"shell.exec","arguments":{"command":"git push --force origin main"}}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["action"], "retry");
    assert_eq!(d["hits"][0]["rule_id"], "git-force-push");

    let out = toolgate()
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(br#"{"event_type":"tool_call_start","tool_name":""}"#)
                .unwrap();
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tool_name: must not be empty"));
}

#[test]
fn serve_exits_64_on_a_bad_pack() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "policy_pack: x\nversion: \"1\"\nbogus: true\n").unwrap();
    let out = toolgate()
        .args(["serve", "--listen", "127.0.0.1:0", "--policy"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
}

#[test]
fn rules_lists_the_catalog() {
    let out = toolgate().arg("rules").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [
        "destructive-shell",
        "secrets",
        "pii",
        "injection-patterns",
        "tool-access",
        "plan-limits",
    ] {
        assert!(text.contains(id), "{id} missing from:\n{text}");
    }
}

/// The regression corpus runs through `toolgate test`, exactly as a policy author would.
#[test]
fn corpus_passes_through_toolgate_test() {
    let out = toolgate().args(["test", "tests/cases"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or("");
    let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
    assert!(
        passed >= 150,
        "corpus has {passed} cases; want at least 150"
    );
    assert!(last.ends_with(" 0 failed"), "{last}");
}

/// `toolgate pauses` against a running server that requires the approver token: list the
/// pending pause, approve it (refused without the token), and the resubmitted call passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_command_lists_and_approves_against_a_running_server() {
    use super::common::{DecisionOf, client, server_with_token, start_req};
    use toolgate::proto::Action;

    let s = server_with_token(None, Some("s3cret-approver")).await;
    let mut c = client(&s).await;
    // `delete_user` is critical in the default pack, which needs approval.
    let req = start_req("delete_user", r#"{"user_id": 42}"#);
    let d = c.tool_call_start(req.clone()).await.unwrap().decision();
    assert_eq!(d.action, Action::Pause as i32);
    let id = d.pause.unwrap().pause_id;
    assert!(id.starts_with("pause-"), "{id}");

    let addr = format!("http://{}", s.addr);
    let run_as = |args: Vec<String>, token: Option<&'static str>| {
        tokio::task::spawn_blocking(move || {
            let mut cmd = toolgate();
            cmd.args(args).env_remove("TOOLGATE_APPROVER_TOKEN");
            if let Some(t) = token {
                cmd.env("TOOLGATE_APPROVER_TOKEN", t);
            }
            cmd.output().unwrap()
        })
    };
    let run = |args: Vec<String>| run_as(args, Some("s3cret-approver"));
    let out = run(vec![
        "pauses".into(),
        "list".into(),
        "--server".into(),
        addr.clone(),
    ])
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        listed.contains(&id) && listed.contains("pending"),
        "{listed}"
    );
    assert!(listed.contains("tool=delete_user"), "{listed}");

    // Without the token the agent's own client cannot approve.
    let approve = vec![
        "pauses".to_string(),
        "approve".into(),
        id.clone(),
        "--approver".into(),
        "mallory".into(),
        "--server".into(),
        addr.clone(),
    ];
    let out = run_as(approve, None).await.unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("approver token"), "{err}");

    let out = run(vec![
        "pauses".into(),
        "approve".into(),
        id.clone(),
        "--approver".into(),
        "alice".into(),
        "--note".into(),
        "ticket 4711".into(),
        "--server".into(),
        addr.clone(),
    ])
    .await
    .unwrap();
    let approved = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(approved.contains("approved"), "{approved}");

    let mut again = req.clone();
    again.pause_id = id.clone();
    let d = c.tool_call_start(again).await.unwrap().decision();
    assert_eq!(d.action, Action::Allow as i32, "{:?}", d.hits);
    assert!(d.hits.iter().any(|h| h.rule_id == "approved"));

    // Approving it twice is refused, with the server's reason and a non-zero exit.
    let out = run(vec![
        "pauses".into(),
        "deny".into(),
        id,
        "--approver".into(),
        "bob".into(),
        "--server".into(),
        addr,
    ])
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already used"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.stop().await.unwrap();
}
