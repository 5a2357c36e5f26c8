//! The gRPC inline proxy end to end: an agent calls toolgate's ToolService, toolgate judges
//! and forwards to a real tonic tool server on 127.0.0.1, which records what reached it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_stream::StreamExt;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use toolgate::app::{Running, ServeOptions, start};
use toolgate::proto::tool_service_client::ToolServiceClient;
use toolgate::proto::tool_service_server::{ToolService, ToolServiceServer};
use toolgate::proto::{
    Action, InvokeRequest, InvokeResponse, InvokeStreamRequest, InvokeStreamResponse,
    ListPausesRequest, Resolution, ResolvePauseRequest,
};
use toolgate::proxy::tool_service::ToolUpstream;

use super::common::{client, ctx, default_pack_text};

const KEY: &str = "AKIAIOSFODNN7EXAMPLE";

/// What reached the tool server: the request and the metadata keys it came with.
#[derive(Debug, Clone)]
struct Seen {
    req: InvokeRequest,
    authorization: Option<String>,
    approver_token: bool,
    timeout: Option<String>,
}

/// A tool server. Tools: `echo` answers its `text` argument; `slow` answers after 3 s;
/// `fail` fails with a message quoting a key; `vault.read` answers with a key; `stream` sends its `chunks` one by one.
#[derive(Clone, Default)]
struct Tools {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Tools {
    fn record<T>(&self, r: &Request<T>, req: InvokeRequest) {
        let md = r.metadata();
        let text = |k: &str| md.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
        self.seen.lock().unwrap().push(Seen {
            req,
            authorization: text("authorization"),
            approver_token: md.get("x-toolgate-approver-token").is_some(),
            timeout: text("grpc-timeout"),
        });
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn tools_called(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.req.tool_name).collect()
    }
}

fn arg(req: &InvokeRequest, key: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&req.arguments_json).unwrap_or_default();
    v.get(key).cloned().unwrap_or_default()
}

#[tonic::async_trait]
impl ToolService for Tools {
    async fn invoke(&self, r: Request<InvokeRequest>) -> Result<Response<InvokeResponse>, Status> {
        let req = r.get_ref().clone();
        self.record(&r, req.clone());
        match req.tool_name.as_str() {
            "slow" => tokio::time::sleep(Duration::from_secs(3)).await,
            "fail" => {
                return Err(Status::permission_denied(format!(
                    "quota exhausted for key {KEY}"
                )));
            }
            "vault.read" => {
                return Ok(Response::new(InvokeResponse {
                    output: format!("the deploy key is {KEY}, keep it safe"),
                    ..Default::default()
                }));
            }
            _ => {}
        }
        Ok(Response::new(InvokeResponse {
            output: arg(&req, "text").as_str().unwrap_or("done").to_string(),
            ..Default::default()
        }))
    }

    type InvokeStreamStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<InvokeStreamResponse, Status>> + Send>,
    >;

    async fn invoke_stream(
        &self,
        r: Request<InvokeStreamRequest>,
    ) -> Result<Response<Self::InvokeStreamStream>, Status> {
        let m = r.get_ref().clone();
        let req = InvokeRequest {
            context: m.context,
            tool_name: m.tool_name,
            arguments_json: m.arguments_json,
            pause_id: m.pause_id,
        };
        self.record(&r, req.clone());
        let chunks: Vec<String> = arg(&req, "chunks")
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| c.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let out = tokio_stream::iter(chunks).then(|c| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(InvokeStreamResponse {
                output: c,
                ..Default::default()
            })
        });
        Ok(Response::new(Box::pin(out)))
    }
}

/// Starts the tool server on a free port; returns its URL.
async fn tool_server(tools: Tools) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(ToolServiceServer::new(tools))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

