//! Overload: ten times the admitted concurrency, each call a 64 KB tool result, against a
//! real `toolgate serve` process. Calls past `--max-in-flight` are shed with UNAVAILABLE at
//! once, the process's peak memory stays under a bound, and it answers normally right after.

use toolgate::proto::{Action, ToolCallResultRequest};

use super::common::{ctx, default_pack_file};
use super::services::Toolgate;

/// Calls admitted at once.
const ADMITTED: usize = 8;
/// Peak resident memory the burst may add above the idle process. 80 requests of 64 KB are
/// 5 MiB on the wire; a debug build measured 62 to 81 MiB above idle over four runs (eight
/// calls scanned at once, each on a blocking thread with its own allocator heap, and 80
/// connections' HTTP/2 buffers). The bound leaves room for a slower machine.
const BURST_BOUND_KIB: u64 = 128 * 1024;

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_times_the_admitted_load_is_shed_with_unavailable_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let pack = default_pack_file(dir.path());
    let admitted = ADMITTED.to_string();
    let t = Toolgate::serve(&pack, &[], &["--max-in-flight", &admitted]).await;
    let pid = t.pid();
    let idle = status_kib(pid, "VmRSS:");
    // A 64 KB tool result of ordinary text, with a secret at the end so every call has
    // work for the redactor.
    let line = "2026-11-25T10:00:00Z INFO request served path=/api/v1/items status=200\n";
    let mut output = line.repeat(64 * 1024 / line.len());
    output.push_str("key AKIAZ7Q3LDM4XKE2WB5N\n");
    let (mut ok, mut shed) = (0usize, 0usize);
    for round in 0..3 {
        // One connection per caller, so the calls really arrive together.
        let mut set = tokio::task::JoinSet::new();
        for i in 0..ADMITTED * 10 {
            let mut c = t.client().await;
            let output = output.clone();
            set.spawn(async move {
                c.tool_call_result(ToolCallResultRequest {
                    context: ctx(&format!("burst-{round}-{i}")),
                    tool_name: "logs.read".into(),
                    arguments_json: "{}".into(),
                    output,
                    is_error: false,
                })
                .await
            });
        }
        while let Some(r) = set.join_next().await {
            match r.unwrap() {
                Ok(resp) => {
                    let d = resp.into_inner().decision.unwrap();
                    assert_eq!(d.action(), Action::Redact, "{d:?}");
                    ok += 1;
                }
                Err(s) => {
                    assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
                    assert!(s.message().contains("overloaded"), "{}", s.message());
                    shed += 1;
                }
            }
        }
    }
    eprintln!("overload: {ok} answered, {shed} shed");
    assert!(shed > 0, "nothing was shed at ten times the admitted load");
    assert!(ok >= ADMITTED, "too few calls answered: {ok}");
    let peak = status_kib(pid, "VmHWM:");
    eprintln!("overload: idle {idle} KiB, peak {peak} KiB");
    assert!(
        peak <= idle + BURST_BOUND_KIB,
        "peak RSS {peak} KiB is over idle {idle} KiB + {BURST_BOUND_KIB} KiB"
    );
    // Right after, a call is answered as usual.
    let mut c = t.client().await;
    let d = c
        .tool_call_result(ToolCallResultRequest {
            context: ctx("after"),
            tool_name: "logs.read".into(),
            arguments_json: "{}".into(),
            output: "all good".into(),
            is_error: false,
        })
        .await
        .expect("answered after the burst")
        .into_inner()
        .decision
        .unwrap();
    assert_eq!(d.action(), Action::Allow);
}
