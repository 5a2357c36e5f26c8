//! mTLS on the gRPC listener: certificates from a test CA (rcgen), the caller's identity
//! from the client certificate, caller-scoped rules and tiers, unknown callers refused,
//! approvers, and an agent that cannot approve its own pause.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use toolgate::app::{Running, ServeOptions, start};
use toolgate::proto::guard_service_client::GuardServiceClient;
use toolgate::proto::{
    Action, EventContext, GetSessionRequest, ListPausesRequest, Resolution, ResolvePauseRequest,
    RiskLevel, ToolCallStartRequest,
};
use toolgate::tls::TlsFiles;

const AGENT_A: &str = "spiffe://cluster.local/ns/agents/sa/agent-a";
const AGENT_B: &str = "spiffe://cluster.local/ns/agents/sa/agent-b";
const ONCALL: &str = "spiffe://cluster.local/ns/ops/sa/oncall";
const STRANGER: &str = "spiffe://other.example/ns/x/sa/y";

const PACK: &str = r#"
policy_pack: mtls-test
version: "1"
gateway:
  sync: { timeout_ms: 5000, fail_open: false }
tool_risks:
  ci.run: low
sync_rules:
  - id: wire-needs-human
    regex: "wire transfer"
    action: pause
    applies_to: [tool_call_start]
  - id: agent-b-no-deploys
    regex: "deploy"
    action: stop
    applies_to: [tool_call_start]
    callers: ["spiffe://cluster.local/ns/agents/sa/agent-b"]
callers:
  known: ["spiffe://cluster.local/ns/agents/sa/*", "spiffe://cluster.local/ns/ops/sa/*"]
  unknown: deny
  tool_risks:
    - callers: ["spiffe://cluster.local/ns/agents/sa/agent-b"]
      tools: { ci.run: high }
approvers: ["spiffe://cluster.local/ns/ops/sa/oncall"]
"#;

/// A CA, and certificates it issues.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca {
            issuer: CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf with these DNS names and, when given, a SPIFFE ID: (cert PEM, key PEM).
    fn leaf(&self, dns: &[&str], spiffe: Option<&str>) -> (String, String) {
        let mut p =
            CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
        if let Some(id) = spiffe {
            p.subject_alt_names
                .push(SanType::URI(id.try_into().unwrap()));
        }
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// An HTTPS client that trusts `ca`, presents a certificate for `id` from it, and reaches
/// `localhost` at `at`.
fn https_client(ca: &Ca, id: &str, at: std::net::SocketAddr) -> reqwest::Client {
    let (cert, key) = ca.leaf(&[], Some(id));
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap())
        .resolve("localhost", at)
        .build()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A server on loopback with the test pack, TLS as given, and nothing else.
fn options(dir: &Path, tls: TlsFiles) -> ServeOptions {
    ServeOptions {
        tls: Some(tls),
        ..super::common::options(Some(write(dir, "pack.yaml", PACK)))
    }
}

/// Server files from `ca` in `dir`: a certificate for localhost, its key, and the CA as
/// the client CA.
fn server_files(dir: &Path, ca: &Ca) -> TlsFiles {
    let (cert, key) = ca.leaf(&["localhost"], None);
    TlsFiles {
        cert: write(dir, "server.pem", &cert),
        key: write(dir, "server.key", &key),
        client_ca: Some(write(dir, "ca.pem", &ca.pem())),
    }
}

struct Setup {
    ca: Ca,
    server: Running,
    dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("toolgate test CA");
    let tls = server_files(dir.path(), &ca);
    let server = start(ServeOptions {
        tls_poll: Duration::from_millis(100),
        ..options(dir.path(), tls)
    })
    .await
    .expect("server starts");
    Setup { ca, server, dir }
}

/// A client trusting `trust` and, when given, presenting `identity` (cert PEM, key PEM).
async fn connect(
    s: &Running,
    trust: &str,
    identity: Option<(String, String)>,
) -> Result<GuardServiceClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(trust))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let ch = Channel::from_shared(format!("https://localhost:{}", s.addr.port()))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await?;
    Ok(GuardServiceClient::new(ch))
}

