//! Whole-RPC cost: the release `toolgate serve` (embedded default pack, decision log to a
//! file, admin endpoint and metrics on) against an empty GuardService built from the same
//! proto that answers every event with ALLOW at once. One run drives both with the same
//! generated client, rounds interleaved (toolgate, empty, toolgate, empty, …) so that drift
//! on a shared machine lands on both alike. Figures are medians of the rounds; nothing is
//! asserted, the targets are printed as met or not met.
//!
//! Layout on Linux with two or more CPUs: each server runs under `taskset -c 0` (toolgate's
//! tokio runtime then sizes itself to one worker, and its blocking pool and decision-log
//! thread share that core); this process re-executes itself under `taskset -c 1` and drives
//! both from a current-thread tokio runtime. The empty server is this same binary run as
//! `rpc --serve-empty 127.0.0.1:0`.
//!
//! Loads: `tool_call_result` of `http.get` (a 1 KB JSON listing) and of `web.fetch` (16 KB
//! and 64 KB of a documentation page as markdown), 32 calls in flight; `tool_call_start` of
//! `shell.exec` with 1 KB of arguments (a test run), one call in flight. One agent session
//! per caller. Every call carries a new stamp, so no verdict cache answers. In the default
//! pack those tools are medium tier (a result waits up to 100 ms for `injection-heuristics`
//! and `injection-model`) and high tier (no deep rule runs on a start).
//!
//! The client holds one HTTP/2 connection (one tonic `Channel`) per server, cloned into
//! every caller: that is what an agent process does with its sidecar (one channel per
//! target, shared by every concurrent tool call, as gRPC advises), and it gives both servers
//! the same framing work. `RPC_BENCH_CHANNELS=N` spreads the callers over N connections.
//! Deadlines are kept on the client (`tokio::time::timeout`), not sent as `grpc-timeout`,
//! so neither server arms a timer per call.
//!
//! Run: `cargo bench --bench rpc` (about 2 minutes). Environment:
//! - `RPC_BENCH_SECS` (3), `RPC_BENCH_WARMUP_SECS` (1), `RPC_BENCH_ROUNDS` (3): a quick look
//!   is `RPC_BENCH_SECS=1 RPC_BENCH_WARMUP_SECS=0.3 RPC_BENCH_ROUNDS=1` (about 15 s).
//! - `RPC_BENCH_LOADS`: a comma list out of `result_1k,result_16k,result_64k,start_1k`.
//! - `RPC_BENCH_SERVERS`: `both` (default), `toolgate` or `empty`.
//! - `RPC_BENCH_CHANNELS` (1); `RPC_BENCH_SERVER_CPU` (0), `RPC_BENCH_CLIENT_CPU` (1).
//! - `RPC_BENCH_ATTACH`: a shell command started on the client's CPU at the start of each
//!   measured window, with `{pid}`, `{secs}`, `{server}`, `{load}` and `{round}` replaced,
//!   e.g. `perf stat -e task-clock,context-switches -p {pid} -- sleep {secs}`; the bench
//!   waits for it after the window.
//! - `RPC_BENCH_TOOLGATE_ARGS`: more `toolgate serve` flags, e.g. `--decision-log off` or
//!   `--policy FILE`, for an A/B of one setting (they replace the bench's own).
//! - `RPC_BENCH_TOOLGATE_BIN`: run this toolgate binary instead of the one cargo built.
//! - `RPC_BENCH_UNIX=1`: the client reaches toolgate over its Unix domain socket
//!   (`--listen-unix`) instead of TCP loopback; the empty server stays on TCP. Run it with
//!   `RPC_BENCH_SERVERS=toolgate` twice, with and without, for the UDS against TCP figure.
//! - `RPC_BENCH_EMPTY_NODELAY=0`: the empty server leaves Nagle's algorithm on, as
//!   toolgate's accept loop does today (it sets TCP_NODELAY otherwise, tonic's default).
//!
//! Besides latency and throughput it reads each server's thread CPU time
//! (`/proc/PID/task/*/schedstat`) and context switches over the measured window, by thread
//! kind: tokio worker (the runtime's first thread), blocking pool (its other threads),
//! decision-log writer, and the rest. Divided by the calls answered, so at one call in
//! flight it also carries what the server spends idling and waking between calls.
//!
//! On a shared machine, other processes run on the same CPUs: the figures then move by
//! tens of percent between runs. Take the ones that matter on a quiet machine with
//! `cargo bench --bench rpc`.

/// The server binary's allocator, so the empty server allocates as toolgate does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};
use toolgate::proto::guard_service_client::GuardServiceClient;
use toolgate::proto::guard_service_server::{GuardService, GuardServiceServer};
use toolgate::proto::{self, EventContext, ToolCallResultRequest, ToolCallStartRequest};

/// Set in the re-executed client so it does not pin itself again.
const PINNED_ENV: &str = "RPC_BENCH_PINNED";
/// toolgate's `max_message_bytes` in the default pack; the empty server decodes as much.
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// A call that takes this long fails the call, not the bench.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--serve-empty") {
        let addr = args.get(i + 1).map_or("127.0.0.1:0", String::as_str);
        return serve_empty(addr);
    }
    let cfg = Config::from_env()?;
    if cfg.pin && std::env::var_os(PINNED_ENV).is_none() {
        // Re-run this process on the client CPU; everything it starts inherits that CPU
        // unless pinned elsewhere (the servers are).
        let exe = std::env::current_exe().context("current_exe")?;
        let status = Command::new("taskset")
            .args(["-c", &cfg.client_cpu.to_string()])
            .arg(exe)
            .args(&args[1..])
            .env(PINNED_ENV, "1")
            .status()
            .context("cannot run taskset")?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("client runtime")?;
    rt.block_on(async {
        // On Ctrl-C or SIGTERM the run is dropped, and with it the guards that stop the
        // servers.
        tokio::select! {
            r = run(cfg) => r,
            s = stop_signal() => bail!("stopped by {s}"),
        }
    })
}

