//! The mutating admission webhook (`toolgate webhook`): reads an AdmissionReview v1 for a
//! Pod, decides whether the pod gets toolgate, and answers with the JSONPatch that adds it
//! as a native sidecar (an init container with `restartPolicy: Always`), its policy volume
//! and the address the app containers dial.

pub mod server;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, HTTPGetAction, Pod,
    Probe, ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::{Value, json};

pub const INJECT_ANNOTATION: &str = "toolgate.dev/inject";
pub const INJECTED_ANNOTATION: &str = "toolgate.dev/injected";
pub const POLICY_ANNOTATION: &str = "toolgate.dev/policy";
pub const MODE_ANNOTATION: &str = "toolgate.dev/mode";
pub const UPSTREAM_ANNOTATION: &str = "toolgate.dev/mcp-upstream";
/// The gRPC tool server to proxy: the sidecar serves `ToolService` on the same address as
/// `GuardService` (`TOOLGATE_ADDR`) and forwards to it.
pub const TOOL_UPSTREAM_ANNOTATION: &str = "toolgate.dev/tool-upstream";
pub const CPU_ANNOTATION: &str = "toolgate.dev/cpu";
pub const MEMORY_ANNOTATION: &str = "toolgate.dev/memory";
pub const MEMORY_LIMIT_ANNOTATION: &str = "toolgate.dev/memory-limit";
/// The namespace label the chart's namespace-selected webhook matches on.
pub const NAMESPACE_LABEL: &str = "toolgate.dev/injection";

pub const CONTAINER_NAME: &str = "toolgate";
const POLICY_VOLUME: &str = "toolgate-policy";
const POLICY_DIR: &str = "/etc/toolgate";
/// The same non-root user the image runs as.
const RUN_AS_USER: i64 = 65532;

/// The injector's settings (`--config FILE`, YAML); every key has a default.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InjectorConfig {
    pub image: String,
    pub image_pull_policy: String,
    /// Kubernetes 1.29 and later: an init container with `restartPolicy: Always`. Off: a
    /// regular container, for older clusters (the app may then start before the guard).
    pub native_sidecar: bool,
    pub grpc_port: i32,
    /// A plain listener with only `/healthz` and `/readyz`, bound to the pod IP so the
    /// kubelet can probe it; metrics and the policy stay on localhost.
    pub health_port: i32,
    pub mcp_port: i32,
    /// The policy ConfigMap a pod gets without a `toolgate.dev/policy` annotation. It must
    /// exist in the pod's namespace (a pod mounts only its own namespace's ConfigMaps);
    /// empty: the sidecar serves the pack embedded in the binary.
    pub policy_configmap: String,
    /// The key in the ConfigMap that holds the pack.
    pub policy_key: String,
    /// `enforce` or `shadow`, when the pod does not say.
    pub mode: String,
    pub cpu_request: String,
    pub memory_request: String,
    pub memory_limit: String,
    /// `OTEL_*` variables given to every injected sidecar.
    pub otel_env: BTreeMap<String, String>,
    /// What a review that cannot be read gets: `deny` or `allow` (with a warning).
    pub on_malformed: String,
    /// Pods here are never mutated, besides `kube-system` and the injector's own namespace.
    pub excluded_namespaces: Vec<String>,
    /// The injector's own namespace; `POD_NAMESPACE` from the downward API when empty.
    pub namespace: String,
}

