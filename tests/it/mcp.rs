//! Proxy mode against real MCP peers: an upstream server built with the official Rust SDK
//! (rmcp) on loopback, and rmcp's Streamable HTTP client (raw HTTP for edge cases) talking
//! to it through toolgate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ProgressNotificationParam, RequestMetaObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    Peer, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde_json::{Value, json};
use toolgate::app::{Running, ServeOptions, start};
use toolgate::proxy::mcp::McpConfig;
use toolgate::proxy::sse::SseParser;
use toolgate::telemetry::log::Sink;
use toolgate::telemetry::trace::TraceConfig;

use super::common::{Otlp, default_pack_file, default_pack_text, metric_value, spans_of};

const AWS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const EMAIL: &str = "jane.doe@corp.example";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ShellArgs {
    command: String,
}

/// What the upstream saw: each tool call by name, and each HTTP request's headers.
#[derive(Clone, Default)]
struct Seen {
    calls: Arc<Mutex<Vec<String>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
    /// Lets `wait_then_leak` answer; the test opens it once it has seen the progress event.
    gate: Arc<tokio::sync::Notify>,
}

impl Seen {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

#[derive(Clone)]
struct Tools {
    seen: Seen,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Tools {
    #[tool(description = "Returns its text")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        self.seen.calls.lock().unwrap().push("echo".into());
        text
    }

    #[tool(description = "Returns a configuration dump that holds a cloud key")]
    fn leak(&self) -> String {
        self.seen.calls.lock().unwrap().push("leak".into());
        format!("aws_access_key_id = {AWS_KEY}\nowner: {EMAIL}")
    }

    #[tool(name = "shell.exec", description = "Runs a shell command")]
    fn shell_exec(&self, Parameters(ShellArgs { command }): Parameters<ShellArgs>) -> String {
        self.seen.calls.lock().unwrap().push("shell.exec".into());
        format!("ran {command}")
    }

    #[tool(description = "Reports progress, waits for the test, then leaks a key")]
    async fn wait_then_leak(
        &self,
        meta: RequestMetaObject,
        client: Peer<RoleServer>,
    ) -> Result<String, rmcp::ErrorData> {
        self.seen
            .calls
            .lock()
            .unwrap()
            .push("wait_then_leak".into());
        if let Some(token) = meta.get_progress_token() {
            let _ = client
                .notify_progress(ProgressNotificationParam::new(token, 1.0).with_total(2.0))
                .await;
        }
        self.seen.gate.notified().await;
        Ok(format!("done; key {AWS_KEY}"))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// An rmcp Streamable HTTP server on 127.0.0.1:0 at `/mcp`; returns its URL.
async fn upstream(seen: Seen) -> String {
    upstream_with(
        seen,
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    )
    .await
}

/// The same server, stateless, answering plain JSON bodies instead of event streams.
async fn json_upstream(seen: Seen) -> String {
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(None)
        .with_legacy_session_mode(false)
        .with_json_response(true);
    upstream_with(seen, config).await
}

async fn upstream_with(seen: Seen, config: StreamableHttpServerConfig) -> String {
    let tools = Tools {
        seen: seen.clone(),
        tool_router: Tools::tool_router(),
    };
    let service: StreamableHttpService<Tools, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(tools.clone()), Default::default(), config);
    let headers = seen.headers.clone();
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let headers = headers.clone();
                    async move {
                        headers.lock().unwrap().push(req.headers().clone());
                        next.run(req).await
                    }
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

pub(super) struct Proxy {
    pub(super) running: Running,
    pub(super) url: String,
    pub(super) log: PathBuf,
    _dir: tempfile::TempDir,
}

pub(super) async fn proxy(upstream: &str, tracing: TraceConfig, pack: Option<&str>) -> Proxy {
    proxy_with(upstream, tracing, pack, Duration::from_secs(30)).await
}

pub(super) async fn proxy_with(
    upstream: &str,
    tracing: TraceConfig,
    pack: Option<&str>,
    timeout: Duration,
) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let policy = match pack {
        Some(text) => {
            let p = dir.path().join("pack.yaml");
            std::fs::write(&p, text).unwrap();
            p
        }
        None => default_pack_file(dir.path()),
    };
    let log = dir.path().join("decisions.log");
    let running = start(ServeOptions {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        decision_log: Some(Sink::File {
            path: log.clone(),
            max_bytes: 10 << 20,
            keep: 1,
        }),
        tracing,
        mcp: Some(McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: upstream.to_string(),
            timeout,
            max_open: 1024,
        }),
        ..super::common::options(Some(policy))
    })
    .await
    .expect("server starts");
    let url = format!("http://{}/mcp", running.mcp_addr.unwrap());
    Proxy {
        running,
        url,
        log,
        _dir: dir,
    }
}

pub(super) fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

pub(super) fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) async fn connect(
    url: &str,
    headers: HashMap<HeaderName, HeaderValue>,
) -> rmcp::service::RunningService<rmcp::RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(headers),
    );
    ClientConfig::default().serve(transport).await.unwrap()
}