/// The default pack (time box lifted), holding or returning pauses, with one extra result
/// rule that stops: `SELF-DESTRUCT` in a tool's output.
fn pack(dir: &std::path::Path, on_pause: &str) -> std::path::PathBuf {
    let text = default_pack_text().replacen(
        "\nsync_rules:\n",
        "\nsync_rules:\n  - { id: self-destruct, applies_to: [tool_call_result], keywords: [\"SELF-DESTRUCT\"], action: stop, level: high, reason: \"the tool asked to self-destruct\" }\n",
        1,
    ) + &format!("\nproxy: {{ on_pause: {on_pause}, hold_timeout_s: 20 }}\n");
    let path = dir.join(format!("proxy-{on_pause}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

async fn proxy(upstream: &str, on_pause: &str, timeout: Duration) -> Running {
    proxy_trusting(upstream, on_pause, timeout, None).await
}

async fn proxy_trusting(
    upstream: &str,
    on_pause: &str,
    timeout: Duration,
    ca_pem: Option<Vec<u8>>,
) -> Running {
    let dir = tempfile::tempdir().unwrap().keep();
    start(ServeOptions {
        upstream: Some(ToolUpstream {
            url: upstream.to_string(),
            timeout,
            ca_pem,
        }),
        ..super::common::options(Some(pack(&dir, on_pause)))
    })
    .await
    .expect("toolgate starts")
}

async fn agent(s: &Running) -> ToolServiceClient<Channel> {
    ToolServiceClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap()
}

fn invoke(session: &str, tool: &str, args: &str) -> InvokeRequest {
    InvokeRequest {
        context: ctx(session),
        tool_name: tool.into(),
        arguments_json: args.into(),
        pause_id: String::new(),
    }
}

/// A tool server, toolgate in front of it, and an agent's client of toolgate.
async fn setup(on_pause: &str, timeout: Duration) -> (Tools, Running, ToolServiceClient<Channel>) {
    let tools = Tools::default();
    let tg = proxy(&tool_server(tools.clone()).await, on_pause, timeout).await;
    let a = agent(&tg).await;
    (tools, tg, a)
}

fn action(d: &Option<toolgate::proto::Decision>) -> Action {
    d.as_ref().expect("a decision").action()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_redacted_and_blocked_calls() {
    let (tools, tg, mut a) = setup("return", Duration::from_secs(10)).await;

    // Allowed: forwarded as it came; the agent gets both decisions. The upstream sees the
    // caller's own metadata and deadline, never toolgate's.
    let mut req = Request::new(invoke("p1", "notes.echo", r#"{"text":"hello"}"#));
    req.metadata_mut()
        .insert("authorization", "Bearer tool-token".parse().unwrap());
    req.metadata_mut().insert(
        "x-toolgate-approver-token",
        "not-for-upstream".parse().unwrap(),
    );
    req.set_timeout(Duration::from_secs(5));
    let r = a.invoke(req).await.unwrap().into_inner();
    assert!(r.forwarded && !r.is_error, "{r:?}");
    assert_eq!(r.output, "hello");
    assert_eq!(action(&r.start_decision), Action::Allow);
    assert_eq!(action(&r.result_decision), Action::Allow);
    let first = tools.seen().remove(0);
    assert_eq!(first.req.arguments_json, r#"{"text":"hello"}"#);
    assert_eq!(first.authorization.as_deref(), Some("Bearer tool-token"));
    assert!(!first.approver_token);
    let t = first.timeout.expect("the deadline goes upstream");
    assert!(
        t.ends_with('m') || t.ends_with('u') || t.ends_with('n'),
        "{t}"
    );

    // Redacted arguments: the upstream gets the redacted call.
    let r = a
        .invoke(invoke(
            "p1",
            "http.post",
            &format!(r#"{{"url":"https://example.com","text":"key {KEY}"}}"#),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(action(&r.start_decision), Action::Redact);
    let sent = tools.seen().pop().unwrap().req.arguments_json;
    assert!(!sent.contains(KEY) && sent.contains("[REDACTED"), "{sent}");
    // The echo of the redacted text passes; nothing of the key reaches the agent.
    assert!(!r.output.contains(KEY), "{}", r.output);

    // A redacted result: the tool answers with a key the agent never sees.
    let r = a
        .invoke(invoke("p1", "vault.read", r#"{"name":"deploy"}"#))
        .await
        .unwrap()
        .into_inner();
    assert!(r.forwarded && !r.is_error, "{r:?}");
    assert_eq!(action(&r.result_decision), Action::Redact);
    assert!(!r.output.contains(KEY), "{}", r.output);
    assert!(
        r.output.starts_with("the deploy key is [REDACTED"),
        "{}",
        r.output
    );

    // Blocked before the upstream: it records no call.
    let before = tools.seen().len();
    let r = a
        .invoke(invoke("p1", "shell.exec", r#"{"command":"rm -rf /"}"#))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.forwarded && r.is_error, "{r:?}");
    assert_eq!(action(&r.start_decision), Action::Stop);
    assert!(r.result_decision.is_none());
    assert!(!r.output.is_empty(), "the model is told why");
    assert_eq!(tools.seen().len(), before, "{:?}", tools.tools_called());

    // A result that must not reach the model is replaced by the reason.
    let r = a
        .invoke(invoke(
            "p1",
            "notes.echo",
            r#"{"text":"all good. SELF-DESTRUCT now"}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(r.forwarded && r.is_error);
    assert_eq!(action(&r.result_decision), Action::Stop);
    assert!(!r.output.contains("all good"), "{}", r.output);

    // Bad input is refused by name, not forwarded.
    let e = a.invoke(invoke("p1", "", "{}")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("tool_name"), "{}", e.message());
    let e = a
        .invoke(invoke("p1", "notes.echo", "{not json"))
        .await
        .unwrap_err();
    assert!(e.message().contains("arguments_json"), "{}", e.message());
    assert_eq!(tools.seen().len(), before + 1);
    tg.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_call_is_returned_then_resubmitted_with_its_approval() {
    let (tools, tg, mut a) = setup("return", Duration::from_secs(10)).await;
    // `delete_user` is critical in the default pack: it needs a human.
    let call = invoke("pr", "delete_user", r#"{"user_id": 42}"#);
    let r = a.invoke(call.clone()).await.unwrap().into_inner();
    assert_eq!(action(&r.start_decision), Action::Pause);
    assert!(!r.forwarded && r.is_error);
    let id = r.start_decision.unwrap().pause.unwrap().pause_id;
    assert!(
        r.output.contains(&id),
        "the model is told the pause id: {}",
        r.output
    );
    assert!(tools.seen().is_empty());

    // Resubmitted before anyone answers: still paused, still not forwarded.
    let again = InvokeRequest {
        pause_id: id.clone(),
        ..call.clone()
    };
    let r = a.invoke(again.clone()).await.unwrap().into_inner();
    assert_eq!(action(&r.start_decision), Action::Pause);
    assert!(tools.seen().is_empty());

    client(&tg)
        .await
        .resolve_pause(ResolvePauseRequest {
            pause_id: id.clone(),
            resolution: Resolution::Approve as i32,
            approver: "oncall".into(),
            note: String::new(),
        })
        .await
        .unwrap();
    let r = a.invoke(again.clone()).await.unwrap().into_inner();
    assert!(r.forwarded, "{r:?}");
    assert_eq!(action(&r.start_decision), Action::Allow);
    let seen = tools.seen();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].req.pause_id.is_empty(),
        "the approval stays with toolgate"
    );
    // An approval passes one call.
    let r = a.invoke(again).await.unwrap().into_inner();
    assert!(!r.forwarded);
    assert_eq!(tools.seen().len(), 1);
    tg.stop().await.unwrap();
}

async fn pending(tg: &Running, session: &str) -> String {
    let mut c = client(tg).await;
    for _ in 0..200 {
        let ps = c
            .list_pauses(ListPausesRequest {
                session_id: session.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .pauses;
        if let Some(p) = ps.first() {
            return p.pause_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pause appeared for {session}");
}

async fn resolve(tg: &Running, id: &str, approve: bool) {
    let resolution = if approve {
        Resolution::Approve
    } else {
        Resolution::Deny
    };
    client(tg)
        .await
        .resolve_pause(ResolvePauseRequest {
            pause_id: id.into(),
            resolution: resolution as i32,
            approver: "oncall".into(),
            note: String::new(),
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_waits_for_the_human_and_the_callers_deadline() {
    let (tools, tg, mut a) = setup("hold", Duration::from_secs(30)).await;

    // Approved while held: the same call goes on to the upstream.
    let mut a2 = a.clone();
    let held = tokio::spawn(async move {
        a2.invoke(invoke("h1", "delete_user", r#"{"user_id": 7}"#))
            .await
    });
    let id = pending(&tg, "h1").await;
    assert!(tools.seen().is_empty(), "nothing goes while held");
    assert!(!held.is_finished());
    resolve(&tg, &id, true).await;
    let r = held.await.unwrap().unwrap().into_inner();
    assert!(r.forwarded, "{r:?}");
    assert_eq!(action(&r.start_decision), Action::Allow);
    assert_eq!(tools.tools_called(), ["delete_user"]);

    // Denied while held: answered without forwarding.
    let mut a3 = a.clone();
    let held = tokio::spawn(async move {
        a3.invoke(invoke("h2", "delete_user", r#"{"user_id": 8}"#))
            .await
    });
    let id = pending(&tg, "h2").await;
    resolve(&tg, &id, false).await;
    let r = held.await.unwrap().unwrap().into_inner();
    assert!(!r.forwarded && r.is_error, "{r:?}");
    assert_ne!(action(&r.start_decision), Action::Allow);
    assert_eq!(tools.seen().len(), 1);

    // The caller's deadline bounds the hold: the call ends, nothing is forwarded, and the
    // pause stays for a human to answer later.
    let mut req = Request::new(invoke("h3", "delete_user", r#"{"user_id": 9}"#));
    req.set_timeout(Duration::from_millis(300));
    let t = std::time::Instant::now();
    let e = a.invoke(req).await.unwrap_err();
    assert!(
        matches!(
            e.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    pending(&tg, "h3").await;
    assert_eq!(tools.seen().len(), 1);
    tg.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_is_down_slow_or_failing_is_an_error_never_an_allow() {
    // Down: a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let tg = proxy(&url, "return", Duration::from_secs(5)).await;
    let e = agent(&tg)
        .await
        .invoke(invoke("d1", "notes.echo", r#"{"text":"hi"}"#))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains(&url), "{}", e.message());
    tg.stop().await.unwrap();

    let tools = Tools::default();
    let up = tool_server(tools.clone()).await;
    // Slower than the caller's deadline.
    let tg = proxy(&up, "return", Duration::from_secs(30)).await;
    let mut a = agent(&tg).await;
    let mut req = Request::new(invoke("d2", "slow", "{}"));
    req.set_timeout(Duration::from_millis(400));
    let t = std::time::Instant::now();
    let e = a.invoke(req).await.unwrap_err();
    assert!(
        matches!(
            e.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    // Failing: the upstream's own status, its message judged (the key is redacted).
    let e = a.invoke(invoke("d2", "fail", "{}")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("quota exhausted"), "{}", e.message());
    assert!(!e.message().contains(KEY), "{}", e.message());
    tg.stop().await.unwrap();

    // Slower than toolgate's own upstream timeout, with no caller deadline.
    let tg = proxy(&up, "return", Duration::from_millis(300)).await;
    let e = agent(&tg)
        .await
        .invoke(invoke("d3", "slow", "{}"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::DeadlineExceeded, "{e:?}");
    assert!(e.message().contains("did not answer"), "{}", e.message());
    tg.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_starts_late_or_restarts_is_connected_again() {
    // Nothing listens yet: the call is UNAVAILABLE.
    let spare = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = spare.local_addr().unwrap();
    drop(spare);
    let tg = proxy(&format!("http://{addr}"), "return", Duration::from_secs(5)).await;
    let mut a = agent(&tg).await;
    let e = a
        .invoke(invoke("r1", "notes.echo", r#"{"text":"early"}"#))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");

    // The tool server comes up on that address: the next call connects and goes through.
    let serve = |tools: Tools| async move {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(
            Server::builder()
                .add_service(ToolServiceServer::new(tools))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                ),
        );
        (stop, task)
    };
    // An echo that went through: forwarded, and answered by the tool server.
    async fn echoed(a: &mut ToolServiceClient<Channel>, text: &str) {
        let args = serde_json::json!({ "text": text }).to_string();
        let r = a
            .invoke(invoke("r1", "notes.echo", &args))
            .await
            .unwrap()
            .into_inner();
        assert!(r.forwarded, "{r:?}");
        assert_eq!(r.output, text);
    }
    let first = Tools::default();
    let (stop, task) = serve(first.clone()).await;
    echoed(&mut a, "one").await;

    // It restarts: the old connection is closed (GOAWAY), and the next call reaches the
    // new server over a new connection.
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    let second = Tools::default();
    let (_stop, _task) = serve(second.clone()).await;
    echoed(&mut a, "two").await;
    assert_eq!(first.seen().len(), 1);
    assert_eq!(second.seen().len(), 1);
    tg.stop().await.unwrap();
}

async fn stream_all(
    a: &mut ToolServiceClient<Channel>,
    session: &str,
    chunks: &[&str],
) -> Vec<InvokeStreamResponse> {
    let args = serde_json::json!({ "chunks": chunks }).to_string();
    let mut s = a
        .invoke_stream(InvokeStreamRequest {
            context: ctx(session),
            tool_name: "logs.tail".into(),
            arguments_json: args,
            pause_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(m) = s.next().await {
        out.push(m.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_result_is_judged_as_it_passes() {
    let (tools, tg, mut a) = setup("return", Duration::from_secs(10)).await;

    // A key split across two pieces never leaves whole or in part.
    let msgs = stream_all(
        &mut a,
        "s1",
        &[
            "line 1 ok\nthe key: AKIAIOSF",
            "ODNN7EXAMPLE\n",
            "line 3 ok\n",
        ],
    )
    .await;
    assert!(msgs[0].forwarded);
    assert_eq!(action(&msgs[0].start_decision), Action::Allow);
    let text: String = msgs.iter().map(|m| m.output.as_str()).collect();
    assert!(!text.contains("AKIAIOSF"), "{text}");
    assert!(text.starts_with("line 1 ok\nthe key: [REDACTED"), "{text}");
    assert!(text.ends_with("line 3 ok\n"), "{text}");
    let last = msgs.last().unwrap();
    assert_eq!(action(&last.result_decision), Action::Redact);
    assert!(
        msgs[1..msgs.len() - 1]
            .iter()
            .all(|m| m.result_decision.is_none() && m.chunk_decision.is_some())
    );

    // A STOP mid-stream ends it with the decision; what followed is never released.
    let msgs = stream_all(
        &mut a,
        "s2",
        &["fine\n", "SELF-DESTRUCT\n", "after the stop\n"],
    )
    .await;
    let text: String = msgs.iter().map(|m| m.output.as_str()).collect();
    assert!(!text.contains("after the stop"), "{text}");
    assert!(!text.contains("SELF-DESTRUCT"), "{text}");
    let stop = msgs.last().unwrap();
    assert_eq!(action(&stop.chunk_decision), Action::Stop, "{msgs:?}");

    // A blocked call never opens the upstream stream.
    let before = tools.seen().len();
    let mut s = a
        .invoke_stream(InvokeStreamRequest {
            context: ctx("s3"),
            tool_name: "shell.exec".into(),
            arguments_json: r#"{"command":"rm -rf /"}"#.into(),
            pause_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let only = s.next().await.unwrap().unwrap();
    assert!(!only.forwarded && only.is_error);
    assert_eq!(action(&only.start_decision), Action::Stop);
    assert!(s.next().await.is_none());
    assert_eq!(tools.seen().len(), before);
    tg.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_checked_against_the_given_ca() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let identity =
        tonic::transport::Identity::from_pem(ck.cert.pem(), ck.signing_key.serialize_pem());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let tools = Tools::default();
    tokio::spawn(
        Server::builder()
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .unwrap()
            .add_service(ToolServiceServer::new(tools.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let url = format!("https://localhost:{port}");

    // Trusting the server's certificate: the call goes through TLS.
    let tg = proxy_trusting(
        &url,
        "return",
        Duration::from_secs(5),
        Some(ck.cert.pem().into_bytes()),
    )
    .await;
    let r = agent(&tg)
        .await
        .invoke(invoke("t1", "notes.echo", r#"{"text":"over tls"}"#))
        .await
        .unwrap()
        .into_inner();
    assert!(r.forwarded, "{r:?}");
    assert_eq!(r.output, "over tls");
    tg.stop().await.unwrap();

    // Not trusting it: the handshake fails, the call is UNAVAILABLE and never forwarded.
    let tg = proxy(&url, "return", Duration::from_secs(5)).await;
    let e = agent(&tg)
        .await
        .invoke(invoke("t2", "notes.echo", r#"{"text":"hi"}"#))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains(&url), "{}", e.message());
    assert_eq!(tools.seen().len(), 1);
    tg.stop().await.unwrap();
}