#[cfg(not(unix))]
async fn stop_signal() -> &'static str {
    let _ = tokio::signal::ctrl_c().await;
    "Ctrl-C"
}

#[cfg(unix)]
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

// ---------------------------------------------------------------------------------------
// Configuration

struct Config {
    secs: Duration,
    warmup: Duration,
    rounds: usize,
    loads: Vec<LoadId>,
    servers: Servers,
    channels: usize,
    server_cpu: usize,
    client_cpu: usize,
    /// Pin with taskset (Linux, taskset present, two or more CPUs).
    pin: bool,
    attach: Option<String>,
    /// `RPC_BENCH_TOOLGATE_ARGS`: more `toolgate serve` flags, split on whitespace.
    toolgate_args: Vec<String>,
    /// `RPC_BENCH_TOOLGATE_BIN`: another toolgate binary (an A/B of two builds).
    toolgate_bin: Option<PathBuf>,
    /// `RPC_BENCH_UNIX=1`: reach toolgate over its Unix socket.
    unix: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Servers {
    Both,
    Toolgate,
    Empty,
}

fn env_f64(name: &str, default: f64) -> anyhow::Result<f64> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .with_context(|| format!("{name}: `{v}` is not a number of seconds")),
        Err(_) => Ok(default),
    }
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .with_context(|| format!("{name}: `{v}` is not a count")),
        Err(_) => Ok(default),
    }
}

