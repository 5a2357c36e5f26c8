//! Per-tenant rules from a real PostgreSQL: migrations, a rule for one tenant only, a change
//! seen through NOTIFY, a bad row, and the database stopped mid-run.

use std::time::{Duration, Instant};

use super::common::{ctx, default_pack_text, metric_value, start_req};
use super::services::{Postgres, Toolgate};

const ROW: &str = r#"INSERT INTO ai_guardrails.policy_rules (tenant, rule_id, rule, tool_risks) VALUES
    ('acme', 'customer-export', '{"keywords": ["customer export"], "action": "stop",
      "level": "high", "applies_to": ["tool_call_start"], "tags": ["privacy"],
      "reason": "customer exports need the data team"}', '{"crm.*": "high"}')"#;

fn migrate(url: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["migrate", "--database-url", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn pack(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tenants.yaml");
    let text = format!(
        "{}\ntenants:\n  database_url_env: TG_TEST_DB\n  cache_ttl_s: 300\n",
        default_pack_text()
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn export(tg: &Toolgate, tenant: &str) -> toolgate::proto::Decision {
    let mut r = start_req(
        "crm.query",
        r#"{"query": "run the customer export for Q3"}"#,
    );
    let mut c = ctx(&format!("s-{tenant}")).unwrap();
    c.tenant = tenant.into();
    r.context = Some(c);
    tg.client()
        .await
        .tool_call_start(r)
        .await
        .expect("the call is answered")
        .into_inner()
        .decision
        .unwrap()
}

async fn wait_metric(tg: &Toolgate, name: &str, want: f64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let got = metric_value(&tg.metrics().await, name, &[]);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is {got}, not {want}, after {within:?}: {}",
            tg.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[test]
fn migrations_apply_once() {
    let pg = Postgres::start();
    let first = migrate(&pg.url());
    assert_eq!(first, "applied 0001_policy_rules\napplied 0002_notify\n");
    assert_eq!(migrate(&pg.url()), "schema is up to date\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_rule_applies_to_its_tenant_follows_notify_and_survives_an_outage() {
    let pg = Postgres::start();
    migrate(&pg.url());
    pg.exec(ROW).await;
    let dir = tempfile::tempdir().unwrap();
    let url = pg.url();
    let review = format!("127.0.0.1:{}", super::services::free_port());
    let tg = Toolgate::serve(
        &pack(dir.path()),
        &[("TG_TEST_DB", &url)],
        &["--review-listen", &review],
    )
    .await;
    wait_metric(
        &tg,
        "toolgate_tenant_overlays",
        1.0,
        Duration::from_secs(20),
    )
    .await;
    wait_metric(
        &tg,
        "toolgate_tenant_database_up",
        1.0,
        Duration::from_secs(5),
    )
    .await;

    // The rule is acme's alone.
    let acme = export(&tg, "acme").await;
    assert_eq!(acme.action, toolgate::proto::Action::Stop as i32);
    assert!(
        acme.hits
            .iter()
            .any(|h| h.rule_id == "customer-export"
                && h.policy_tags.contains(&"privacy".to_string()))
    );
    assert!(
        acme.policy_version.contains("+tenant/acme@"),
        "{}",
        acme.policy_version
    );
    let globex = export(&tg, "globex").await;
    assert_eq!(
        globex.action,
        toolgate::proto::Action::Allow as i32,
        "{globex:?}"
    );
    assert!(
        !globex.policy_version.contains('+'),
        "{}",
        globex.policy_version
    );

    // A change reaches the server through NOTIFY, well before the 300 s cache expires.
    let changed = Instant::now();
    pg.exec(
        "UPDATE ai_guardrails.policy_rules SET rule = rule || '{\"action\": \"retry\"}' \
         WHERE tenant = 'acme' AND rule_id = 'customer-export'",
    )
    .await;
    let retried = loop {
        let d = export(&tg, "acme").await;
        if d.action == toolgate::proto::Action::Retry as i32 {
            break d;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(1),
            "not seen within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_ne!(retried.policy_version, acme.policy_version);
    eprintln!("row change visible after {:?}", changed.elapsed());

    // A bad row is rejected with its id and field; the tenant keeps its last good overlay.
    pg.exec(
        "INSERT INTO ai_guardrails.policy_rules (tenant, rule_id, rule) \
         VALUES ('acme', 'broken', '{\"regex\": \"(\", \"action\": \"stop\"}')",
    )
    .await;
    wait_metric(
        &tg,
        "toolgate_tenant_rows_rejected_total",
        1.0,
        Duration::from_secs(5),
    )
    .await;
    assert!(tg.log().contains("row `broken`: regex"), "{}", tg.log());
    let kept = export(&tg, "acme").await;
    assert_eq!(kept.policy_version, retried.policy_version);

    // The database goes away while calls flow: none fails; acme keeps its overlay, the
    // others are judged by the static pack and say so.
    let flowing = tokio::spawn({
        let addr = tg.addr.clone();
        async move {
            let mut c = toolgate::proto::guard_service_client::GuardServiceClient::connect(
                format!("http://{addr}"),
            )
            .await
            .unwrap();
            let mut versions = Vec::new();
            for i in 0..400 {
                let tenant = if i % 2 == 0 { "acme" } else { "globex" };
                let mut r = start_req("crm.query", r#"{"query": "run the customer export"}"#);
                let mut cx = ctx("flow").unwrap();
                cx.tenant = tenant.into();
                r.context = Some(cx);
                let d = c
                    .tool_call_start(r)
                    .await
                    .expect("no call fails")
                    .into_inner();
                versions.push(d.decision.unwrap().policy_version);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            versions
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    pg.down();
    wait_metric(
        &tg,
        "toolgate_tenant_database_up",
        0.0,
        Duration::from_secs(10),
    )
    .await;
    let versions = flowing.await.unwrap();
    assert_eq!(versions.len(), 400);
    let during = export(&tg, "acme").await;
    assert_eq!(during.policy_version, retried.policy_version);
    let other = export(&tg, "globex").await;
    assert!(
        other.policy_version.ends_with("+static"),
        "{}",
        other.policy_version
    );
    assert!(versions.iter().any(|v| v.ends_with("+static")));
    assert!(
        tg.log().contains("tenant database unreachable"),
        "{}",
        tg.log()
    );

    // Back up: the refresher reconnects by itself and reads everything again.
    pg.up();
    wait_metric(
        &tg,
        "toolgate_tenant_database_up",
        1.0,
        Duration::from_secs(15),
    )
    .await;
    let back = export(&tg, "globex").await;
    assert_eq!(back.policy_version, globex.policy_version);
}

#[test]
fn test_runs_scenarios_for_a_tenant_against_the_database() {
    let pg = Postgres::start();
    migrate(&pg.url());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(pg.exec(ROW));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("exports.yaml"),
        "- name: a customer export is stopped for acme\n  \
         event: { event_type: tool_call_start, tool_name: crm.query, arguments: { query: \"run the customer export\" } }\n  \
         expect:\n    action: stop\n    rules: [customer-export]\n",
    )
    .unwrap();
    let run = |tenant: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
        c.arg("test");
        if let Some(t) = tenant {
            c.args(["--tenant", t, "--database-url", &pg.url()]);
        }
        c.arg(dir.path()).output().unwrap()
    };
    let acme = run(Some("acme"));
    assert!(
        acme.status.success(),
        "{}{}",
        String::from_utf8_lossy(&acme.stdout),
        String::from_utf8_lossy(&acme.stderr)
    );
    assert!(String::from_utf8_lossy(&acme.stdout).contains("1 passed, 0 failed"));
    // Without the tenant the pack alone allows it, so the scenario fails.
    let plain = run(None);
    assert!(!plain.status.success());
    assert!(String::from_utf8_lossy(&plain.stdout).contains("0 passed, 1 failed"));
}
