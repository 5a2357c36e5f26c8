//! Proxied against direct tool calls, in one run. A tool server (gRPC `ToolService` and an
//! MCP Streamable HTTP endpoint answering plain JSON) runs in this process; the release
//! `toolgate serve --upstream … --mcp-listen … --mcp-upstream …` (embedded default pack,
//! decision log to a file) stands in front of it. Each round measures the same load called
//! directly and through toolgate, one after the other, so drift on a shared machine lands
//! on both alike. Figures are medians over the rounds; nothing is asserted.
//!
//! Loads: one tool call of `http.get` whose result is 1 KB or 64 KB of plain text (a build
//! log), over gRPC (`Invoke`) and over MCP (`tools/call`). Each is measured twice:
//! - latency, one call in flight: p50 and p99;
//! - throughput, 32 calls in flight.
//!
//! "One decision" is the p50 of a GuardService `ToolCallResult` RPC of the 1 KB result
//! against the same toolgate: the target is proxied p50 ≤ direct p50 + one decision +
//! 100 µs at 1 KB. A proxied call makes two decisions (the call and its result) and one
//! more network hop, so the decision RPC stands for one decision plus one hop.
//!
//! Layout on Linux with taskset and two CPUs: toolgate on CPU 0; this process (client and
//! tool server) re-executes itself on CPU 1.
//!
//! Run: `cargo bench --bench proxy` (about two minutes). Environment: `PROXY_BENCH_SECS`
//! (2), `PROXY_BENCH_ROUNDS` (3), `PROXY_BENCH_LOADS` (comma list out of
//! `grpc_1k,grpc_64k,mcp_1k,mcp_64k`), `PROXY_BENCH_TOOLGATE_ARGS` (more `serve` flags,
//! e.g. `--decision-log off`, for an A/B of one setting; they replace the bench's own),
//! `PROXY_BENCH_TOOLGATE_BIN` (another toolgate binary, for an A/B of two builds).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use toolgate::proto::guard_service_client::GuardServiceClient;
use toolgate::proto::tool_service_client::ToolServiceClient;
use toolgate::proto::tool_service_server::{ToolService, ToolServiceServer};
use toolgate::proto::{
    EventContext, InvokeRequest, InvokeResponse, InvokeStreamRequest, InvokeStreamResponse,
    ToolCallResultRequest,
};

const PINNED_ENV: &str = "PROXY_BENCH_PINNED";
const IN_FLIGHT: usize = 32;

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is read from the command line.
    let pin = cfg!(target_os = "linux")
        && std::env::var_os(PINNED_ENV).is_none()
        && Command::new("taskset").arg("-V").output().is_ok()
        && std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if pin {
        let exe = std::env::current_exe()?;
        let status = Command::new("taskset")
            .args(["-c", "1"])
            .arg(exe)
            .args(std::env::args().skip(1))
            .env(PINNED_ENV, "1")
            .status()
            .context("cannot run taskset")?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let pinned = std::env::var_os(PINNED_ENV).is_some();
    let secs = std::env::var("PROXY_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(2.0);
    let rounds = std::env::var("PROXY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(3)
        .max(1);
    let loads: Vec<String> = std::env::var("PROXY_BENCH_LOADS")
        .unwrap_or_else(|_| "grpc_1k,grpc_64k,mcp_1k,mcp_64k".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(Duration::from_secs_f64(secs), rounds, &loads, pinned))
}

/// A build log of about `bytes` bytes: plain text no rule has anything to say about.
fn output(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "step {i}: compiled module number {i} of the project in {} ms\n",
            10 + i % 90
        ));
        i += 1;
    }
    s.truncate(bytes);
    s
}

#[derive(Clone)]
struct Tools {
    small: Arc<str>,
    large: Arc<str>,
}

impl Tools {
    fn answer(&self, args: &str) -> String {
        if args.contains("\"64k\"") {
            self.large.to_string()
        } else {
            self.small.to_string()
        }
    }
}

#[tonic::async_trait]
impl ToolService for Tools {
    async fn invoke(&self, r: Request<InvokeRequest>) -> Result<Response<InvokeResponse>, Status> {
        Ok(Response::new(InvokeResponse {
            output: self.answer(&r.get_ref().arguments_json),
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
        let out = InvokeStreamResponse {
            output: self.answer(&r.get_ref().arguments_json),
            ..Default::default()
        };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(out)))))
    }
}

/// The MCP endpoint: a `tools/call` answered as one JSON body (stateless Streamable HTTP).
async fn mcp_call(
    axum::extract::State(tools): axum::extract::State<Tools>,
    body: String,
) -> impl axum::response::IntoResponse {
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let args = v["params"]["arguments"].to_string();
    let reply = serde_json::json!({
        "jsonrpc": "2.0",
        "id": v["id"],
        "result": {"content": [{"type": "text", "text": tools.answer(&args)}]}
    });
    ([("content-type", "application/json")], reply.to_string())
}