async fn as_agent(st: &Setup, id: &str) -> GuardServiceClient<Channel> {
    connect(&st.server, &st.ca.pem(), Some(st.ca.leaf(&[], Some(id))))
        .await
        .expect("an mTLS client connects")
}

fn call(session: &str, tool: &str, args: &str) -> ToolCallStartRequest {
    ToolCallStartRequest {
        context: Some(EventContext {
            session_id: session.into(),
            step_id: "1".into(),
            ..Default::default()
        }),
        tool_name: tool.into(),
        arguments_json: args.into(),
        pause_id: String::new(),
    }
}

#[tokio::test]
async fn without_a_client_certificate_or_with_one_from_another_ca_nothing_is_answered() {
    let st = setup().await;
    // No client certificate: the handshake (or the first call on it) fails.
    let refused = match connect(&st.server, &st.ca.pem(), None).await {
        Err(_) => true,
        Ok(mut c) => c.tool_call_start(call("s", "ci.run", "{}")).await.is_err(),
    };
    assert!(refused, "a client without a certificate is refused");
    // The right name, signed by a CA the server does not trust.
    let rogue = Ca::new("rogue CA");
    let refused = match connect(
        &st.server,
        &st.ca.pem(),
        Some(rogue.leaf(&[], Some(AGENT_A))),
    )
    .await
    {
        Err(_) => true,
        Ok(mut c) => c.tool_call_start(call("s", "ci.run", "{}")).await.is_err(),
    };
    assert!(refused, "a certificate from another CA is refused");
    // The server still answers the right client.
    let mut c = as_agent(&st, AGENT_A).await;
    let d = c
        .tool_call_start(call("s", "ci.run", r#"{"job":"lint"}"#))
        .await
        .expect("the right identity passes")
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(d.action(), Action::Allow);
    assert_eq!(d.caller, AGENT_A, "the decision names the verified caller");
    st.server.stop().await.unwrap();
}

#[tokio::test]
async fn a_caller_scoped_rule_and_tier_apply_to_their_caller_only_and_strangers_are_refused() {
    let st = setup().await;
    let args = r#"{"job":"deploy to staging"}"#;
    let mut a = as_agent(&st, AGENT_A).await;
    let da = a
        .tool_call_start(call("sa", "ci.run", args))
        .await
        .unwrap()
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(da.action(), Action::Allow, "{da:?}");
    assert_eq!(da.risk.as_ref().unwrap().level(), RiskLevel::Low);
    let mut b = as_agent(&st, AGENT_B).await;
    let db = b
        .tool_call_start(call("sb", "ci.run", args))
        .await
        .unwrap()
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(db.action(), Action::Stop, "{db:?}");
    assert!(db.hits.iter().any(|h| h.rule_id == "agent-b-no-deploys"));
    assert_eq!(db.caller, AGENT_B);
    assert_eq!(
        db.risk.as_ref().unwrap().level(),
        RiskLevel::High,
        "agent-b's own tier for ci.run"
    );
    // A certificate from the trusted CA, but an identity the pack does not know.
    let mut x = as_agent(&st, STRANGER).await;
    let err = x
        .tool_call_start(call("sx", "ci.run", "{}"))
        .await
        .expect_err("an unknown caller is refused");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert!(err.message().contains(STRANGER), "{}", err.message());
    // The caller cannot be claimed in the request: labels are just labels.
    let mut req = call("sx", "ci.run", "{}");
    req.context
        .as_mut()
        .unwrap()
        .labels
        .insert("caller".into(), AGENT_A.into());
    assert_eq!(
        x.tool_call_start(req).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    st.server.stop().await.unwrap();
}

#[tokio::test]
async fn an_agent_cannot_approve_its_own_pause_and_sees_only_its_own_sessions() {
    let st = setup().await;
    let mut a = as_agent(&st, AGENT_A).await;
    let d = a
        .tool_call_start(call(
            "pay-1",
            "bank.send",
            r#"{"memo":"wire transfer 900"}"#,
        ))
        .await
        .unwrap()
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(d.action(), Action::Pause, "{d:?}");
    let pause_id = d.pause.unwrap().pause_id;
    let resolve = |approve: bool| ResolvePauseRequest {
        pause_id: pause_id.clone(),
        resolution: if approve {
            Resolution::Approve
        } else {
            Resolution::Deny
        } as i32,
        approver: "me".into(),
        note: String::new(),
    };
    // The agent is no approver, and could never approve this pause anyway.
    let err = a.resolve_pause(resolve(true)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    // Another agent sees neither the session nor the pause, and cannot resolve it.
    let mut b = as_agent(&st, AGENT_B).await;
    let err = b
        .get_session(GetSessionRequest {
            session_id: "pay-1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    let listed = b
        .list_pauses(ListPausesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .pauses;
    assert!(listed.is_empty(), "{listed:?}");
    assert_eq!(
        b.resolve_pause(resolve(true)).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    // The agent sees its own session and pause.
    a.get_session(GetSessionRequest {
        session_id: "pay-1".into(),
    })
    .await
    .expect("its own session");
    let mine = a
        .list_pauses(ListPausesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .pauses;
    assert_eq!(mine.len(), 1);
    // The approver resolves it with `toolgate pauses` over mTLS, and the record names the
    // verified identity.
    let (cert, key) = st.ca.leaf(&[], Some(ONCALL));
    let d = st.dir.path();
    let tls = [
        ("--tls-ca", write(d, "cli-ca.pem", &st.ca.pem())),
        ("--tls-cert", write(d, "cli.pem", &cert)),
        ("--tls-key", write(d, "cli.key", &key)),
    ];
    let server = format!("https://localhost:{}", st.server.addr.port());
    // Off the runtime's thread: the server answers on it.
    let cli = |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
        c.arg("pauses").args(args).arg("--server").arg(&server);
        for (flag, path) in &tls {
            c.arg(flag).arg(path);
        }
        tokio::task::spawn_blocking(move || c.output().unwrap())
    };
    let listed = cli(&["list"]).await.unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&pause_id));
    let approved = cli(&["approve", &pause_id, "--approver", "oncall-human"])
        .await
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    let p = a
        .list_pauses(ListPausesRequest {
            session_id: "pay-1".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .pauses
        .remove(0);
    assert_eq!(p.approver, format!("oncall-human ({ONCALL})"));
    st.server.stop().await.unwrap();
}

#[tokio::test]
async fn an_approver_identity_cannot_approve_a_pause_its_own_call_made() {
    let st = setup().await;
    let mut oncall = as_agent(&st, ONCALL).await;
    let d = oncall
        .tool_call_start(call("ops-1", "bank.send", r#"{"memo":"wire transfer 5"}"#))
        .await
        .unwrap()
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(d.action(), Action::Pause);
    let err = oncall
        .resolve_pause(ResolvePauseRequest {
            pause_id: d.pause.unwrap().pause_id,
            resolution: Resolution::Approve as i32,
            approver: "oncall".into(),
            note: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert!(err.message().contains("its own pause"), "{}", err.message());
    st.server.stop().await.unwrap();
}

#[tokio::test]
async fn a_rotated_server_certificate_is_served_to_new_connections() {
    let st = setup().await;
    let dir = st.dir.path();
    // A new CA signs the new server certificate; the client CA file stays.
    let next = Ca::new("next server CA");
    let (cert, key) = next.leaf(&["localhost"], None);
    // Key first, then the certificate: the watcher keeps the old pair until both match.
    std::fs::write(dir.join("server.key"), key).unwrap();
    std::fs::write(dir.join("server.pem"), cert).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let c = connect(
            &st.server,
            &next.pem(),
            Some(st.ca.leaf(&[], Some(AGENT_A))),
        )
        .await;
        if let Ok(mut c) = c
            && c.tool_call_start(call("r", "ci.run", "{}")).await.is_ok()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    st.server.stop().await.unwrap();
}

#[tokio::test]
async fn the_mcp_proxy_over_mtls_refuses_an_unknown_caller_before_reading_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("toolgate test CA");
    let tls = server_files(dir.path(), &ca);
    // An upstream that is never there: a known caller gets as far as forwarding (502).
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}/mcp", dead.local_addr().unwrap());
    drop(dead);
    let server = start(ServeOptions {
        mcp: Some(toolgate::proxy::mcp::McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream,
            timeout: Duration::from_secs(5),
            max_open: 64,
        }),
        ..options(dir.path(), tls)
    })
    .await
    .expect("server starts");
    let url = format!("https://localhost:{}/mcp", server.mcp_addr.unwrap().port());
    let post = |id: &str| {
        let client = https_client(&ca, id, server.mcp_addr.unwrap());
        let url = url.clone();
        async move {
            client
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ci.run","arguments":{}}}"#)
                .send()
                .await
                .unwrap()
        }
    };
    let refused = post(STRANGER).await;
    assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
    let body = refused.text().await.unwrap();
    assert!(body.contains(STRANGER), "{body}");
    let known = post(AGENT_A).await;
    assert_eq!(known.status(), reqwest::StatusCode::BAD_GATEWAY);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn admin_off_loopback_needs_tls() {
    let dir = tempfile::tempdir().unwrap();
    let tls = server_files(dir.path(), &Ca::new("unused"));
    let err = start(ServeOptions {
        admin_listen: Some("0.0.0.0:0".parse().unwrap()),
        tls: None,
        ..options(dir.path(), tls)
    })
    .await
    .err()
    .expect("refused without TLS");
    assert!(err.to_string().contains("--admin-listen"), "{err}");
}

#[tokio::test]
async fn admin_off_loopback_is_served_over_mtls_only() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("toolgate test CA");
    let tls = server_files(dir.path(), &ca);
    let server = start(ServeOptions {
        admin_listen: Some("0.0.0.0:0".parse().unwrap()),
        ..options(dir.path(), tls)
    })
    .await
    .expect("server starts");
    let port = server.admin_addr.unwrap().port();
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Plain HTTP gets nothing.
    let plain = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    let client = https_client(&ca, ONCALL, at);
    let r = client
        .get(format!("https://localhost:{port}/metrics"))
        .send()
        .await
        .expect("metrics over mTLS");
    assert!(r.status().is_success());
    assert!(r.text().await.unwrap().contains("toolgate_"));
    server.stop().await.unwrap();
}

#[tokio::test]
async fn the_review_api_over_mtls_judges_as_its_caller_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("toolgate test CA");
    let tls = server_files(dir.path(), &ca);
    let server = start(ServeOptions {
        review: Some(toolgate::app::ReviewListen {
            listen: "127.0.0.1:0".parse().unwrap(),
            timeout: Duration::from_secs(5),
        }),
        ..options(dir.path(), tls)
    })
    .await
    .expect("server starts");
    let at = server.review_addr.unwrap();
    let post = |id: &str| {
        let client = https_client(&ca, id, at);
        async move {
            client
                .post(format!("https://localhost:{}/v1/safety/review", at.port()))
                .header("content-type", "application/json")
                .body(super::review::privacy_export())
                .send()
                .await
                .unwrap()
        }
    };
    let refused = post(STRANGER).await;
    assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains(STRANGER));
    let answered = post(AGENT_A).await;
    assert_eq!(answered.status(), reqwest::StatusCode::OK);
    server.stop().await.unwrap();
}