impl Config {
    fn from_env() -> anyhow::Result<Config> {
        let loads = match std::env::var("RPC_BENCH_LOADS") {
            Ok(v) => v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    LoadId::ALL
                        .into_iter()
                        .find(|l| l.name() == s)
                        .with_context(|| format!("RPC_BENCH_LOADS: unknown load `{s}`"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
            Err(_) => LoadId::ALL.to_vec(),
        };
        let servers = match std::env::var("RPC_BENCH_SERVERS").as_deref() {
            Err(_) | Ok("both") => Servers::Both,
            Ok("toolgate") => Servers::Toolgate,
            Ok("empty") => Servers::Empty,
            Ok(v) => bail!("RPC_BENCH_SERVERS: `{v}` is not both, toolgate or empty"),
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let server_cpu = env_usize("RPC_BENCH_SERVER_CPU", 0)?;
        let client_cpu = env_usize("RPC_BENCH_CLIENT_CPU", 1)?;
        let taskset = Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        // The re-executed client sees only its own CPU: the parent decided for it.
        let pin = std::env::var_os(PINNED_ENV).is_some()
            || (cfg!(target_os = "linux") && taskset && cpus >= 2);
        Ok(Config {
            secs: Duration::from_secs_f64(env_f64("RPC_BENCH_SECS", 3.0)?.max(0.1)),
            warmup: Duration::from_secs_f64(env_f64("RPC_BENCH_WARMUP_SECS", 1.0)?),
            rounds: env_usize("RPC_BENCH_ROUNDS", 3)?.max(1),
            loads,
            servers,
            channels: env_usize("RPC_BENCH_CHANNELS", 1)?.max(1),
            server_cpu,
            client_cpu,
            pin,
            attach: std::env::var("RPC_BENCH_ATTACH")
                .ok()
                .filter(|s| !s.trim().is_empty()),
            toolgate_args: std::env::var("RPC_BENCH_TOOLGATE_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect(),
            toolgate_bin: std::env::var_os("RPC_BENCH_TOOLGATE_BIN").map(PathBuf::from),
            unix: std::env::var("RPC_BENCH_UNIX").is_ok_and(|v| v == "1"),
        })
    }
}

// ---------------------------------------------------------------------------------------
// The empty server

/// Answers every event with ALLOW at once; the rest is unimplemented.
struct EmptyGuard;

fn allow() -> Option<proto::Decision> {
    Some(proto::Decision {
        action: proto::Action::Allow as i32,
        status: proto::DecisionStatus::Pass as i32,
        enforced: true,
        ..Default::default()
    })
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl GuardService for EmptyGuard {
    async fn tool_call_start(
        &self,
        _req: Request<proto::ToolCallStartRequest>,
    ) -> Result<Response<proto::ToolCallStartResponse>, Status> {
        Ok(Response::new(proto::ToolCallStartResponse {
            decision: allow(),
        }))
    }

    async fn tool_call_result(
        &self,
        _req: Request<proto::ToolCallResultRequest>,
    ) -> Result<Response<proto::ToolCallResultResponse>, Status> {
        Ok(Response::new(proto::ToolCallResultResponse {
            decision: allow(),
        }))
    }

    async fn llm_before(
        &self,
        _req: Request<proto::LlmBeforeRequest>,
    ) -> Result<Response<proto::LlmBeforeResponse>, Status> {
        Ok(Response::new(proto::LlmBeforeResponse {
            decision: allow(),
        }))
    }

    type StreamLlmChunksStream = BoxStream<proto::StreamLlmChunksResponse>;
    type WatchFindingsStream = BoxStream<proto::WatchFindingsResponse>;

    async fn stream_llm_chunks(
        &self,
        _req: Request<Streaming<proto::StreamLlmChunksRequest>>,
    ) -> Result<Response<Self::StreamLlmChunksStream>, Status> {
        Err(Status::unimplemented("empty server"))
    }

    async fn filter_candidates(
        &self,
        _req: Request<proto::FilterCandidatesRequest>,
    ) -> Result<Response<proto::FilterCandidatesResponse>, Status> {
        Err(Status::unimplemented("empty server"))
    }

    async fn resolve_pause(
        &self,
        _req: Request<proto::ResolvePauseRequest>,
    ) -> Result<Response<proto::ResolvePauseResponse>, Status> {
        Err(Status::unimplemented("empty server"))
    }

    async fn list_pauses(
        &self,
        _req: Request<proto::ListPausesRequest>,
    ) -> Result<Response<proto::ListPausesResponse>, Status> {
        Err(Status::unimplemented("empty server"))
    }

    async fn get_session(
        &self,
        _req: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        Err(Status::unimplemented("empty server"))
    }

    async fn watch_findings(
        &self,
        _req: Request<proto::WatchFindingsRequest>,
    ) -> Result<Response<Self::WatchFindingsStream>, Status> {
        Err(Status::unimplemented("empty server"))
    }
}

/// `--serve-empty ADDR`: serves until stdin closes (the bench holds the other end, so the
/// server goes when the bench goes, however it ends). Prints `listening ADDR` once bound.
/// Accepted sockets get TCP_NODELAY, as tonic's `Server::serve` sets by default, unless
/// `RPC_BENCH_EMPTY_NODELAY=0`.
fn serve_empty(addr: &str) -> anyhow::Result<()> {
    let addr: SocketAddr = addr.parse().with_context(|| format!("`{addr}`"))?;
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    // As toolgate builds its runtime: multi-thread, one worker per CPU it may use.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("runtime")?;
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await?;
        println!("listening {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        // As toolgate serves: default tonic settings, HTTP/2 without TLS, the same
        // message limits. toolgate accepts from a `TcpListenerStream`, which leaves Nagle's
        // algorithm on; tonic's own default (and what this server does unless told
        // otherwise) is TCP_NODELAY.
        let nodelay = std::env::var("RPC_BENCH_EMPTY_NODELAY").map_or(true, |v| v != "0");
        let svc = GuardServiceServer::new(EmptyGuard)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(usize::MAX);
        let incoming = TcpListenerStream::new(listener).map(move |s| {
            if let Ok(s) = &s {
                let _ = s.set_nodelay(nodelay);
            }
            s
        });
        Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming)
            .await?;
        anyhow::Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Child processes

/// A server process, killed and reaped when dropped (also when the bench panics).
struct ChildGuard {
    name: &'static str,
    child: Child,
    /// The empty server exits when this closes.
    _stdin: Option<ChildStdin>,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl ChildGuard {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(s)) => bail!("{} exited: {s}", self.name),
            Err(e) => bail!("{}: {e}", self.name),
        }
    }
}

/// `program` under `taskset -c CPU` when pinning, else as it is. taskset execs the program,
/// so the child's pid is the server's.
fn pinned(cfg: &Config, program: &Path) -> Command {
    if cfg.pin {
        let mut c = Command::new("taskset");
        c.args(["-c", &cfg.server_cpu.to_string()]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// A port free on 127.0.0.1 now (for toolgate's admin endpoint, whose address it does not
/// print).
fn free_port() -> anyhow::Result<u16> {
    let l = StdListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

struct Toolgate {
    proc: ChildGuard,
    addr: SocketAddr,
    /// The Unix socket, with `RPC_BENCH_UNIX=1`.
    socket: Option<PathBuf>,
    admin: SocketAddr,
    log: PathBuf,
}

fn start_toolgate(cfg: &Config, dir: &Path) -> anyhow::Result<Toolgate> {
    let exe = cfg
        .toolgate_bin
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolgate")));
    let exe = exe.as_path();
    let log = dir.join("decisions.jsonl");
    let stderr_path = dir.join("toolgate.stderr");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let stderr = std::fs::File::create(&stderr_path)?;
    let mut cmd = pinned(cfg, exe);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"]);
    // Extra flags replace the bench's own for the same option (an A/B of a setting:
    // `--decision-log off`, `--policy FILE`).
    let given = |flag: &str| cfg.toolgate_args.iter().any(|a| a == flag);
    if !given("--admin-listen") {
        cmd.arg("--admin-listen").arg(admin.to_string());
    }
    if !given("--decision-log") {
        cmd.arg("--decision-log").arg(&log);
    }
    let socket = cfg.unix.then(|| dir.join("guard.sock"));
    if let Some(s) = &socket {
        cmd.arg("--listen-unix").arg(s);
    }
    let child = cmd
        .args(&cfg.toolgate_args)
        .env("TOOLGATE_LOG", "info")
        // Spans stay in the process: nothing is exported anywhere.
        .env("OTEL_TRACES_EXPORTER", "none")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let mut proc = ChildGuard {
        name: "toolgate",
        child,
        _stdin: None,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(listening_addr) {
            return Ok(Toolgate {
                proc,
                addr,
                socket,
                admin,
                log,
            });
        }
        if let Err(e) = proc.check_alive() {
            bail!("{e}; its stderr:\n{text}");
        }
        if Instant::now() > deadline {
            bail!("toolgate did not listen within {START_TIMEOUT:?}; its stderr:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The address in toolgate's `toolgate listening` JSON log line.
fn listening_addr(line: &str) -> Option<SocketAddr> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let fields = v.get("fields")?;
    if fields.get("message")?.as_str()? != "toolgate listening" {
        return None;
    }
    fields.get("addr")?.as_str()?.parse().ok()
}

fn start_empty(cfg: &Config) -> anyhow::Result<(ChildGuard, SocketAddr)> {
    let exe = std::env::current_exe().context("current_exe")?;
    let mut child = pinned(cfg, &exe)
        .args(["--serve-empty", "127.0.0.1:0"])
        .env_remove(PINNED_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the empty server")?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let proc = ChildGuard {
        name: "empty server",
        child,
        _stdin: stdin,
    };
    let stdout = stdout.context("empty server: no stdout")?;
    // Read the first line on a thread so a server that hangs cannot hang the bench.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(START_TIMEOUT)
        .context("the empty server did not print its address")?;
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("the empty server printed `{}`", line.trim()))?;
    Ok((proc, addr))
}

/// `n` connections over a Unix domain socket.
async fn connect_unix(path: &Path, n: usize) -> anyhow::Result<Vec<GuardServiceClient<Channel>>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let dial = path.to_path_buf();
        // The URI is a placeholder: the connector dials the socket.
        let ch = Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let dial = dial.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(dial).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                }
            }))
            .await
            .with_context(|| format!("cannot connect to {}", path.display()))?;
        out.push(
            GuardServiceClient::new(ch)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        );
    }
    Ok(out)
}

async fn connect(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<GuardServiceClient<Channel>>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let ch = Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        out.push(
            GuardServiceClient::new(ch)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        );
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Loads

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum LoadId {
    Result1k,
    Result16k,
    Result64k,
    Start1k,
}

impl LoadId {
    const ALL: [LoadId; 4] = [
        LoadId::Result1k,
        LoadId::Result16k,
        LoadId::Result64k,
        LoadId::Start1k,
    ];

    fn name(self) -> &'static str {
        match self {
            LoadId::Result1k => "result_1k",
            LoadId::Result16k => "result_16k",
            LoadId::Result64k => "result_64k",
            LoadId::Start1k => "start_1k",
        }
    }

    fn label(self) -> &'static str {
        match self {
            LoadId::Result1k => "tool_call_result 1 KB, 32 in flight",
            LoadId::Result16k => "tool_call_result 16 KB, 32 in flight",
            LoadId::Result64k => "tool_call_result 64 KB, 32 in flight",
            LoadId::Start1k => "tool_call_start 1 KB, 1 in flight",
        }
    }

    fn in_flight(self) -> usize {
        match self {
            LoadId::Start1k => 1,
            _ => 32,
        }
    }
}

/// Where each request's own stamp goes: a fixed-width run of letters (no digits, so no
/// PII rule sees a phone or card number in it).
const STAMP: &str = "qqqqqqqqqq";

/// One load's request template; `request` stamps the call's sequence number into it so no
/// two calls carry the same text (the deep-rule verdict cache never answers).
struct Load {
    id: LoadId,
    tool: &'static str,
    arguments_json: String,
    output: String,
    stamp_in_output: Option<usize>,
    stamp_in_arguments: Option<usize>,
}

fn stamp(seq: u64) -> [u8; 10] {
    let mut out = [b'a'; 10];
    let mut n = seq;
    for b in out.iter_mut().rev() {
        *b = b'a' + (n % 26) as u8;
        n /= 26;
    }
    out
}

fn put_stamp(s: &mut String, at: usize, seq: u64) {
    let st = stamp(seq);
    // The stamp is ASCII over ASCII, so the string stays UTF-8.
    let text = std::str::from_utf8(&st).unwrap_or(STAMP);
    s.replace_range(at..at + STAMP.len(), text);
}

enum Call {
    Start(ToolCallStartRequest),
    Result(ToolCallResultRequest),
}

impl Load {
    fn new(id: LoadId) -> Load {
        let (tool, arguments_json, output) = match id {
            LoadId::Result1k => ("http.get", http_get_arguments(), json_listing(1024)),
            LoadId::Result16k => ("web.fetch", web_fetch_arguments(), web_page(16 * 1024)),
            LoadId::Result64k => ("web.fetch", web_fetch_arguments(), web_page(64 * 1024)),
            LoadId::Start1k => ("shell.exec", shell_arguments(1024), String::new()),
        };
        Load {
            id,
            tool,
            stamp_in_output: output.find(STAMP),
            stamp_in_arguments: arguments_json.find(STAMP),
            arguments_json,
            output,
        }
    }

    fn request(&self, caller: usize, seq: u64) -> Call {
        let context = Some(EventContext {
            // One agent session per caller: 32 concurrent agent steps.
            session_id: format!("rpc-bench-session-{caller}"),
            step_id: format!("step-{seq}"),
            tenant: "acme".into(),
            task_goal: "summarise the open issues of the billing service".into(),
            labels: Default::default(),
        });
        let mut arguments_json = self.arguments_json.clone();
        if let Some(at) = self.stamp_in_arguments {
            put_stamp(&mut arguments_json, at, seq);
        }
        match self.id {
            LoadId::Start1k => Call::Start(ToolCallStartRequest {
                context,
                tool_name: self.tool.into(),
                arguments_json,
                pause_id: String::new(),
            }),
            _ => {
                let mut output = self.output.clone();
                if let Some(at) = self.stamp_in_output {
                    put_stamp(&mut output, at, seq);
                }
                Call::Result(ToolCallResultRequest {
                    context,
                    tool_name: self.tool.into(),
                    arguments_json,
                    output,
                    is_error: false,
                })
            }
        }
    }

    fn wire_bytes(&self) -> usize {
        self.arguments_json.len() + self.output.len()
    }
}

/// Cuts `s` to at most `n` bytes on a char boundary.
fn cut_to(mut s: String, n: usize) -> String {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

fn http_get_arguments() -> String {
    serde_json::json!({
        "url": "https://api.example.com/v2/repos?org=acme&sort=updated&per_page=5",
        "headers": {"Accept": "application/json"},
        "request_ref": STAMP,
    })
    .to_string()
}

fn web_fetch_arguments() -> String {
    serde_json::json!({
        "url": "https://docs.example.org/guides/billing/invoices-and-credit-notes",
        "format": "markdown",
        "request_ref": STAMP,
    })
    .to_string()
}

/// A JSON listing as an HTTP API returns it (repositories of an organisation), `n` bytes.
fn json_listing(n: usize) -> String {
    let names = [
        "billing-service",
        "invoice-renderer",
        "ledger-sync",
        "customer-portal",
        "tax-rules",
        "payment-webhooks",
        "reports-nightly",
        "docs-site",
    ];
    let langs = ["Rust", "TypeScript", "Go", "Python"];
    let mut items = Vec::new();
    let mut text = String::new();
    for i in 0.. {
        let name = names[i % names.len()];
        items.push(serde_json::json!({
            "id": 40_112 + i * 37,
            "name": name,
            "full_name": format!("acme/{name}"),
            "description": format!("Service {i}: {name} for the finance platform"),
            "language": langs[i % langs.len()],
            "stargazers_count": 12 + (i * 7) % 90,
            "open_issues": (i * 5) % 23,
            "updated_at": format!("2026-11-{:02}T{:02}:14:09Z", 1 + i % 28, i % 24),
            "default_branch": "main",
        }));
        let doc = serde_json::json!({"ref": STAMP, "total_count": items.len(), "items": items});
        let next = doc.to_string();
        if next.len() > n {
            break;
        }
        text = next;
    }
    // Pad with whitespace inside the JSON to the exact size: still one valid document.
    let pad = n.saturating_sub(text.len());
    text.insert_str(text.len() - 1, &" ".repeat(pad));
    text
}

/// A documentation page as a fetch tool returns it (markdown from HTML), `n` bytes: prose,
/// lists, a table and a JSON example, with numbers and dates that change from section to
/// section so no two sections are the same text.
fn web_page(n: usize) -> String {
    let mut s = format!(
        "# Invoices and credit notes\n\nFetched page reference: {STAMP}\n\n\
         > This guide covers how the billing service issues invoices, how credit notes \
         correct them, and how both appear in exports.\n\n"
    );
    let topics = [
        (
            "Issuing an invoice",
            "an invoice is issued when a subscription period closes",
        ),
        (
            "Proration",
            "a plan change in the middle of a period is prorated by the day",
        ),
        (
            "Credit notes",
            "a credit note reduces the amount due on an open invoice",
        ),
        (
            "Currencies",
            "each account settles in one currency chosen at sign-up",
        ),
        (
            "Tax",
            "tax is computed per line from the customer's billing address",
        ),
        (
            "Exports",
            "finance exports run nightly and land in the reporting bucket",
        ),
        (
            "Dunning",
            "failed payments are retried on a schedule before the account is paused",
        ),
        (
            "Refunds",
            "a refund is issued against a paid invoice and settles in 5 to 10 days",
        ),
    ];
    let mut i = 0usize;
    while s.len() < n {
        let (title, lead) = topics[i % topics.len()];
        s.push_str(&format!(
            "## {title} ({section})\n\n\
             In short, {lead}. Section {section} was last reviewed on 2026-{month:02}-{day:02} \
             for release {major}.{minor}.{patch}. Amounts are stored in minor units, so \
             {cents} means {whole}.{frac:02} in the account currency; rounding happens once, \
             on the invoice total, never per line.\n\n\
             - Invoice numbers are sequential per account and never reused.\n\
             - A draft can be edited for {hours} hours; after that it is finalised.\n\
             - See also [the API reference](https://docs.example.org/api/v{major}/invoices#section-{section}).\n\n\
             | field | type | example |\n|---|---|---|\n\
             | `amount_due` | integer | {cents} |\n| `currency` | string | `eur` |\n\
             | `period_end` | date | 2026-{month:02}-{day:02} |\n\n\
             ```json\n{{\"invoice\": \"inv_{section}x{minor}\", \"lines\": {lines}, \"amount_due\": {cents}, \"status\": \"open\"}}\n```\n\n",
            section = i + 1,
            month = 1 + i % 12,
            day = 1 + (i * 3) % 28,
            major = 2 + i % 3,
            minor = i % 17,
            patch = (i * 7) % 11,
            cents = 1250 + i * 389,
            whole = (1250 + i * 389) / 100,
            frac = (1250 + i * 389) % 100,
            hours = 24 + (i % 4) * 24,
            lines = 1 + i % 9,
        ));
        i += 1;
    }
    cut_to(s, n)
}

/// A benign shell call, about `n` bytes of arguments JSON: a test run with its script.
fn shell_arguments(n: usize) -> String {
    let mut script = String::from("set -eu\ncd services/billing\n");
    let mut i = 0;
    loop {
        let line = format!(
            "cargo test --package billing-core --test invoices -- proration_case_{i} --exact\n"
        );
        let args = shell_json(&script, &line);
        if args.len() > n {
            break;
        }
        script.push_str(&line);
        i += 1;
    }
    shell_json(&script, "")
}

fn shell_json(script: &str, extra: &str) -> String {
    serde_json::json!({
        "command": "bash scripts/run-tests.sh",
        "cwd": "/home/agent/workspace/acme-billing",
        "timeout_ms": 120000,
        "env": {"RUST_LOG": "info", "CARGO_TERM_COLOR": "never"},
        "request_ref": STAMP,
        "script": format!("{script}{extra}"),
    })
    .to_string()
}

// ---------------------------------------------------------------------------------------
// Measuring

/// One server's CPU use by thread kind, from `/proc`.
#[derive(Clone, Default)]
struct ThreadUse {
    ns: u64,
    voluntary: u64,
    involuntary: u64,
}

type CpuSnapshot = BTreeMap<u32, (String, ThreadUse)>;

fn read_threads(pid: u32) -> CpuSnapshot {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let p = entry.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let u = ThreadUse {
            ns,
            voluntary: field("voluntary_ctxt_switches:"),
            involuntary: field("nonvoluntary_ctxt_switches:"),
        };
        out.insert(tid, (comm.trim().to_string(), u));
    }
    out
}

/// tokio names its threads `tokio-rt-worker` (older releases `tokio-runtime-worker`, cut
/// to 15 bytes by the kernel).
fn is_tokio(comm: &str) -> bool {
    comm.starts_with("tokio-rt") || comm.starts_with("tokio-runtime")
}

/// Per thread kind, the use between two snapshots. The runtime's workers are its first
/// threads (tokio starts them through its blocking pool, so they share its name); a pinned
/// server has one.
fn cpu_delta(before: &CpuSnapshot, after: &CpuSnapshot, workers: usize) -> [ThreadUse; 4] {
    let tokio_tids: Vec<u32> = after
        .iter()
        .filter(|(_, (comm, _))| is_tokio(comm))
        .map(|(tid, _)| *tid)
        .collect();
    let mut out: [ThreadUse; 4] = Default::default();
    for (tid, (comm, a)) in after {
        let b = before.get(tid).map(|(_, u)| u.clone()).unwrap_or_default();
        let kind = if is_tokio(comm) {
            if tokio_tids.iter().take(workers).any(|t| t == tid) {
                0
            } else {
                1
            }
        } else if comm == "decision-log" {
            2
        } else {
            3
        };
        out[kind].ns += a.ns.saturating_sub(b.ns);
        out[kind].voluntary += a.voluntary.saturating_sub(b.voluntary);
        out[kind].involuntary += a.involuntary.saturating_sub(b.involuntary);
    }
    out
}

struct Target<'a> {
    name: &'static str,
    pid: u32,
    clients: &'a [GuardServiceClient<Channel>],
}

#[derive(Default)]
struct CallerStats {
    latencies_ns: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
    /// Decisions by `DecisionStatus` (unspecified, pass, warn, block).
    statuses: [u64; 4],
    /// The rule ids of the first decision that was not PASS.
    first_hits: Option<String>,
}

struct Sample {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    errors: u64,
    first_error: Option<String>,
    statuses: [u64; 4],
    first_hits: Option<String>,
    /// Server CPU over the window, by thread kind.
    cpu: [ThreadUse; 4],
    /// Client CPU over the window, in ns.
    client_ns: u64,
    window: Duration,
    completed: usize,
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

async fn call(
    client: &mut GuardServiceClient<Channel>,
    c: Call,
) -> Result<Option<proto::Decision>, Status> {
    match c {
        Call::Start(r) => Ok(client.tool_call_start(r).await?.into_inner().decision),
        Call::Result(r) => Ok(client.tool_call_result(r).await?.into_inner().decision),
    }
}

async fn caller(
    mut client: GuardServiceClient<Channel>,
    load: Arc<Load>,
    index: usize,
    seq: Arc<AtomicU64>,
    measure_from: Instant,
    end: Instant,
) -> CallerStats {
    let mut st = CallerStats::default();
    loop {
        if Instant::now() >= end {
            return st;
        }
        let req = load.request(index, seq.fetch_add(1, Ordering::Relaxed));
        let t0 = Instant::now();
        let got = tokio::time::timeout(CALL_TIMEOUT, call(&mut client, req)).await;
        let t1 = Instant::now();
        match got {
            Ok(Ok(d)) => {
                if t1 >= measure_from && t1 < end {
                    st.latencies_ns.push((t1 - t0).as_nanos() as u64);
                    let d = d.unwrap_or_default();
                    let status = usize::try_from(d.status).unwrap_or(0).min(3);
                    st.statuses[status] += 1;
                    if status != proto::DecisionStatus::Pass as usize && st.first_hits.is_none() {
                        let ids: Vec<&str> = d.hits.iter().map(|h| h.rule_id.as_str()).collect();
                        st.first_hits = Some(ids.join(","));
                    }
                }
            }
            Ok(Err(s)) => {
                st.errors += 1;
                st.first_error
                    .get_or_insert_with(|| format!("{}: {}", s.code(), s.message()));
            }
            Err(_) => {
                st.errors += 1;
                st.first_error
                    .get_or_insert_with(|| format!("no answer within {CALL_TIMEOUT:?}"));
            }
        }
    }
}

/// Runs the attach command (see the module docs) for one window.
fn attach(cfg: &Config, t: &Target, load: LoadId, round: usize) -> Option<Child> {
    let cmd = cfg
        .attach
        .as_ref()?
        .replace("{pid}", &t.pid.to_string())
        .replace("{secs}", &format!("{:.3}", cfg.secs.as_secs_f64()))
        .replace("{server}", t.name)
        .replace("{load}", load.name())
        .replace("{round}", &round.to_string());
    eprintln!("  attach: {cmd}");
    match Command::new("sh").args(["-c", &cmd]).spawn() {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("  attach: cannot run: {e}");
            None
        }
    }
}

async fn measure(
    cfg: &Config,
    t: &Target<'_>,
    load: &Arc<Load>,
    seq: &Arc<AtomicU64>,
    round: usize,
) -> anyhow::Result<Sample> {
    let measure_from = Instant::now() + cfg.warmup;
    let end = measure_from + cfg.secs;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..load.id.in_flight() {
        let client = t.clients[i % t.clients.len()].clone();
        tasks.spawn(caller(
            client,
            load.clone(),
            i,
            seq.clone(),
            measure_from,
            end,
        ));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let me = std::process::id();
    let (server_before, client_before) = (read_threads(t.pid), read_threads(me));
    let mut attached = attach(cfg, t, load.id, round);
    tokio::time::sleep_until(end.into()).await;
    let (server_after, client_after) = (read_threads(t.pid), read_threads(me));
    let window = Instant::now() - measure_from;

    let mut all = CallerStats::default();
    while let Some(r) = tasks.join_next().await {
        let r = r.context("caller task failed")?;
        all.latencies_ns.extend(r.latencies_ns);
        all.errors += r.errors;
        if all.first_error.is_none() {
            all.first_error = r.first_error;
        }
        for (a, b) in all.statuses.iter_mut().zip(r.statuses) {
            *a += b;
        }
        if all.first_hits.is_none() {
            all.first_hits = r.first_hits;
        }
    }
    if let Some(child) = attached.as_mut() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    all.latencies_ns.sort_unstable();
    let workers = if cfg.pin {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let client_ns: u64 = cpu_delta(&client_before, &client_after, usize::MAX)
        .iter()
        .map(|u| u.ns)
        .sum();
    Ok(Sample {
        rps: all.latencies_ns.len() as f64 / cfg.secs.as_secs_f64(),
        p50_us: percentile(&all.latencies_ns, 0.50),
        p99_us: percentile(&all.latencies_ns, 0.99),
        errors: all.errors,
        first_error: all.first_error,
        statuses: all.statuses,
        first_hits: all.first_hits,
        cpu: cpu_delta(&server_before, &server_after, workers),
        client_ns,
        window,
        completed: all.latencies_ns.len(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

struct Summary {
    rps: f64,
    p50: f64,
    p99: f64,
    /// Server CPU µs per request by thread kind, and all kinds together (medians).
    cpu_us: [f64; 5],
    /// Context switches per request (voluntary + involuntary, all threads; median).
    switches: f64,
    /// Server and client CPU use over the window, in cores (medians).
    server_cores: f64,
    client_cores: f64,
}

fn summarize(samples: &[Sample]) -> Summary {
    let per_req = |s: &Sample, ns: u64| ns as f64 / 1000.0 / s.completed.max(1) as f64;
    let mut cpu_us = [0.0; 5];
    for (k, slot) in cpu_us.iter_mut().enumerate().take(4) {
        *slot = median(samples.iter().map(|s| per_req(s, s.cpu[k].ns)).collect());
    }
    cpu_us[4] = median(
        samples
            .iter()
            .map(|s| per_req(s, s.cpu.iter().map(|u| u.ns).sum()))
            .collect(),
    );
    Summary {
        rps: median(samples.iter().map(|s| s.rps).collect()),
        p50: median(samples.iter().map(|s| s.p50_us).collect()),
        p99: median(samples.iter().map(|s| s.p99_us).collect()),
        cpu_us,
        switches: median(
            samples
                .iter()
                .map(|s| {
                    let n: u64 = s.cpu.iter().map(|u| u.voluntary + u.involuntary).sum();
                    n as f64 / s.completed.max(1) as f64
                })
                .collect(),
        ),
        server_cores: median(
            samples
                .iter()
                .map(|s| {
                    let ns: u64 = s.cpu.iter().map(|u| u.ns).sum();
                    ns as f64 / s.window.as_nanos() as f64
                })
                .collect(),
        ),
        client_cores: median(
            samples
                .iter()
                .map(|s| s.client_ns as f64 / s.window.as_nanos() as f64)
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The run

async fn run(cfg: Config) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("toolgate-rpc-bench-")
        .tempdir()?;
    let want_toolgate = cfg.servers != Servers::Empty;
    let want_empty = cfg.servers != Servers::Toolgate;
    let toolgate = if want_toolgate {
        Some(start_toolgate(&cfg, dir.path())?)
    } else {
        None
    };
    let empty = if want_empty {
        Some(start_empty(&cfg)?)
    } else {
        None
    };
    eprintln!(
        "rpc bench: {} s measured after {} s warm-up, {} round(s), {} channel(s) per server; {}",
        cfg.secs.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        cfg.rounds,
        cfg.channels,
        if cfg.pin {
            format!(
                "servers on CPU {}, client on CPU {}",
                cfg.server_cpu, cfg.client_cpu
            )
        } else {
            "NOT PINNED (needs Linux, taskset and two CPUs): figures are not comparable".into()
        }
    );
    let mut targets = Vec::new();
    let tg_clients;
    let empty_clients;
    if let Some(t) = &toolgate {
        eprintln!(
            "toolgate pid {} on {} (admin {}, decision log {})",
            t.proc.pid(),
            t.addr,
            t.admin,
            t.log.display()
        );
        tg_clients = match &t.socket {
            Some(s) => connect_unix(s, cfg.channels).await?,
            None => connect(t.addr, cfg.channels).await?,
        };
        targets.push(Target {
            name: "toolgate",
            pid: t.proc.pid(),
            clients: &tg_clients,
        });
    }
    if let Some((p, addr)) = &empty {
        eprintln!("empty server pid {} on {addr}", p.pid());
        empty_clients = connect(*addr, cfg.channels).await?;
        targets.push(Target {
            name: "empty",
            pid: p.pid(),
            clients: &empty_clients,
        });
    }

    let seq = Arc::new(AtomicU64::new(0));
    let mut results: Vec<(LoadId, Vec<Vec<Sample>>)> = Vec::new();
    let mut sent_to_toolgate = 0usize;
    for &id in &cfg.loads {
        let load = Arc::new(Load::new(id));
        eprintln!(
            "{}: {} bytes of arguments and output per call",
            id.label(),
            load.wire_bytes()
        );
        let mut per_target: Vec<Vec<Sample>> = targets.iter().map(|_| Vec::new()).collect();
        for round in 1..=cfg.rounds {
            for (ti, t) in targets.iter().enumerate() {
                let s = measure(&cfg, t, &load, &seq, round).await?;
                eprintln!(
                    "  round {round} {:<8} {:>9.0} req/s  p50 {:>8.1} µs  p99 {:>8.1} µs  \
                     server {:>5.1} µs/req ({:.2} cores)  client {:.2} cores  \
                     pass/warn/block {}/{}/{}{}{}",
                    t.name,
                    s.rps,
                    s.p50_us,
                    s.p99_us,
                    s.cpu.iter().map(|u| u.ns).sum::<u64>() as f64
                        / 1000.0
                        / s.completed.max(1) as f64,
                    s.cpu.iter().map(|u| u.ns).sum::<u64>() as f64 / s.window.as_nanos() as f64,
                    s.client_ns as f64 / s.window.as_nanos() as f64,
                    s.statuses[1],
                    s.statuses[2],
                    s.statuses[3],
                    s.first_hits
                        .as_ref()
                        .map(|h| format!("  first non-pass hits: [{h}]"))
                        .unwrap_or_default(),
                    if s.errors > 0 {
                        format!(
                            "  ERRORS {} (first: {})",
                            s.errors,
                            s.first_error.as_deref().unwrap_or("?")
                        )
                    } else {
                        String::new()
                    },
                );
                if t.name == "toolgate" {
                    sent_to_toolgate += s.completed;
                }
                if s.completed == 0 {
                    bail!("{}: no call completed on {}", id.name(), t.name);
                }
                per_target[ti].push(s);
            }
        }
        results.push((id, per_target));
    }

    report(&cfg, &targets, &results);
    if let Some(t) = &toolgate {
        toolgate_checks(t, sent_to_toolgate);
    }
    // The guards stop both servers here, and on any early return or panic above.
    drop(toolgate);
    drop(empty);
    Ok(())
}

fn fmt_us(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn report(cfg: &Config, targets: &[Target], results: &[(LoadId, Vec<Vec<Sample>>)]) {
    let index = |name: &str| targets.iter().position(|t| t.name == name);
    let (tg, em) = (index("toolgate"), index("empty"));
    println!();
    println!(
        "Medians of {} round(s) of {} s each ({} s warm-up); server pinned: {}.",
        cfg.rounds,
        cfg.secs.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        cfg.pin
    );
    println!();
    println!(
        "| load | toolgate / empty throughput | toolgate p50 | empty p50 | toolgate p99 | empty p99 (µs) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let mut verdicts = Vec::new();
    for (id, per) in results {
        let s_tg = tg.map(|i| summarize(&per[i]));
        let s_em = em.map(|i| summarize(&per[i]));
        let ratio = match (&s_tg, &s_em) {
            (Some(a), Some(b)) => a.rps / b.rps,
            _ => f64::NAN,
        };
        let f = |s: &Option<Summary>, get: fn(&Summary) -> f64| {
            s.as_ref().map_or("n/a".to_string(), |s| fmt_us(get(s)))
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            id.label(),
            if ratio.is_nan() {
                "n/a".into()
            } else {
                format!("{ratio:.2}")
            },
            f(&s_tg, |s| s.p50),
            f(&s_em, |s| s.p50),
            f(&s_tg, |s| s.p99),
            f(&s_em, |s| s.p99),
        );
        let min_ratio = match id {
            LoadId::Result1k => Some(0.8),
            LoadId::Result16k => Some(0.5),
            LoadId::Result64k => Some(0.4),
            LoadId::Start1k => None,
        };
        if let Some(min) = min_ratio {
            verdicts.push((
                format!("{}: throughput ratio ≥ {min}", id.label()),
                (!ratio.is_nan()).then_some(ratio >= min),
                format!("{ratio:.2}"),
            ));
        }
        if *id == LoadId::Start1k
            && let (Some(a), Some(b)) = (&s_tg, &s_em)
        {
            verdicts.push((
                format!("{}: toolgate p50 ≤ empty p50 + 20 µs", id.label()),
                Some(a.p50 <= b.p50 + 20.0),
                format!("{} ≤ {}", fmt_us(a.p50), fmt_us(b.p50 + 20.0)),
            ));
            verdicts.push((
                format!("{}: toolgate p99 ≤ 2 × empty p99", id.label()),
                Some(a.p99 <= 2.0 * b.p99),
                format!("{} ≤ {}", fmt_us(a.p99), fmt_us(2.0 * b.p99)),
            ));
        }
    }
    println!();
    println!("Targets:");
    if verdicts.is_empty() {
        println!("- none measured: the targets compare toolgate with the empty server");
    }
    for (what, ok, figure) in verdicts {
        let v = match ok {
            Some(true) => "met",
            Some(false) => "not met",
            None => "not measured",
        };
        println!("- {what}: {v} ({figure})");
    }

    println!();
    println!(
        "Throughput and CPU (medians): server CPU per request by thread kind (worker: the \
         tokio worker; blocking: tokio's blocking pool; log: the decision-log writer), \
         context switches per request, and cores used over the window."
    );
    println!();
    println!(
        "| load | server | req/s | CPU µs/req | worker | blocking | log | other | switches/req | server cores | client cores |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (id, per) in results {
        for (t, samples) in targets.iter().zip(per) {
            let s = summarize(samples);
            println!(
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                id.name(),
                t.name,
                s.rps,
                fmt_us(s.cpu_us[4]),
                fmt_us(s.cpu_us[0]),
                fmt_us(s.cpu_us[1]),
                fmt_us(s.cpu_us[2]),
                fmt_us(s.cpu_us[3]),
                s.switches,
                s.server_cores,
                s.client_cores,
            );
        }
    }
    if tg.is_some() && em.is_some() {
        println!();
        println!("Per-round throughput ratios (toolgate / empty, same round):");
        for (id, per) in results {
            if let (Some(a), Some(b)) = (tg, em) {
                let r: Vec<String> = per[a]
                    .iter()
                    .zip(&per[b])
                    .map(|(x, y)| format!("{:.2}", x.rps / y.rps))
                    .collect();
                println!("- {}: {}", id.name(), r.join(", "));
            }
        }
    }
}

/// Confirms the decision log and metrics were on: lines in the log files and the
/// decisions the metrics counted, against the calls toolgate answered in measured windows
/// (the log also holds warm-up calls, so it has more).
fn toolgate_checks(t: &Toolgate, measured: usize) {
    // The writer naps between drains; give it time to catch up.
    std::thread::sleep(Duration::from_millis(300));
    let mut lines = 0usize;
    let mut files = vec![t.log.clone()];
    for i in 1..=5 {
        files.push(PathBuf::from(format!("{}.{i}", t.log.display())));
    }
    for f in files {
        if let Ok(file) = std::fs::File::open(&f) {
            lines += BufReader::new(file).lines().count();
        }
    }
    println!();
    println!(
        "toolgate: {lines} decision log lines, {measured} calls in measured windows (more with warm-up)"
    );
    match scrape(t.admin) {
        Ok(text) => {
            let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                let name = line.split(['{', ' ']).next().unwrap_or("");
                if matches!(
                    name,
                    "toolgate_decisions_total"
                        | "toolgate_decision_log_dropped_total"
                        | "toolgate_deep_wait_timeouts_total"
                        | "toolgate_fail_open_total"
                ) && let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
                {
                    *sums.entry(name).or_default() += v;
                }
            }
            for (k, v) in sums {
                println!("toolgate metrics: {k} = {v}");
            }
        }
        Err(e) => println!("toolgate metrics: cannot scrape {}: {e}", t.admin),
    }
}

fn scrape(admin: SocketAddr) -> anyhow::Result<String> {
    let mut s = TcpStream::connect_timeout(&admin, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}
