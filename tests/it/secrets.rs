//! Secrets never leak: every secret kind the catalog knows is sent through every kind of
//! event, and through requests that are refused, to a real `toolgate serve` process; then
//! every output is searched for the raw value: the answers, the error statuses, the decision
//! log, stderr (at debug level), the spans it exported and its metrics.

use toolgate::proto::{
    LlmBeforeRequest, Message, StreamLlmChunksRequest, ToolCallResultRequest, ToolCallStartRequest,
};

use super::common::{Otlp, ctx, default_pack_file};
use super::services::Toolgate;

/// One value of every secret kind: (kind, the text that carries it, the raw secret part that
/// must never appear again).
const SECRETS: &[(&str, &str, &str)] = &[
    (
        "aws_access_key",
        "key AKIAZ7Q3LDM4XKE2WB5N",
        "AKIAZ7Q3LDM4XKE2WB5N",
    ),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYq8Zt4vW1xL",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYq8Zt4vW1xL",
    ),
    (
        "openai_key",
        "OPENAI=sk-proj-q8Zt4vW1xLmN2bC3dE4fG5hJ6k",
        "sk-proj-q8Zt4vW1xLmN2bC3dE4fG5hJ6k",
    ),
    (
        "anthropic_key",
        "token sk-ant-api03-q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ end",
        "sk-ant-api03-q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ",
    ),
    (
        "github_token",
        "ghp_q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU9vW",
        "ghp_q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU9vW",
    ),
    (
        "slack_token",
        "SLACK xoxb-7741029385-q8Zt4vW1xLmN",
        "xoxb-7741029385-q8Zt4vW1xLmN",
    ),
    (
        "google_api_key",
        "AIzaSyQ8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU",
        "AIzaSyQ8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU",
    ),
    (
        "stripe_key",
        "stripe sk_live_q8Zt4vW1xLmN2bC3dE4fG5hJ",
        "sk_live_q8Zt4vW1xLmN2bC3dE4fG5hJ",
    ),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJxOFp0NHZXMXhMbU4ifQ.q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU9vWxYz0a1 ok",
        "eyJzdWIiOiJxOFp0NHZXMXhMbU4ifQ.q8Zt4vW1xLmN2bC3dE4fG5hJ6kQ7rS8tU9vWxYz0a1",
    ),
    (
        "private_key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEAq8Zt4vW1xLmN2bC3dE4f\n-----END RSA PRIVATE KEY-----\ndone",
        "MIIEpQIBAAKCAQEAq8Zt4vW1xLmN2bC3dE4f",
    ),
    (
        "authorization_header",
        "Authorization: Bearer q8Zt4vW1xLmN2bC3dE4fG5hJ",
        "q8Zt4vW1xLmN2bC3dE4fG5hJ",
    ),
    (
        "secret_assignment",
        "DB_PASSWORD=Qz8t4vW1xLmN2bC3",
        "Qz8t4vW1xLmN2bC3",
    ),
    (
        "url_credentials",
        "dsn postgres://app:Wq8Zt4vW1xLmN2bC@db.internal.example:5432/prod",
        "Wq8Zt4vW1xLmN2bC",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_kind_appears_in_any_output() {
    let otlp = Otlp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pack = default_pack_file(dir.path());
    let log = dir.path().join("decisions.jsonl");
    let log_arg = log.to_str().unwrap().to_string();
    let mut t = Toolgate::serve(
        &pack,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint.as_str()),
            ("RUST_LOG", "debug"),
        ],
        &["--decision-log", &log_arg, "--log-format", "json"],
    )
    .await;
    let mut c = t.client().await;
    // Everything the server answered, as text.
    let mut answers = String::new();

    for (i, (kind, text, _)) in SECRETS.iter().enumerate() {
        let session = format!("secrets-{i}");
        let result = c
            .tool_call_result(ToolCallResultRequest {
                context: ctx(&session),
                tool_name: "files.read".into(),
                arguments_json: r#"{"path":"notes.txt"}"#.into(),
                output: format!("{text}\n"),
                is_error: false,
            })
            .await
            .unwrap()
            .into_inner();
        let d = result.decision.clone().unwrap();
        assert!(
            d.hits.iter().any(|h| h.rule_id == "secrets"),
            "{kind}: not found in a tool result: {d:?}"
        );
        answers.push_str(&format!("{result:?}\n"));

        let args = serde_json::json!({ "body": text, "nested": { "list": [text] } }).to_string();
        let start = c
            .tool_call_start(ToolCallStartRequest {
                context: ctx(&session),
                tool_name: "http.post".into(),
                arguments_json: args,
                pause_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        answers.push_str(&format!("{start:?}\n"));

        let prompt = c
            .llm_before(LlmBeforeRequest {
                context: ctx(&session),
                messages: vec![Message {
                    role: "user".into(),
                    content: format!("please use this: {text}"),
                }],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        answers.push_str(&format!("{prompt:?}\n"));

        // Split in the middle of the secret, across two chunks.
        let cut = text.len() / 2;
        let cut = (0..=cut).rev().find(|i| text.is_char_boundary(*i)).unwrap();
        let chunks = [&text[..cut], &text[cut..]]
            .into_iter()
            .enumerate()
            .map(|(n, part)| StreamLlmChunksRequest {
                context: ctx(&format!("{session}-stream")),
                chunk: part.to_string(),
                r#final: n == 1,
            })
            .collect::<Vec<_>>();
        let mut stream = c
            .stream_llm_chunks(tokio_stream::iter(chunks))
            .await
            .unwrap()
            .into_inner();
        while let Some(m) = stream.message().await.unwrap() {
            answers.push_str(&format!("{m:?}\n"));
        }

        // Refused requests: JSON cut off after the secret, and a tool name over the limit
        // that carries it. The statuses name the field and never echo the content.
        let bad = c
            .tool_call_start(ToolCallStartRequest {
                context: ctx(&session),
                tool_name: "http.post".into(),
                arguments_json: format!("{{\"body\": \"{}", text.replace('\n', " ")),
                pause_id: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument, "{kind}");
        answers.push_str(&format!("{bad:?}\n"));
        let long = c
            .tool_call_start(ToolCallStartRequest {
                context: ctx(&session),
                tool_name: format!("{}{}", "t".repeat(600), text.replace('\n', " ")),
                arguments_json: "{}".into(),
                pause_id: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(long.code(), tonic::Code::InvalidArgument, "{kind}");
        answers.push_str(&format!("{long:?}\n"));
    }

    let metrics = t.metrics().await;
    assert!(t.terminate().await, "the server exits cleanly");
    let spans = format!("{:?}", otlp.spans().await);
    let decisions = std::fs::read_to_string(&log).unwrap();
    let stderr = t.log();
    // The outputs were really written: a search of empty text proves nothing.
    assert!(
        decisions.lines().count() >= SECRETS.len() * 3,
        "{decisions}"
    );
    assert!(spans.contains("toolgate.decision.id"), "no spans exported");
    assert!(stderr.contains("policy loaded"), "{stderr}");
    assert!(metrics.contains("toolgate_"), "{metrics}");
    for (kind, _, raw) in SECRETS {
        for (what, text) in [
            ("answers", &answers),
            ("decision log", &decisions),
            ("stderr", &stderr),
            ("spans", &spans),
            ("metrics", &metrics),
        ] {
            assert!(
                !text.contains(raw),
                "{kind}: the raw secret appears in the {what}"
            );
        }
    }
}
