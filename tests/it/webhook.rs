//! The admission webhook over real HTTPS: AdmissionReview fixtures in, the JSONPatch applied
//! to the fixture's pod as the API server would, the result read as a typed Pod.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};
use toolgate::admission::InjectorConfig;
use toolgate::admission::server::{Webhook, WebhookOptions, start};

struct Hook {
    hook: Webhook,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

fn write_cert(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key, ck.cert.pem())
}

fn client_trusting(pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

async fn hook(config: InjectorConfig) -> Hook {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = write_cert(dir.path(), "tls");
    let hook = start(WebhookOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert: cert.clone(),
        key: key.clone(),
        config,
    })
    .await
    .unwrap();
    Hook {
        hook,
        client: client_trusting(&pem),
        _dir: dir,
        cert,
        key,
    }
}

fn config() -> InjectorConfig {
    InjectorConfig {
        image: "registry.example/toolgate:0.1.0".into(),
        namespace: "toolgate-system".into(),
        otel_env: [(
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
            "http://otel-collector.observability:4317".to_string(),
        )]
        .into(),
        ..InjectorConfig::default()
    }
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

impl Hook {
    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.hook.addr.port())
    }

    async fn review(&self, path: &str, body: &Value) -> Value {
        let resp = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }
}

/// The pod after the review's patch, and the response.
fn applied(review: &Value, answer: &Value) -> (Pod, Value) {
    let response = answer["response"].clone();
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["uid"], review["request"]["uid"]);
    let mut object = review["request"]["object"].clone();
    if let Some(p) = response["patch"].as_str() {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = decode_base64(p);
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    (serde_json::from_value(object).unwrap(), response)
}

fn decode_base64(s: &str) -> Vec<u8> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | T.iter().position(|t| *t == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn sidecar(pod: &Pod) -> Option<&Container> {
    let spec = pod.spec.as_ref().unwrap();
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .find(|c| c.name == "toolgate")
}

fn env_of<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .as_deref()
}

#[tokio::test]
async fn an_annotated_pod_gets_a_native_sidecar_its_policy_and_the_address() {
    let h = hook(config()).await;
    let review = fixture("annotated.json");
    let (pod, resp) = applied(&review, &h.review("/mutate", &review).await);
    assert_eq!(resp["allowed"], true);
    let spec = pod.spec.as_ref().unwrap();
    let init = spec.init_containers.as_ref().unwrap();
    assert_eq!(init[0].name, "toolgate", "the guard starts first");
    let tg = &init[0];
    assert_eq!(tg.restart_policy.as_deref(), Some("Always"));
    assert_eq!(tg.image.as_deref(), Some("registry.example/toolgate:0.1.0"));
    let args = tg.args.as_ref().unwrap().join(" ");
    // No policy annotation and none configured: the pack embedded in the binary.
    assert!(args.starts_with("serve --listen 127.0.0.1:50051"), "{args}");
    assert!(args.contains("--health-listen 0.0.0.0:9902"), "{args}");
    assert!(args.contains("--mode enforce"), "{args}");
    // The kubelet probes the pod IP: the probes go to the health listener bound there.
    let startup = tg
        .startup_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(startup.path.as_deref(), Some("/readyz"));
    assert_eq!(
        startup.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9902)
    );
    assert!(tg.readiness_probe.is_some() && tg.liveness_probe.is_some());
    let sc = tg.security_context.as_ref().unwrap();
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop.as_deref(),
        Some(&["ALL".to_string()][..])
    );
    assert_eq!(
        env_of(tg, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        Some("http://otel-collector.observability:4317")
    );
    assert!(spec.volumes.is_none() && tg.volume_mounts.is_none());
    let agent = &spec.containers[0];
    assert_eq!(
        env_of(agent, "TOOLGATE_ADDR"),
        Some("http://127.0.0.1:50051")
    );
    assert_eq!(
        env_of(agent, "TOOLGATE_MCP_URL"),
        None,
        "no proxy asked for"
    );
    let ann = pod.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        ann.get("toolgate.dev/injected").map(String::as_str),
        Some("true")
    );

    // Idempotent: the injected pod, reviewed again, comes back unchanged.
    let mut again = review.clone();
    again["request"]["object"] = serde_json::to_value(&pod).unwrap();
    let resp = h.review("/mutate", &again).await;
    assert_eq!(resp["response"]["allowed"], true);
    assert!(resp["response"].get("patch").is_none(), "{resp}");
    h.hook.stop().await;
}