async fn scrape(r: &Running) -> String {
    reqwest::get(format!("http://{}/metrics", r.admin_addr.unwrap()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_mcp_client_through_the_proxy_is_guarded() {
    let seen = Seen::default();
    let up = upstream(seen.clone()).await;
    let p = proxy(&up, TraceConfig::default(), None).await;
    let mut headers = HashMap::new();
    headers.insert(
        HeaderName::from_static("x-toolgate-tenant"),
        HeaderValue::from_static("acme"),
    );
    let client = connect(&p.url, headers).await;

    // initialize (done by connect) and tools/list pass through.
    let names: Vec<String> = client
        .list_tools(None)
        .await
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for want in ["echo", "leak", "shell.exec", "wait_then_leak"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }

    // A benign call is forwarded and its result comes back unchanged.
    let r = client
        .call_tool(
            CallToolRequestParams::new("echo").with_arguments(args(json!({"text": "hello"}))),
        )
        .await
        .unwrap();
    let r = serde_json::to_value(&r).unwrap();
    assert_eq!(text_of(&r), "hello");
    assert_ne!(r["isError"], true);
    assert_eq!(seen.calls(), ["echo"]);

    // A destructive call is answered by the proxy and never reaches the upstream.
    let r = client
        .call_tool(
            CallToolRequestParams::new("shell.exec")
                .with_arguments(args(json!({"command": "rm -rf /"}))),
        )
        .await
        .unwrap();
    let r = serde_json::to_value(&r).unwrap();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("stopped"), "{r}");
    let meta = &r["_meta"]["toolgate/decision"];
    assert_eq!(meta["action"], "stop", "{r}");
    assert!(meta["decision_id"].as_str().is_some_and(|d| !d.is_empty()));
    assert!(
        meta["rule_ids"]
            .as_array()
            .unwrap()
            .contains(&json!("dangerous-path-delete")),
        "{meta}"
    );
    assert_eq!(
        seen.calls(),
        ["echo"],
        "the blocked call reached the upstream"
    );

    // A result carrying a secret comes back redacted.
    let r = client
        .call_tool(CallToolRequestParams::new("leak"))
        .await
        .unwrap();
    let r = serde_json::to_value(&r).unwrap();
    let text = text_of(&r);
    assert!(!r.to_string().contains(AWS_KEY), "{r}");
    assert!(text.contains("[REDACTED:"), "{text}");
    assert!(text.starts_with("aws_access_key_id = "), "{text}");
    assert_eq!(seen.calls(), ["echo", "leak"]);

    // The upstream got the MCP headers; the proxy's own never left it.
    {
        let headers = seen.headers.lock().unwrap();
        assert!(headers.iter().any(|h| h.contains_key("mcp-session-id")));
        assert!(
            headers
                .iter()
                .any(|h| h.contains_key("mcp-protocol-version"))
        );
        assert!(headers.iter().all(|h| !h.contains_key("x-toolgate-tenant")));
    }

    // Metrics count the proxy's decisions like any other.
    let body = scrape(&p.running).await;
    let count = |labels: &[(&str, &str)]| metric_value(&body, "toolgate_decisions_total", labels);
    assert_eq!(count(&[("event", "tool_call_start")]), 3.0, "{body}");
    assert_eq!(
        count(&[("event", "tool_call_start"), ("action", "stop")]),
        1.0
    );
    assert_eq!(count(&[("event", "tool_call_result")]), 2.0);
    assert_eq!(
        count(&[("event", "tool_call_result"), ("action", "redact")]),
        1.0
    );

    // Stopping the server with the client still connected (its GET stream open) ends.
    let _ = client.cancel().await;
    tokio::time::timeout(Duration::from_secs(30), p.running.stop())
        .await
        .expect("stop does not hang")
        .unwrap();
    let log = std::fs::read_to_string(&p.log).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l["tool"] == "shell.exec" && l["action"] == "stop")
    );
    assert!(lines.iter().all(|l| l["tenant"] == "acme"), "{log}");
    // The session is the MCP session, the step the JSON-RPC id.
    assert!(
        lines
            .iter()
            .all(|l| l["session"].as_str().is_some_and(|s| !s.is_empty()))
    );
    assert!(!log.contains(AWS_KEY), "a secret in the decision log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_replies_are_guarded_like_streamed_ones() {
    let seen = Seen::default();
    let up = json_upstream(seen.clone()).await;
    let p = proxy(&up, TraceConfig::default(), None).await;
    // The reply to a call is a plain JSON body here, not an event stream.
    let (status, body) = post(&p.url, ECHO_CALL).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(text_of(&body["result"]), "hi");

    let client = connect(&p.url, HashMap::new()).await;
    let r = client
        .call_tool(CallToolRequestParams::new("leak"))
        .await
        .unwrap();
    let r = serde_json::to_value(&r).unwrap();
    assert!(!r.to_string().contains(AWS_KEY), "{r}");
    assert!(text_of(&r).contains("[REDACTED:"), "{r}");
    let r = client
        .call_tool(
            CallToolRequestParams::new("shell.exec")
                .with_arguments(args(json!({"command": "rm -rf /"}))),
        )
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&r).unwrap()["isError"], true);
    assert_eq!(seen.calls(), ["echo", "leak"]);
    let _ = client.cancel().await;
    p.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_forwards_everything_as_it_came() {
    let seen = Seen::default();
    let up = upstream(seen.clone()).await;
    let pack = default_pack_text().replace("  mode: enforce", "  mode: shadow");
    assert!(pack.contains("mode: shadow"));
    let p = proxy(&up, TraceConfig::default(), Some(&pack)).await;
    let client = connect(&p.url, HashMap::new()).await;
    let r = client
        .call_tool(
            CallToolRequestParams::new("shell.exec")
                .with_arguments(args(json!({"command": "rm -rf /"}))),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&serde_json::to_value(&r).unwrap()), "ran rm -rf /");
    let r = client
        .call_tool(CallToolRequestParams::new("leak"))
        .await
        .unwrap();
    assert!(text_of(&serde_json::to_value(&r).unwrap()).contains(AWS_KEY));
    assert_eq!(seen.calls(), ["shell.exec", "leak"]);
    // What enforce mode would have done is still counted.
    let body = scrape(&p.running).await;
    let count = |labels: &[(&str, &str)]| metric_value(&body, "toolgate_decisions_total", labels);
    assert_eq!(
        count(&[("event", "tool_call_start"), ("mode", "shadow")]),
        2.0
    );
    assert_eq!(
        count(&[
            ("event", "tool_call_start"),
            ("action", "stop"),
            ("mode", "shadow")
        ]),
        1.0
    );
    assert_eq!(
        count(&[
            ("event", "tool_call_result"),
            ("action", "redact"),
            ("mode", "shadow")
        ]),
        1.0
    );
    let _ = client.cancel().await;
    p.running.stop().await.unwrap();
}