impl Default for InjectorConfig {
    fn default() -> Self {
        InjectorConfig {
            image: format!("toolgate:{}", env!("CARGO_PKG_VERSION")),
            image_pull_policy: "IfNotPresent".into(),
            native_sidecar: true,
            grpc_port: 50051,
            health_port: 9902,
            mcp_port: 8808,
            policy_configmap: String::new(),
            policy_key: "policy.yaml".into(),
            mode: "enforce".into(),
            cpu_request: "50m".into(),
            memory_request: "64Mi".into(),
            memory_limit: "256Mi".into(),
            otel_env: BTreeMap::new(),
            on_malformed: "deny".into(),
            excluded_namespaces: Vec::new(),
            namespace: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl InjectorConfig {
    pub fn load(path: Option<&std::path::Path>) -> Result<InjectorConfig, ConfigError> {
        let mut cfg = match path {
            None => InjectorConfig::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.display().to_string(),
                    source,
                })?;
                serde_saphyr::from_str_with_options(&text, crate::policy::pack::yaml_options())
                    .map_err(|e| ConfigError::Invalid(format!("{}: {e}", p.display())))?
            }
        };
        if cfg.namespace.is_empty() {
            cfg.namespace = std::env::var("POD_NAMESPACE").unwrap_or_default();
        }
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, why: &str| Err(ConfigError::Invalid(format!("{field}: {why}")));
        if self.image.trim().is_empty() {
            return bad("image", "must not be empty");
        }
        if !matches!(self.mode.as_str(), "enforce" | "shadow") {
            return bad("mode", "must be enforce or shadow");
        }
        if !matches!(self.on_malformed.as_str(), "deny" | "allow") {
            return bad("on_malformed", "must be deny or allow");
        }
        for (field, port) in [
            ("grpc_port", self.grpc_port),
            ("health_port", self.health_port),
            ("mcp_port", self.mcp_port),
        ] {
            if !(1..=65535).contains(&port) {
                return bad(field, "must be a port between 1 and 65535");
            }
        }
        for k in self.otel_env.keys() {
            if !k.starts_with("OTEL_") {
                return bad(
                    &format!("otel_env.{k}"),
                    "only OTEL_* variables belong here",
                );
            }
        }
        Ok(())
    }

    fn excluded(&self, ns: &str) -> bool {
        ns == "kube-system"
            || (!self.namespace.is_empty() && ns == self.namespace)
            || self.excluded_namespaces.iter().any(|n| n == ns)
    }
}

/// How the pod reached the webhook: through the annotation-driven entry (`/mutate`) or the
/// entry for namespaces labelled `toolgate.dev/injection: enabled` (`/mutate/namespace`).
/// An AdmissionReview carries no namespace labels; the chart's two webhook entries, each
/// with its own namespace selector, tell them apart without reading namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Annotated,
    NamespaceSelected,
}

/// The answer to one AdmissionReview request body: always an AdmissionReview v1.
pub fn review(body: &[u8], cfg: &InjectorConfig, entry: Entry) -> Value {
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    let (uid, request) = match &parsed {
        Ok(v) => (
            v.pointer("/request/uid")
                .and_then(Value::as_str)
                .unwrap_or(""),
            v.get("request"),
        ),
        Err(_) => ("", None),
    };
    let outcome = match (&parsed, request) {
        (Err(e), _) => Err(format!("the body is not JSON: {e}")),
        (Ok(v), _) if v.get("kind").and_then(Value::as_str) != Some("AdmissionReview") => {
            Err("`kind` must be AdmissionReview".into())
        }
        (Ok(_), None) => Err("`request` is missing".into()),
        (Ok(_), Some(_)) if uid.is_empty() => Err("`request.uid` is missing".into()),
        (Ok(_), Some(r)) => decide(r, cfg, entry),
    };
    let response = match outcome {
        Ok(Some(patch)) => {
            use base64_engine::encode;
            json!({
                "uid": uid,
                "allowed": true,
                "patchType": "JSONPatch",
                "patch": encode(&serde_json::to_vec(&patch).unwrap_or_default()),
            })
        }
        Ok(None) => json!({ "uid": uid, "allowed": true }),
        Err(why) if cfg.on_malformed == "allow" => json!({
            "uid": uid,
            "allowed": true,
            "warnings": [format!("toolgate injector: pod not injected: {why}")],
        }),
        Err(why) => json!({
            "uid": uid,
            "allowed": false,
            "status": { "code": 400, "message": format!("toolgate injector: {why}") },
        }),
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

/// `Ok(None)`: admit unchanged. `Err`: the review cannot be read.
fn decide(request: &Value, cfg: &InjectorConfig, entry: Entry) -> Result<Option<Value>, String> {
    let kind = request.pointer("/kind/kind").and_then(Value::as_str);
    if kind != Some("Pod") {
        // Not ours to judge: the webhook configuration only sends Pods, but a wider one
        // must not break other objects.
        return Ok(None);
    }
    if request.get("operation").and_then(Value::as_str) != Some("CREATE") {
        return Ok(None);
    }
    let ns = request
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if cfg.excluded(ns) {
        return Ok(None);
    }
    let object = request
        .get("object")
        .ok_or_else(|| "`request.object` is missing".to_string())?;
    let pod: Pod = serde_json::from_value(object.clone())
        .map_err(|e| format!("`request.object` is not a Pod: {e}"))?;
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let wanted = match (
        annotations.get(INJECT_ANNOTATION).map(String::as_str),
        entry,
    ) {
        (Some("true"), _) => true,
        (Some("false"), _) => false,
        (_, Entry::NamespaceSelected) => true,
        (_, Entry::Annotated) => false,
    };
    if !wanted || already_injected(&pod) {
        return Ok(None);
    }
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| "`request.object.spec` is missing".to_string())?;
    Ok(Some(patch(&pod, spec, &annotations, cfg)?))
}

fn already_injected(pod: &Pod) -> bool {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(INJECTED_ANNOTATION));
    let spec = pod.spec.as_ref();
    let named = |cs: Option<&Vec<Container>>| {
        cs.is_some_and(|cs| cs.iter().any(|c| c.name == CONTAINER_NAME))
    };
    annotated
        || spec.is_some_and(|s| named(Some(&s.containers)) || named(s.init_containers.as_ref()))
}