#[tokio::test]
async fn selection_by_annotation_namespace_and_opt_out() {
    let h = hook(config()).await;
    let cases = [
        ("/mutate", "unannotated.json", false),
        ("/mutate/namespace", "unannotated.json", true),
        ("/mutate/namespace", "opted_out.json", false),
        ("/mutate", "opted_out.json", false),
        ("/mutate", "already_injected.json", false),
        ("/mutate/namespace", "kube_system.json", false),
        ("/mutate", "kube_system.json", false),
    ];
    for (path, name, injected) in cases {
        let review = fixture(name);
        let (pod, resp) = applied(&review, &h.review(path, &review).await);
        assert_eq!(resp["allowed"], true, "{path} {name}");
        let n = pod
            .spec
            .as_ref()
            .unwrap()
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.name == "toolgate")
            .count();
        let want = usize::from(injected || name == "already_injected.json");
        assert_eq!(n, want, "{path} {name}");
        assert_eq!(resp.get("patch").is_some(), injected, "{path} {name}");
    }
    // The injector's own namespace is never mutated either.
    let mut own = fixture("annotated.json");
    own["request"]["namespace"] = "toolgate-system".into();
    assert!(
        h.review("/mutate", &own).await["response"]
            .get("patch")
            .is_none()
    );
    h.hook.stop().await;
}

#[tokio::test]
async fn existing_init_containers_volumes_and_env_are_kept() {
    let h = hook(config()).await;
    let review = fixture("existing_init_volumes_env.json");
    let (pod, _) = applied(&review, &h.review("/mutate", &review).await);
    let spec = pod.spec.as_ref().unwrap();
    let init: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(init, vec!["toolgate", "migrate"]);
    let vols: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(vols, vec!["cache", "toolgate-policy"]);
    assert_eq!(
        spec.volumes.as_ref().unwrap()[1]
            .config_map
            .as_ref()
            .unwrap()
            .name,
        "payments-policy",
        "the annotation names the policy"
    );
    let agent = &spec.containers[0];
    assert_eq!(env_of(agent, "LOG_LEVEL"), Some("debug"));
    assert_eq!(
        env_of(agent, "TOOLGATE_ADDR"),
        Some("http://custom:1"),
        "a value the pod sets itself is kept"
    );
    assert_eq!(
        env_of(agent, "TOOLGATE_MCP_URL"),
        Some("http://127.0.0.1:8808/mcp")
    );
    assert_eq!(
        env_of(&spec.containers[1], "TOOLGATE_ADDR"),
        Some("http://127.0.0.1:50051")
    );
    let tg = sidecar(&pod).unwrap();
    let args = tg.args.as_ref().unwrap().join(" ");
    assert!(
        args.contains("serve --policy /etc/toolgate/policy.yaml"),
        "{args}"
    );
    assert!(
        args.contains("serve --policy /etc/toolgate/policy.yaml"),
        "{args}"
    );
    assert!(args.contains("--mode shadow"), "{args}");
    assert!(
        args.contains(
            "--mcp-listen 127.0.0.1:8808 --mcp-upstream http://tools.agents.svc:8000/mcp"
        ),
        "{args}"
    );
    let limits = tg.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["memory"].0, "512Mi");
    h.hook.stop().await;
}

#[tokio::test]
async fn without_native_sidecars_the_guard_is_a_regular_container() {
    let h = hook(InjectorConfig {
        native_sidecar: false,
        ..config()
    })
    .await;
    let review = fixture("annotated.json");
    let (pod, _) = applied(&review, &h.review("/mutate", &review).await);
    let spec = pod.spec.as_ref().unwrap();
    assert!(spec.init_containers.is_none());
    let tg = spec
        .containers
        .iter()
        .find(|c| c.name == "toolgate")
        .unwrap();
    assert_eq!(tg.restart_policy, None);
    h.hook.stop().await;
}

