use super::*;

#[test]
fn base64_matches_the_standard_alphabet_and_padding() {
    use base64_engine::encode;
    assert_eq!(encode(b""), "");
    assert_eq!(encode(b"f"), "Zg==");
    assert_eq!(encode(b"fo"), "Zm8=");
    assert_eq!(encode(b"foo"), "Zm9v");
    assert_eq!(encode(b"[{\"op\":\"add\"}]"), "W3sib3AiOiJhZGQifV0=");
    assert_eq!(encode(&[0xff, 0xfe, 0xfd]), "//79");
}

#[test]
fn annotation_keys_are_escaped_as_json_pointer_segments() {
    assert_eq!(escape("toolgate.dev/injected"), "toolgate.dev~1injected");
    assert_eq!(escape("a~b"), "a~0b");
}

#[test]
fn a_bad_config_names_its_field() {
    let bad = |cfg: InjectorConfig| cfg.check().unwrap_err().to_string();
    let base = InjectorConfig::default;
    assert!(
        bad(InjectorConfig {
            mode: "loud".into(),
            ..base()
        })
        .starts_with("mode:")
    );
    assert!(
        bad(InjectorConfig {
            grpc_port: 0,
            ..base()
        })
        .starts_with("grpc_port:")
    );
    assert!(
        bad(InjectorConfig {
            on_malformed: "maybe".into(),
            ..base()
        })
        .starts_with("on_malformed:")
    );
    let otel = InjectorConfig {
        otel_env: [("PATH".to_string(), "/x".to_string())].into(),
        ..base()
    };
    assert!(bad(otel).starts_with("otel_env.PATH:"));
    assert!(InjectorConfig::default().check().is_ok());
}

#[test]
fn policy_names_must_be_config_map_names() {
    assert!(is_dns_label("payments-policy"));
    assert!(!is_dns_label("Payments"));
    assert!(!is_dns_label("-x"));
    assert!(!is_dns_label("../etc"));
}

#[test]
fn other_objects_and_operations_pass_unchanged() {
    let cfg = InjectorConfig::default();
    let review_of = |kind: &str, op: &str| {
        json!({"kind": "AdmissionReview", "request": {"uid": "u", "kind": {"kind": kind}, "operation": op, "namespace": "a",
            "object": {"metadata": {"annotations": {"toolgate.dev/inject": "true"}}, "spec": {"containers": []}}}})
    };
    for (kind, op) in [("Deployment", "CREATE"), ("Pod", "UPDATE")] {
        let out = review(
            review_of(kind, op).to_string().as_bytes(),
            &cfg,
            Entry::Annotated,
        );
        assert_eq!(out["response"]["allowed"], true);
        assert!(out["response"].get("patch").is_none());
    }
    let out = review(
        review_of("Pod", "CREATE").to_string().as_bytes(),
        &cfg,
        Entry::Annotated,
    );
    assert!(out["response"].get("patch").is_some());
}