async fn start_tools(tools: Tools) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let grpc_addr = grpc.local_addr()?;
    let svc = ToolServiceServer::new(tools.clone())
        .max_decoding_message_size(16 << 20)
        .max_encoding_message_size(usize::MAX);
    // TCP_NODELAY, as toolgate sets on its own sockets: with Nagle's algorithm on, a small
    // answer can wait for the peer's delayed ACK (about 40 ms on Linux).
    let incoming = TcpListenerStream::new(grpc).map(|s| {
        if let Ok(s) = &s {
            let _ = s.set_nodelay(true);
        }
        s
    });
    tokio::spawn(
        Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming),
    );
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http_addr = http.local_addr()?;
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(mcp_call))
        .with_state(tools);
    let http = axum::serve::ListenerExt::tap_io(http, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(http, app).await;
    });
    Ok((grpc_addr, http_addr))
}

struct Guarded(Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn wait_listening(addr: SocketAddr, child: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if let Ok(Some(s)) = child.try_wait() {
            bail!("toolgate exited: {s}");
        }
        if Instant::now() > deadline {
            bail!("toolgate did not listen on {addr}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn ctx(caller: usize) -> Option<EventContext> {
    Some(EventContext {
        session_id: format!("bench-{caller}"),
        step_id: "1".into(),
        tenant: "bench".into(),
        task_goal: "read the build log".into(),
        labels: Default::default(),
    })
}

/// One way of making the call: `call(caller)` makes one and checks it passed.
#[derive(Clone)]
enum Target {
    Grpc(ToolServiceClient<Channel>, &'static str),
    Mcp(reqwest::Client, String, &'static str),
    Decision(GuardServiceClient<Channel>, Arc<str>),
}

impl Target {
    async fn call(&mut self, caller: usize) -> anyhow::Result<()> {
        match self {
            Target::Grpc(c, size) => {
                let r = c
                    .invoke(InvokeRequest {
                        context: ctx(caller),
                        tool_name: "http.get".into(),
                        arguments_json: format!(
                            r#"{{"url":"https://ci.example.com/build/1/log","size":"{size}"}}"#
                        ),
                        pause_id: String::new(),
                    })
                    .await?
                    .into_inner();
                if r.is_error || r.output.len() < 1000 {
                    bail!(
                        "unexpected answer: {} bytes, is_error {}",
                        r.output.len(),
                        r.is_error
                    );
                }
            }
            Target::Mcp(c, url, size) => {
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{caller},"method":"tools/call","params":{{"name":"http.get","arguments":{{"url":"https://ci.example.com/build/1/log","size":"{size}"}}}}}}"#
                );
                let r = c
                    .post(url.as_str())
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .header("x-toolgate-session-id", format!("bench-{caller}"))
                    .body(body)
                    .send()
                    .await?;
                let status = r.status();
                let text = r.bytes().await?;
                if !status.is_success() || text.len() < 1000 {
                    bail!("unexpected answer: HTTP {status}, {} bytes", text.len());
                }
            }
            Target::Decision(c, out) => {
                c.tool_call_result(ToolCallResultRequest {
                    context: ctx(caller),
                    tool_name: "http.get".into(),
                    arguments_json: r#"{"url":"https://ci.example.com/build/1/log"}"#.into(),
                    output: out.to_string(),
                    is_error: false,
                })
                .await?;
            }
        }
        Ok(())
    }
}

/// p50 and p99 in µs, one call in flight.
async fn latency(t: &Target, secs: Duration) -> anyhow::Result<(f64, f64)> {
    let mut t = t.clone();
    for _ in 0..50 {
        t.call(0).await?;
    }
    let mut us = Vec::new();
    let end = Instant::now() + secs;
    while Instant::now() < end {
        let s = Instant::now();
        t.call(0).await?;
        us.push(s.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    let q = |p: f64| us[((us.len() - 1) as f64 * p).round() as usize];
    Ok((q(0.5), q(0.99)))
}

/// Calls per second with `IN_FLIGHT` callers.
async fn throughput(t: &Target, secs: Duration) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + secs;
    let mut tasks = Vec::new();
    for caller in 0..IN_FLIGHT {
        let mut t = t.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                t.call(caller).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn run(secs: Duration, rounds: usize, loads: &[String], pinned: bool) -> anyhow::Result<()> {
    let tools = Tools {
        small: output(1024).into(),
        large: output(64 * 1024).into(),
    };
    let (grpc_up, http_up) = start_tools(tools.clone()).await?;
    let dir = std::env::temp_dir().join(format!("toolgate-proxy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (listen, mcp_listen) = (free_port()?, free_port()?);
    let exe = std::env::var_os("PROXY_BENCH_TOOLGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolgate")));
    let mut cmd = if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let extra: Vec<String> = std::env::var("PROXY_BENCH_TOOLGATE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    cmd.arg("serve")
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        .args(["--upstream", &format!("http://{grpc_up}")])
        .args(["--mcp-listen", &format!("127.0.0.1:{mcp_listen}")])
        .args(["--mcp-upstream", &format!("http://{http_up}/mcp")])
        .args(["--admin-listen", "off", "--log-format", "json"]);
    if !extra.iter().any(|a| a == "--decision-log") {
        cmd.arg("--decision-log").arg(dir.join("decisions.jsonl"));
    }
    let child = cmd
        .args(&extra)
        .env("OTEL_TRACES_EXPORTER", "none")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start toolgate")?;
    let mut tg = Guarded(child);
    let tg_addr: SocketAddr = format!("127.0.0.1:{listen}").parse()?;
    wait_listening(tg_addr, &mut tg.0).await?;
    wait_listening(format!("127.0.0.1:{mcp_listen}").parse()?, &mut tg.0).await?;

    let channel = |addr: SocketAddr| {
        Endpoint::from_shared(format!("http://{addr}")).map(|e| e.tcp_nodelay(true).connect_lazy())
    };
    let grpc = |addr, size| -> anyhow::Result<Target> {
        Ok(Target::Grpc(
            ToolServiceClient::new(channel(addr)?).max_decoding_message_size(16 << 20),
            size,
        ))
    };
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(IN_FLIGHT)
        .build()?;
    let mcp =
        |addr: SocketAddr, size| Target::Mcp(http.clone(), format!("http://{addr}/mcp"), size);
    let mcp_proxy: SocketAddr = format!("127.0.0.1:{mcp_listen}").parse()?;
    let decision = Target::Decision(
        GuardServiceClient::new(channel(tg_addr)?),
        tools.small.clone(),
    );

    println!(
        "proxy bench: {} s per measure, {rounds} rounds, {IN_FLIGHT} in flight for throughput; {}",
        secs.as_secs_f64(),
        if pinned {
            "toolgate on CPU 0, client and tool server on CPU 1"
        } else {
            "NOT PINNED"
        }
    );
    println!(
        "{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "load",
        "dir p50",
        "prx p50",
        "+p50",
        "dir p99",
        "prx p99",
        "+p99",
        "dir /s",
        "prx /s",
        "ratio"
    );
    for load in loads {
        let (direct, proxied) = match load.as_str() {
            "grpc_1k" => (grpc(grpc_up, "1k")?, grpc(tg_addr, "1k")?),
            "grpc_64k" => (grpc(grpc_up, "64k")?, grpc(tg_addr, "64k")?),
            "mcp_1k" => (mcp(http_up, "1k"), mcp(mcp_proxy, "1k")),
            "mcp_64k" => (mcp(http_up, "64k"), mcp(mcp_proxy, "64k")),
            other => bail!("PROXY_BENCH_LOADS: unknown load `{other}`"),
        };
        let (mut d50, mut d99, mut p50, mut p99, mut dt, mut pt, mut one) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            // The reference decision is measured in every round, beside the calls it is
            // compared with, so drift moves all three alike.
            if load.ends_with("_1k") {
                one.push(latency(&decision, secs).await?.0);
            }
            let (a, b) = latency(&direct, secs).await?;
            d50.push(a);
            d99.push(b);
            let (a, b) = latency(&proxied, secs).await?;
            p50.push(a);
            p99.push(b);
            dt.push(throughput(&direct, secs).await?);
            pt.push(throughput(&proxied, secs).await?);
        }
        let (d50, d99, p50, p99, dt, pt) = (
            median(d50),
            median(d99),
            median(p50),
            median(p99),
            median(dt),
            median(pt),
        );
        println!(
            "{load:<9} {d50:>8.0}µs {p50:>8.0}µs {:>8.0}µs {d99:>8.0}µs {p99:>8.0}µs {:>8.0}µs {dt:>10.0} {pt:>10.0} {:>7.3}",
            p50 - d50,
            p99 - d99,
            pt / dt
        );
        if !one.is_empty() {
            let one = median(one);
            let budget = d50 + one + 100.0;
            println!(
                "  one decision (GuardService ToolCallResult, 1 KB, whole RPC) p50 {one:.0} µs; \
                 target p50 ≤ direct + one decision + 100 µs = {budget:.0} µs: {}",
                if p50 <= budget { "met" } else { "NOT MET" }
            );
        }
    }
    drop(tg);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