/// A pod that names its policy but proxies nothing still gets that policy (the volume and
/// the `--policy` flag go together); one that names a gRPC tool server gets `--upstream`.
#[tokio::test]
async fn a_named_policy_is_served_and_a_tool_upstream_becomes_the_grpc_proxy() {
    let h = hook(config()).await;
    let with = |annotations: Value| {
        let mut review = fixture("annotated.json");
        review["request"]["object"]["metadata"]["annotations"] = annotations;
        review
    };
    let review = with(json!({
        "toolgate.dev/inject": "true",
        "toolgate.dev/policy": "payments-policy",
    }));
    let (pod, resp) = applied(&review, &h.review("/mutate", &review).await);
    assert_eq!(resp["allowed"], true);
    let args = sidecar(&pod).unwrap().args.as_ref().unwrap().join(" ");
    assert!(args.starts_with("serve --policy /etc/toolgate/"), "{args}");
    assert!(
        !args.contains("--upstream") && !args.contains("--mcp-listen"),
        "{args}"
    );

    let review = with(json!({
        "toolgate.dev/inject": "true",
        "toolgate.dev/tool-upstream": "http://tools.agents.svc:7000",
    }));
    let (pod, resp) = applied(&review, &h.review("/mutate", &review).await);
    assert_eq!(resp["allowed"], true);
    let args = sidecar(&pod).unwrap().args.as_ref().unwrap().join(" ");
    assert!(
        args.contains("--upstream http://tools.agents.svc:7000"),
        "{args}"
    );
    // ToolService is served beside GuardService: the app dials the same address.
    let agent = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        env_of(agent, "TOOLGATE_ADDR"),
        Some("http://127.0.0.1:50051")
    );

    let review = with(json!({
        "toolgate.dev/inject": "true",
        "toolgate.dev/tool-upstream": "tools.agents.svc:7000",
    }));
    let resp = h.review("/mutate", &review).await["response"].clone();
    assert_eq!(resp["allowed"], false);
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(msg.contains("toolgate.dev/tool-upstream"), "{msg}");
    h.hook.stop().await;
}

#[tokio::test]
async fn malformed_reviews_are_denied_or_allowed_with_a_warning_as_configured() {
    let h = hook(config()).await;
    for (name, want) in [
        ("bad_annotation.json", "toolgate.dev/mode"),
        ("not_a_pod.json", "is not a Pod"),
    ] {
        let resp = h.review("/mutate", &fixture(name)).await["response"].clone();
        assert_eq!(resp["allowed"], false, "{name}");
        let msg = resp["status"]["message"].as_str().unwrap();
        assert!(msg.contains(want), "{name}: {msg}");
    }
    let resp = h
        .client
        .post(h.url("/mutate"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["response"]["allowed"], false);
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
    let resp = h
        .client
        .post(h.url("/mutate"))
        .header("content-type", "text/plain")
        .body(fixture("annotated.json").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    h.hook.stop().await;

    let lenient = hook(InjectorConfig {
        on_malformed: "allow".into(),
        ..config()
    })
    .await;
    let resp = lenient
        .review("/mutate", &fixture("bad_annotation.json"))
        .await["response"]
        .clone();
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not injected")
    );
    lenient.hook.stop().await;
}

#[tokio::test]
async fn healthz_answers_and_a_rotated_certificate_is_served() {
    let h = hook(config()).await;
    let ok = h.client.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(ok.text().await.unwrap(), "ok\n");
    // cert-manager replaces both files; the next connection gets the new certificate.
    let dir = h.cert.parent().unwrap().to_path_buf();
    let (new_cert, new_key, new_pem) = write_cert(&dir, "next");
    std::fs::rename(&new_key, &h.key).unwrap();
    std::fs::rename(&new_cert, &h.cert).unwrap();
    let fresh = client_trusting(&new_pem);
    let deadline = std::time::Instant::now() + toolgate::admission::server::CERT_POLL * 3;
    loop {
        match fresh.get(h.url("/healthz")).send().await {
            Ok(r) if r.status() == 200 => break,
            _ if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await
            }
            other => panic!("the new certificate was not served: {other:?}"),
        }
    }
    h.hook.stop().await;
}
