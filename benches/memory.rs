//! Memory of a whole `toolgate serve` process: resident set size when idle, and after
//! 100,000 live sessions, each with one tool call and one tool result (so each session also
//! holds a provenance record). Run with `cargo bench --bench memory`; the figures go to
//! BENCHMARKS.md. `MEMORY_BENCH_SESSIONS` changes the session count.

use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use toolgate::proto::guard_service_client::GuardServiceClient;
use toolgate::proto::{EventContext, ToolCallResultRequest, ToolCallStartRequest};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/{pid}/status"))
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let sessions: usize = std::env::var("MEMORY_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let port = StdListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "serve",
            "--listen",
            &addr.to_string(),
            "--admin-listen",
            "off",
        ])
        .args(["--decision-log", "off", "--log-format", "text"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "toolgate did not start listening"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.0.id();
    let idle = rss_kib(pid)?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let started = Instant::now();
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .connect()
            .await?;
        let mut tasks = tokio::task::JoinSet::new();
        const WORKERS: usize = 32;
        for w in 0..WORKERS {
            let mut c = GuardServiceClient::new(channel.clone());
            tasks.spawn(async move {
                for i in (w..sessions).step_by(WORKERS) {
                    let context = Some(EventContext {
                        session_id: format!("session-{i:06}"),
                        step_id: "1".into(),
                        tenant: "bench".into(),
                        task_goal: "summarize the inbox".into(),
                        labels: Default::default(),
                    });
                    c.tool_call_start(ToolCallStartRequest {
                        context: context.clone(),
                        tool_name: "email.read_inbox".into(),
                        arguments_json: r#"{"folder":"inbox","limit":20}"#.into(),
                        pause_id: String::new(),
                    })
                    .await?;
                    c.tool_call_result(ToolCallResultRequest {
                        context,
                        tool_name: "email.read_inbox".into(),
                        arguments_json: String::new(),
                        output: format!(
                            "From: sender{i}@mail.example: lunch on Friday? See https://calendar.example/e/{i}"
                        ),
                        is_error: false,
                    })
                    .await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(r) = tasks.join_next().await {
            r??;
        }
        anyhow::Ok(())
    })?;
    let elapsed = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let full = rss_kib(pid)?;
    println!("idle RSS: {:.1} MiB", idle as f64 / 1024.0);
    println!(
        "RSS with {sessions} live sessions (1 call + 1 result each): {:.1} MiB ({:.0} bytes per session above idle); driven in {:.1} s",
        full as f64 / 1024.0,
        (full.saturating_sub(idle) * 1024) as f64 / sessions as f64,
        elapsed.as_secs_f64()
    );
    Ok(())
}