/// Reads SSE events from a streaming reply until `done` says stop.
async fn read_events(
    resp: &mut reqwest::Response,
    parser: &mut SseParser,
    mut done: impl FnMut(&Value) -> bool,
) -> Vec<Value> {
    let mut got = Vec::new();
    loop {
        let chunk = resp.chunk().await.unwrap().expect("the stream goes on");
        for ev in parser.push(&chunk).unwrap() {
            let Some(data) = ev.data.filter(|d| !d.is_empty()) else {
                continue;
            };
            let v: Value = serde_json::from_str(&data).unwrap();
            let stop = done(&v);
            got.push(v);
            if stop {
                return got;
            }
        }
    }
}

async fn initialize(http: &reqwest::Client, url: &str) -> String {
    let resp = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"raw","version":"1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = resp.bytes().await.unwrap();
    let resp = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_streams_through_before_the_reply_and_stop_drains_the_call() {
    let seen = Seen::default();
    let up = upstream(seen.clone()).await;
    let p = proxy(&up, TraceConfig::default(), None).await;
    let http = reqwest::Client::new();
    let session = initialize(&http, &p.url).await;

    let mut resp = http
        .post(&p.url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(
            &json!({"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{
            "name":"wait_then_leak","arguments":{},"_meta":{"progressToken":"tok"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut parser = SseParser::new(1 << 20);
    // The tool waits until the test has seen its progress: a proxy that held events back
    // would never get there (the timeout turns that hang into a failure).
    let first = tokio::time::timeout(
        Duration::from_secs(30),
        read_events(&mut resp, &mut parser, |v| {
            v["method"] == "notifications/progress"
        }),
    )
    .await
    .expect("progress arrives while the tool still runs");
    assert_eq!(first.last().unwrap()["params"]["progressToken"], "tok");

    // Stop the server while the call is in flight: the call still completes.
    let stopping = tokio::spawn(p.running.stop());
    tokio::time::sleep(Duration::from_millis(50)).await;
    seen.gate.notify_one();
    let rest = tokio::time::timeout(
        Duration::from_secs(30),
        read_events(&mut resp, &mut parser, |v| v["id"] == "call-1"),
    )
    .await
    .expect("the reply arrives");
    let reply = rest.last().unwrap();
    let text = text_of(&reply["result"]);
    assert!(text.starts_with("done; key "), "{reply}");
    assert!(!reply.to_string().contains(AWS_KEY), "{reply}");
    drop(resp);
    tokio::time::timeout(Duration::from_secs(30), stopping)
        .await
        .expect("stop finishes")
        .unwrap()
        .unwrap();
}

/// Answers every request with `status` and `body` as JSON: a broken MCP server.
pub(super) async fn broken_upstream(status: u16, body: &'static str) -> String {
    let router = axum::Router::new().fallback(move || async move {
        (
            axum::http::StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body,
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

/// A scripted MCP server: its GET stream carries a notification and a resumed tool result
/// with a key; its POST streams end after a priming event, before any reply.
async fn scripted_upstream() -> String {
    use axum::routing::get;
    const NOTE: &str = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}"#;
    let resumed = format!(
        r#"{{"jsonrpc":"2.0","id":99,"result":{{"content":[{{"type":"text","text":"key {AWS_KEY}"}}]}}}}"#
    );
    let get_body = format!("event: message\ndata: {NOTE}\n\nid: 5\ndata: {resumed}\n\n");
    let sse = [("content-type", "text/event-stream")];
    let router = axum::Router::new().route(
        "/mcp",
        get(move || async move { (sse, get_body) })
            .post(move || async move { (sse, "id: 1\ndata: \n\n") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_replies_on_the_server_stream_are_guarded_and_cut_streams_reported() {
    let up = scripted_upstream().await;
    let p = proxy(&up, TraceConfig::default(), None).await;
    let http = reqwest::Client::new();
    let text = http
        .get(&p.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The notification passes byte for byte; the tool result is judged though its call
    // is unknown here.
    assert!(
        text.starts_with(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\""
        ),
        "{text}"
    );
    assert!(!text.contains(AWS_KEY), "{text}");
    assert!(text.contains("[REDACTED:"), "{text}");
    assert!(text.contains("id: 5\n"), "the event id is kept: {text}");

    // A tool call whose stream ends before its reply gets an error reply, not silence.
    let resp = http
        .post(&p.url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(ECHO_CALL)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut resp = resp;
    let mut parser = SseParser::new(1 << 20);
    let events = read_events(&mut resp, &mut parser, |v| v["id"] == 7).await;
    let last = events.last().unwrap();
    assert_eq!(last["error"]["code"], -32603, "{last}");
    let msg = last["error"]["message"].as_str().unwrap();
    assert!(msg.contains("ended before the tools/call reply"), "{msg}");
    p.running.stop().await.unwrap();
}

/// A server whose GET stream carries `events` and ends.
async fn server_stream_upstream(events: String) -> String {
    use axum::routing::get;
    let sse = [("content-type", "text/event-stream")];
    let router = axum::Router::new().route("/mcp", get(move || async move { (sse, events) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_error_replies_on_the_server_stream_are_guarded() {
    // A server that quotes a failed command's output in its error reply.
    let leaky = json!({"jsonrpc":"2.0","id":98,"error":{"code":-32000,
        "message":format!("tool failed: export AWS_ACCESS_KEY_ID={AWS_KEY}"),
        "data":{"stderr":format!("key {AWS_KEY}")}}});
    let plain =
        json!({"jsonrpc":"2.0","id":97,"error":{"code":-32601,"message":"method not found"}});
    let up = server_stream_upstream(format!("id: 3\ndata: {leaky}\n\ndata: {plain}\n\n")).await;
    let p = proxy(&up, TraceConfig::default(), None).await;
    let text = reqwest::Client::new()
        .get(&p.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains(AWS_KEY), "{text}");
    let events = SseParser::new(1 << 20).push(text.as_bytes()).unwrap();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0].id.as_deref(), Some("3"), "the event id is kept");
    let redacted: Value = serde_json::from_str(events[0].data.as_deref().unwrap()).unwrap();
    // Still the server's error, redacted where it sits.
    assert_eq!(redacted["id"], 98);
    assert_eq!(redacted["error"]["code"], -32000, "{redacted}");
    let msg = redacted["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("tool failed: export AWS_ACCESS_KEY_ID=[REDACTED:"),
        "{msg}"
    );
    let stderr = redacted["error"]["data"]["stderr"].as_str().unwrap();
    assert!(stderr.starts_with("key [REDACTED:"), "{stderr}");
    // An error with nothing to hide passes byte for byte.
    assert_eq!(events[1].raw, format!("data: {plain}\n\n").as_bytes());
    p.running.stop().await.unwrap();
    let log = std::fs::read_to_string(&p.log).unwrap();
    let judged: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(judged.len(), 2, "{log}");
    assert!(
        judged
            .iter()
            .all(|l| l["event"] == "tool_call_result" && l["tool"] == "unknown"),
        "{log}"
    );
}

pub(super) async fn post(url: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

const ECHO_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_failure_is_reported_never_allowed() {
    // Nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let cases: Vec<(String, &str)> = vec![
        (format!("http://{closed}/mcp"), "cannot connect to"),
        (
            broken_upstream(500, r#"{"oops":true}"#).await,
            "answered HTTP 500",
        ),
        (
            broken_upstream(200, r#"{"jsonrpc":"2.0","id":7,"result":"#).await,
            "cannot be read",
        ),
        (
            broken_upstream(200, r#"{"jsonrpc":"2.0","id":8,"result":{}}"#).await,
            "no response with the call's id",
        ),
    ];
    for (upstream, why) in cases {
        let p = proxy(&upstream, TraceConfig::default(), None).await;
        let (status, body) = post(&p.url, ECHO_CALL).await;
        assert_eq!(status, 502, "{upstream}: {body}");
        assert_eq!(body["id"], 7);
        assert_eq!(body["error"]["code"], -32603);
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("upstream unavailable: "), "{msg}");
        assert!(msg.contains(why), "{msg}");
        assert!(!msg.contains("/mcp"), "the upstream path stays out: {msg}");
        p.running.stop().await.unwrap();
    }
    // Other methods are reported the same way when the upstream cannot be reached.
    let p = proxy(
        &format!("http://{closed}/mcp"),
        TraceConfig::default(),
        None,
    )
    .await;
    let (status, body) = post(&p.url, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    assert_eq!(status, 502);
    assert_eq!(body["id"], 1);
    p.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_oversized_and_batched_tool_calls_are_refused() {
    let seen = Seen::default();
    let up = upstream(seen.clone()).await;
    let pack = default_pack_text().replace("max_message_bytes: 4194304", "max_message_bytes: 4096");
    assert!(pack.contains("max_message_bytes: 4096"));
    let p = proxy(&up, TraceConfig::default(), Some(&pack)).await;

    let (status, body) = post(&p.url, r#"{"jsonrpc":"2.0","id":1,"method":"tools/call""#).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32700);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("parse error: ")
    );

    let big = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"echo","arguments":{"text":"x".repeat(5000)}}});
    let (status, body) = post(&p.url, big.to_string()).await;
    assert_eq!(status, 413, "{body}");

    let batch = json!([{"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"shell.exec","arguments":{"command":"rm -rf /"}}}]);
    let (status, body) = post(&p.url, batch.to_string()).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32600);

    let no_name = json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}});
    let (status, body) = post(&p.url, no_name.to_string()).await;
    assert_eq!(status, 400);
    assert_eq!(body["id"], 4);
    assert_eq!(body["error"]["code"], -32602);

    assert!(
        seen.calls().is_empty(),
        "nothing unguarded reached the upstream"
    );
    p.running.stop().await.unwrap();
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_and_upstream_spans_join_the_callers_trace() {
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

    let otlp = Otlp::start().await;
    let seen = Seen::default();
    let up = upstream(seen.clone()).await;
    let p = proxy(
        &up,
        TraceConfig {
            endpoint: Some(otlp.endpoint.clone()),
            service_name: Some("toolgate-mcp-test".into()),
        },
        None,
    )
    .await;
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let mut headers = HashMap::new();
    headers.insert(
        HeaderName::from_static("traceparent"),
        HeaderValue::from_str(&format!("00-{caller_trace}-{caller_span}-01")).unwrap(),
    );
    let client = connect(&p.url, headers).await;
    let r = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args(json!({"text": "hi"}))))
        .await
        .unwrap();
    assert_eq!(text_of(&serde_json::to_value(&r).unwrap()), "hi");
    let _ = client.cancel().await;
    p.running.stop().await.unwrap();
    let got = otlp.requests().await;
    let spans = spans_of(&got);
    let attr = |s: &opentelemetry_proto::tonic::trace::v1::Span, k: &str| -> String {
        s.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.as_ref())
            .map(|v| format!("{v:?}"))
            .unwrap_or_default()
    };
    let decision = spans
        .iter()
        .find(|s| {
            s.name == "toolgate.evaluate" && attr(s, "toolgate.event").contains("tool_call_start")
        })
        .expect("the tool call's decision span");
    assert_eq!(hex(&decision.trace_id), caller_trace);
    assert_eq!(hex(&decision.parent_span_id), caller_span);
    let upstream_span = spans
        .iter()
        .find(|s| s.name == "toolgate.upstream")
        .expect("the upstream span");
    assert_eq!(upstream_span.kind, SpanKind::Client as i32);
    assert_eq!(hex(&upstream_span.trace_id), caller_trace);
    assert_eq!(upstream_span.parent_span_id, decision.span_id);
    assert!(attr(upstream_span, "http.request.method").contains("POST"));
    assert!(attr(upstream_span, "server.address").contains("127.0.0.1"));
    assert!(attr(upstream_span, "server.port").contains("IntValue"));
    assert!(attr(upstream_span, "http.response.status_code").contains("200"));
    assert!(attr(upstream_span, "gen_ai.tool.name").contains("echo"));
    assert!(attr(upstream_span, "mcp.method.name").contains("tools/call"));
    // The result's decision joins the caller's trace too.
    assert!(spans.iter().any(|s| s.name == "toolgate.evaluate"
        && attr(s, "toolgate.event").contains("tool_call_result")
        && hex(&s.parent_span_id) == caller_span));
    // The upstream saw the upstream span as its caller.
    let want = format!("00-{caller_trace}-{}-01", hex(&upstream_span.span_id));
    let headers = seen.headers.lock().unwrap();
    assert!(
        headers
            .iter()
            .any(|h| h.get("traceparent").and_then(|v| v.to_str().ok()) == Some(want.as_str())),
        "upstream never saw {want}"
    );
    assert!(
        !format!("{got:?}").contains("\"hi\""),
        "payload text in a span"
    );
}

#[test]
fn serve_needs_an_upstream_with_the_proxy() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "serve",
            "--mcp-listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--mcp-upstream"), "{err}");
}

/// A scripted MCP server whose tool calls never finish: each POST stream carries one
/// progress notification and then stays open, silent. Its GET stream carries whatever the
/// test pushes into it.
#[derive(Clone, Default)]
struct Silent {
    /// The sending end of each POST stream: closed once the proxy drops the stream.
    posts: Arc<Mutex<Vec<EventSender>>>,
    get: Arc<Mutex<Option<EventSender>>>,
}

type EventSender = tokio::sync::mpsc::Sender<Result<String, std::io::Error>>;

async fn silent_upstream(state: Silent) -> String {
    use axum::routing::get;
    use tokio_stream::wrappers::ReceiverStream;
    const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1,"total":2}}"#;
    let sse = [("content-type", "text/event-stream")];
    let (on_get, on_post) = (state.clone(), state);
    let router = axum::Router::new().route(
        "/mcp",
        get(move || {
            let state = on_get.clone();
            async move {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                *state.get.lock().unwrap() = Some(tx);
                (sse, axum::body::Body::from_stream(ReceiverStream::new(rx)))
            }
        })
        .post(move || {
            let state = on_post.clone();
            async move {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tx.send(Ok(format!("data: {PROGRESS}\n\n"))).await.unwrap();
                state.posts.lock().unwrap().push(tx);
                (sse, axum::body::Body::from_stream(ReceiverStream::new(rx)))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

fn hang_call(id: u64) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"hang","arguments":{},"_meta":{"progressToken":"tok"}}})
    .to_string()
}

/// Sends a call to the silent upstream; returns its stream once the progress event is in.
async fn hang(url: &str, id: u64, parser: &mut SseParser) -> reqwest::Response {
    let mut resp = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(hang_call(id))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let first = read_events(&mut resp, parser, |_| true).await;
    assert_eq!(first[0]["method"], "notifications/progress", "{first:?}");
    resp
}

/// The stream's remaining events up to the reply to `id`, which must be the timeout error.
async fn expect_timeout(resp: &mut reqwest::Response, parser: &mut SseParser, id: u64) {
    let events = read_events(resp, parser, |v| v["id"] == id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let err = &events[0]["error"];
    assert_eq!(err["code"], -32603, "{err}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.starts_with("upstream unavailable: "), "{msg}");
    assert!(msg.ends_with("did not answer within 1 s"), "{msg}");
    assert!(!msg.contains("/mcp"), "the upstream path stays out: {msg}");
    // The stream ends after the error.
    assert!(resp.chunk().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_upstream_never_answers_times_out_and_does_not_hold_stop() {
    let state = Silent::default();
    let up = silent_upstream(state.clone()).await;
    let otlp = Otlp::start().await;
    let tracing = TraceConfig {
        endpoint: Some(otlp.endpoint.clone()),
        service_name: Some("toolgate-mcp-test".into()),
    };
    let p = proxy_with(&up, tracing, None, Duration::from_secs(1)).await;
    let guard = Duration::from_secs(30);
    let http = reqwest::Client::new();
    let mut server_stream = http
        .get(&p.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(server_stream.status(), 200);

    // The progress event goes through as it comes; at the deadline the client gets the
    // timeout error for the call, and the upstream stream is dropped.
    let mut parser = SseParser::new(1 << 20);
    let mut resp = tokio::time::timeout(guard, hang(&p.url, 1, &mut parser))
        .await
        .expect("progress arrives");
    tokio::time::timeout(guard, expect_timeout(&mut resp, &mut parser, 1))
        .await
        .expect("the timeout error arrives");
    let first = state.posts.lock().unwrap()[0].clone();
    tokio::time::timeout(guard, first.closed())
        .await
        .expect("the proxy dropped the upstream stream");

    // The call is no longer awaited: its reply, arriving late on the server stream, is
    // judged as a result of an unknown tool (and still redacted).
    let late = json!({"jsonrpc":"2.0","id":1,"result":{"content":[
        {"type":"text","text":format!("late: {AWS_KEY}")}]}});
    let tx = state.get.lock().unwrap().clone().unwrap();
    tx.send(Ok(format!("data: {late}\n\n"))).await.unwrap();
    let mut get_parser = SseParser::new(1 << 20);
    let got = tokio::time::timeout(
        guard,
        read_events(&mut server_stream, &mut get_parser, |v| v["id"] == 1),
    )
    .await
    .expect("the late reply is relayed");
    let text = text_of(&got[0]["result"]);
    assert!(text.starts_with("late: [REDACTED:"), "{text}");

    // Stopping while a call waits: the client still gets its timeout error, and stop
    // returns instead of waiting on the silent stream.
    let mut parser = SseParser::new(1 << 20);
    let mut resp = tokio::time::timeout(guard, hang(&p.url, 2, &mut parser))
        .await
        .expect("progress arrives");
    let stopping = tokio::spawn(p.running.stop());
    tokio::time::timeout(guard, expect_timeout(&mut resp, &mut parser, 2))
        .await
        .expect("the timeout error arrives while stopping");
    drop(server_stream);
    tokio::time::timeout(guard, stopping)
        .await
        .expect("stop returns")
        .unwrap()
        .unwrap();

    let log = std::fs::read_to_string(&p.log).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tools: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["event"].as_str().unwrap(), l["tool"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tools,
        [
            ("tool_call_start", "hang"),
            ("tool_call_result", "unknown"),
            ("tool_call_start", "hang")
        ],
        "{log}"
    );
    // Each timed-out call's upstream span says so, as other upstream failures do.
    let spans = otlp.spans().await;
    let timed_out = spans
        .iter()
        .filter(|s| s.name == "toolgate.upstream")
        .filter(|s| s.status.as_ref().is_some_and(|st| st.message == "timeout"))
        .count();
    assert_eq!(timed_out, 2, "{spans:?}");
}

#[test]
fn serve_refuses_a_timeout_too_long_to_be_a_deadline() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--mcp-listen",
            "127.0.0.1:0",
            "--mcp-upstream",
            "http://127.0.0.1:9/mcp",
            "--mcp-upstream-timeout-s",
            &u64::MAX.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A server that started anyway must not outlive the test.
    let mut waited = 0;
    while child.try_wait().unwrap().is_none() && waited < 300 {
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
        panic!("serve started with a timeout of u64::MAX seconds");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--mcp-upstream-timeout-s: at most 86400 s"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_reply_that_never_comes_times_out() {
    // The head says JSON; the body never arrives.
    let router =
        axum::Router::new().fallback(|| async {
            (
                [("content-type", "application/json")],
                axum::body::Body::from_stream(tokio_stream::pending::<
                    Result<String, std::io::Error>,
                >()),
            )
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let p = proxy_with(
        &format!("http://{addr}/mcp"),
        TraceConfig::default(),
        None,
        Duration::from_secs(1),
    )
    .await;
    let (status, body) = tokio::time::timeout(Duration::from_secs(30), post(&p.url, ECHO_CALL))
        .await
        .expect("the proxy answers");
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["id"], 7);
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("upstream unavailable: "), "{msg}");
    assert!(msg.ends_with("did not answer within 1 s"), "{msg}");
    tokio::time::timeout(Duration::from_secs(30), p.running.stop())
        .await
        .expect("stop returns")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_gives_an_endless_plain_stream_the_timeout_then_closes_it() {
    let state = Silent::default();
    let up = silent_upstream(state.clone()).await;
    let p = proxy_with(&up, TraceConfig::default(), None, Duration::from_secs(1)).await;
    // Not a tool call: relayed as it is, with no reply deadline while the proxy runs.
    let mut resp = reqwest::Client::new()
        .post(&p.url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///x"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut parser = SseParser::new(1 << 20);
    let guard = Duration::from_secs(30);
    let first = tokio::time::timeout(guard, read_events(&mut resp, &mut parser, |_| true))
        .await
        .expect("the first event arrives");
    assert_eq!(first[0]["method"], "notifications/progress");
    let stopping = tokio::spawn(p.running.stop());
    // The stream ends (the client sees it end) and stop returns.
    tokio::time::timeout(guard, async {
        while let Ok(Some(_)) = resp.chunk().await {}
    })
    .await
    .expect("the stream ends after stop");
    tokio::time::timeout(guard, stopping)
        .await
        .expect("stop returns")
        .unwrap()
        .unwrap();
    let upstream_end = state.posts.lock().unwrap()[0].clone();
    tokio::time::timeout(guard, upstream_end.closed())
        .await
        .expect("the upstream stream is dropped");
}