fn patch(
    pod: &Pod,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    annotations: &BTreeMap<String, String>,
    cfg: &InjectorConfig,
) -> Result<Value, String> {
    let mode = annotations
        .get(MODE_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| cfg.mode.clone());
    if !matches!(mode.as_str(), "enforce" | "shadow") {
        return Err(format!(
            "annotation `{MODE_ANNOTATION}` must be enforce or shadow, got `{mode}`"
        ));
    }
    let policy = annotations
        .get(POLICY_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| cfg.policy_configmap.clone());
    if !policy.is_empty() && !is_dns_label(&policy) {
        return Err(format!(
            "annotation `{POLICY_ANNOTATION}` must name a ConfigMap, got `{policy}`"
        ));
    }
    let policy = (!policy.is_empty()).then_some(policy);
    let upstream = annotations.get(UPSTREAM_ANNOTATION).cloned();
    if let Some(u) = &upstream
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(format!(
            "annotation `{UPSTREAM_ANNOTATION}` must be an http(s) URL"
        ));
    }
    let tool_upstream = annotations.get(TOOL_UPSTREAM_ANNOTATION).cloned();
    if let Some(u) = &tool_upstream
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(format!(
            "annotation `{TOOL_UPSTREAM_ANNOTATION}` must be an http(s) URL"
        ));
    }
    let pick = |key: &str, default: &str| -> Result<Quantity, String> {
        let v = annotations.get(key).map(String::as_str).unwrap_or(default);
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.') {
            return Err(format!("annotation `{key}` is not a quantity: `{v}`"));
        }
        Ok(Quantity(v.to_string()))
    };
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), pick(CPU_ANNOTATION, &cfg.cpu_request)?),
            (
                "memory".to_string(),
                pick(MEMORY_ANNOTATION, &cfg.memory_request)?,
            ),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            pick(MEMORY_LIMIT_ANNOTATION, &cfg.memory_limit)?,
        )])),
        ..Default::default()
    };
    let sidecar = sidecar(
        cfg,
        &mode,
        policy.is_some(),
        Upstreams {
            mcp: upstream.as_deref(),
            tools: tool_upstream.as_deref(),
        },
        resources,
    );
    let mut ops = Vec::new();
    // Annotations first: they record that the pod was injected, so a second pass is a no-op.
    if pod.metadata.annotations.is_none() {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(INJECTED_ANNOTATION)), "value": "true"}));
    let container = serde_json::to_value(&sidecar).map_err(|e| e.to_string())?;
    if cfg.native_sidecar {
        // First among the init containers, so the app's own init steps can use the guard.
        match &spec.init_containers {
            None => {
                ops.push(json!({"op": "add", "path": "/spec/initContainers", "value": [container]}))
            }
            Some(_) => {
                ops.push(json!({"op": "add", "path": "/spec/initContainers/0", "value": container}))
            }
        }
    } else {
        ops.push(json!({"op": "add", "path": "/spec/containers/-", "value": container}));
    }
    if let Some(name) = policy {
        let volume = Volume {
            name: POLICY_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name,
                ..Default::default()
            }),
            ..Default::default()
        };
        let volume = serde_json::to_value(&volume).map_err(|e| e.to_string())?;
        match &spec.volumes {
            None => ops.push(json!({"op": "add", "path": "/spec/volumes", "value": [volume]})),
            Some(_) => ops.push(json!({"op": "add", "path": "/spec/volumes/-", "value": volume})),
        }
    }
    let mut app_env = vec![EnvVar {
        name: "TOOLGATE_ADDR".into(),
        value: Some(format!("http://127.0.0.1:{}", cfg.grpc_port)),
        ..Default::default()
    }];
    if upstream.is_some() {
        app_env.push(EnvVar {
            name: "TOOLGATE_MCP_URL".into(),
            value: Some(format!("http://127.0.0.1:{}/mcp", cfg.mcp_port)),
            ..Default::default()
        });
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let existing = c.env.as_ref();
        let fresh: Vec<&EnvVar> = app_env
            .iter()
            .filter(|e| !existing.is_some_and(|env| env.iter().any(|x| x.name == e.name)))
            .collect();
        if existing.is_none() {
            ops.push(
                json!({"op": "add", "path": format!("/spec/containers/{i}/env"), "value": fresh}),
            );
        } else {
            for e in fresh {
                ops.push(
                    json!({"op": "add", "path": format!("/spec/containers/{i}/env/-"), "value": e}),
                );
            }
        }
    }
    Ok(Value::Array(ops))
}

/// The servers a sidecar proxies, as the pod's annotations name them.
struct Upstreams<'a> {
    mcp: Option<&'a str>,
    tools: Option<&'a str>,
}

fn sidecar(
    cfg: &InjectorConfig,
    mode: &str,
    mounted_policy: bool,
    upstreams: Upstreams<'_>,
    resources: ResourceRequirements,
) -> Container {
    let mut args = vec!["serve".to_string()];
    if mounted_policy {
        args.extend([
            "--policy".into(),
            format!("{POLICY_DIR}/{}", cfg.policy_key),
        ]);
    }
    args.extend([
        "--listen".into(),
        format!("127.0.0.1:{}", cfg.grpc_port),
        "--health-listen".into(),
        format!("0.0.0.0:{}", cfg.health_port),
        "--mode".into(),
        mode.to_string(),
    ]);
    if let Some(u) = upstreams.mcp {
        args.extend([
            "--mcp-listen".into(),
            format!("127.0.0.1:{}", cfg.mcp_port),
            "--mcp-upstream".into(),
            u.to_string(),
        ]);
    }
    if let Some(u) = upstreams.tools {
        args.extend(["--upstream".into(), u.to_string()]);
    }
    let probe = |path: &str, period: i32, failures: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(cfg.health_port),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(1),
        ..Default::default()
    };
    Container {
        name: CONTAINER_NAME.into(),
        image: Some(cfg.image.clone()),
        image_pull_policy: Some(cfg.image_pull_policy.clone()),
        args: Some(args),
        // Only a native sidecar (an init container) takes a restart policy.
        restart_policy: cfg.native_sidecar.then(|| "Always".to_string()),
        ports: Some(vec![ContainerPort {
            name: Some("health".into()),
            container_port: cfg.health_port,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        env: Some(
            cfg.otel_env
                .iter()
                .map(|(k, v)| EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    ..Default::default()
                })
                .collect(),
        ),
        resources: Some(resources),
        // The app waits for the startup probe of a native sidecar: up to 30 s here.
        startup_probe: Some(probe("/readyz", 1, 30)),
        readiness_probe: Some(probe("/readyz", 5, 3)),
        liveness_probe: Some(probe("/healthz", 10, 3)),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS_USER),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volume_mounts: mounted_policy.then(|| {
            vec![VolumeMount {
                name: POLICY_VOLUME.into(),
                mount_path: POLICY_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }]
        }),
        ..Default::default()
    }
}

/// JSON Pointer escaping of one path segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

mod base64_engine {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    /// Standard base64 with padding: the `patch` field of an AdmissionResponse.
    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
