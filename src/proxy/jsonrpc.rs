//! The JSON-RPC side of MCP the guard needs: which messages are tool calls, what a tool
//! result says (its text, item by item), and how a result is redacted or replaced so the
//! JSON the client gets stays valid.

use serde_json::{Map, Value, json};

use super::Verdict;
use super::error::ProxyError;
use crate::decision::{Action, RedactionSpan, apply_spans};

pub const TOOLS_CALL: &str = "tools/call";
pub const TOOLS_LIST: &str = "tools/list";
/// Where the proxy puts its decision in a result it writes (`_meta` keys are namespaced).
pub const META_KEY: &str = "toolgate/decision";
/// A resubmitted, approved call names its pause here (`params._meta`).
pub const PAUSE_META_KEY: &str = "toolgate/pause_id";

/// A `tools/call` request, as the guard reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: Value,
    pub name: String,
    pub arguments: Option<Value>,
    pub pause_id: String,
}

/// What a client POSTed, as far as the guard is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    ToolCall(ToolCall),
    /// Anything else (initialize, tools/list, notifications, responses, batches without a
    /// tool call): passed through untouched.
    Other,
}

/// Sorts a parsed body. A tool call must be judged alone: a batch that carries one is
/// refused rather than forwarded half-guarded.
pub fn classify(msg: &Value) -> Result<Incoming, ProxyError> {
    match msg {
        Value::Array(items) => {
            if items.iter().any(is_tool_call) {
                return Err(ProxyError::InvalidRequest(
                    "a batch may not carry `tools/call`: each tool call is judged on its own, \
                     so send it as a single message"
                        .into(),
                ));
            }
            Ok(Incoming::Other)
        }
        Value::Object(_) if is_tool_call(msg) => tool_call(msg).map(Incoming::ToolCall),
        _ => Ok(Incoming::Other),
    }
}

/// The id of a single `tools/list` request, whose answer the guard judges.
pub fn tools_list_id(msg: &Value) -> Option<&Value> {
    if msg.get("method").and_then(Value::as_str) != Some(TOOLS_LIST) {
        return None;
    }
    msg.get("id").filter(|id| id.is_string() || id.is_number())
}

fn is_tool_call(msg: &Value) -> bool {
    msg.get("method").and_then(Value::as_str) == Some(TOOLS_CALL)
}

fn tool_call(msg: &Value) -> Result<ToolCall, ProxyError> {
    let id = match msg.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => {
            return Err(ProxyError::InvalidRequest(
                "`tools/call` needs an `id` (a string or a number)".into(),
            ));
        }
    };
    let params = msg
        .get("params")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ProxyError::InvalidParams("`tools/call` needs `params` as an object".into())
        })?;
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| {
            ProxyError::InvalidParams("`params.name` must be a non-empty string".into())
        })?;
    // As on the GuardService: a name longer than any real one is refused, not judged, since
    // it would be written whole into the decision's log line and span. The name itself is
    // not echoed.
    if name.len() > crate::event::MAX_TOOL_NAME_BYTES {
        return Err(ProxyError::InvalidParams(format!(
            "`params.name` is {} bytes, over the {}-byte limit",
            name.len(),
            crate::event::MAX_TOOL_NAME_BYTES
        )));
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(a @ Value::Object(_)) => Some(a.clone()),
        Some(_) => {
            return Err(ProxyError::InvalidParams(
                "`params.arguments` must be an object".into(),
            ));
        }
    };
    // A pause id of the wrong type is refused, not ignored: the caller meant to resubmit an
    // approved call and must learn why it is judged afresh.
    let pause_id = match params.get("_meta").and_then(|m| m.get(PAUSE_META_KEY)) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(p)) => p.clone(),
        Some(_) => {
            return Err(ProxyError::InvalidParams(format!(
                "`params._meta.{PAUSE_META_KEY}` must be a string"
            )));
        }
    };
    Ok(ToolCall {
        id: id.clone(),
        name: name.to_string(),
        arguments,
        pause_id,
    })
}

/// The id as the step id of the call's events: a string as it is, a number in decimal.
pub fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Puts redacted arguments into a tool call message.
pub fn set_arguments(msg: &mut Value, arguments: Value) {
    if let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) {
        params.insert("arguments".into(), arguments);
    }
}

/// A JSON-RPC error answer.
pub fn error_response(id: Option<&Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
}

/// The result the client gets instead of a blocked call's (or blocked result's) answer. MCP
/// reports tool failures inside the result, so the model reads why and can act on it.
pub fn blocked_result(v: &Verdict) -> Value {
    let mut decision = json!({
        "action": v.action.as_str(),
        "decision_id": v.decision_id,
        "rule_ids": v.rule_ids,
    });
    if let (Some(p), Some(obj)) = (&v.pause_id, decision.as_object_mut()) {
        obj.insert("pause_id".into(), Value::String(p.clone()));
    }
    json!({
        "content": [{"type": "text", "text": v.message}],
        "isError": true,
        "_meta": {META_KEY: decision},
    })
}

/// `blocked_result` as a whole JSON-RPC response to `id`.
pub fn blocked_response(id: &Value, v: &Verdict) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": blocked_result(v)})
}

/// Whether a message is a response (a result or an error, not a request or notification).
pub fn is_reply(m: &Value) -> bool {
    m.is_object()
        && m.get("method").is_none()
        && (m.get("result").is_some() || m.get("error").is_some())
}

/// The response to `id` inside an upstream message (an object, or a batch array).
pub fn find_reply_mut<'a>(msg: &'a mut Value, id: &Value) -> Option<&'a mut Value> {
    let is_reply = |m: &Value| m.get("id") == Some(id) && is_reply(m);
    match msg {
        Value::Array(items) => items.iter_mut().find(|m| is_reply(m)),
        m if is_reply(m) => Some(m),
        _ => None,
    }
}

/// Where a piece of a reply's text sits, and whether it is plain text or serialized JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    pointer: String,
    json: bool,
    start: usize,
    end: usize,
}

/// What a tool's reply says, as one text for the guard, with the place of each piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyText {
    /// The text items (and embedded text resources), then `structuredContent` serialized,
    /// joined with newlines; or an error reply's message and data.
    pub text: String,
    pub is_error: bool,
    segments: Vec<Segment>,
}

/// Reads the text of a JSON-RPC response to a tool call.
pub fn reply_text(reply: &Value) -> ReplyText {
    let mut out = ReplyText {
        text: String::new(),
        is_error: false,
        segments: Vec::new(),
    };
    let add = |out: &mut ReplyText, pointer: String, text: &str, json: bool| {
        if !out.segments.is_empty() {
            out.text.push('\n');
        }
        let start = out.text.len();
        out.text.push_str(text);
        out.segments.push(Segment {
            pointer,
            json,
            start,
            end: out.text.len(),
        });
    };
    if let Some(result) = reply.get("result") {
        out.is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        let items = result.get("content").and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            if let Some(t) = item.get("text").and_then(Value::as_str) {
                add(&mut out, format!("/result/content/{i}/text"), t, false);
            } else if let Some(t) = item
                .get("resource")
                .and_then(|r| r.get("text"))
                .and_then(Value::as_str)
            {
                add(
                    &mut out,
                    format!("/result/content/{i}/resource/text"),
                    t,
                    false,
                );
            }
        }
        if let Some(s) = result.get("structuredContent") {
            add(
                &mut out,
                "/result/structuredContent".into(),
                &s.to_string(),
                true,
            );
        }
    } else if let Some(err) = reply.get("error") {
        out.is_error = true;
        if let Some(m) = err.get("message").and_then(Value::as_str) {
            add(&mut out, "/error/message".into(), m, false);
        }
        if let Some(d) = err.get("data") {
            add(&mut out, "/error/data".into(), &d.to_string(), true);
        }
    }
    out
}

/// Applies a verdict to the reply in place: a blocking verdict replaces it with an error
/// result; a redaction rewrites each piece of text where it sits. When the pieces cannot be
/// redacted where they sit (a redaction crosses two pieces, or a redacted JSON piece no
/// longer parses), the result becomes one text item with the whole redacted output: the
/// secret must go even if the shape does not survive. Returns whether the reply changed.
pub fn apply_to_reply(reply: &mut Value, text: &ReplyText, v: &Verdict) -> bool {
    if v.blocks() {
        if let Some(obj) = reply.as_object_mut() {
            obj.remove("error");
            obj.insert("result".into(), blocked_result(v));
        }
        return true;
    }
    // Shadow mode's ALLOW still carries what it would have redacted: only an enforced
    // REDACT rewrites.
    let Some(redacted_all) = v
        .redacted_output
        .as_ref()
        .filter(|_| v.action == Action::Redact)
    else {
        return false;
    };
    let mut pieces = Vec::with_capacity(text.segments.len());
    let mut rebuilt = String::with_capacity(redacted_all.len());
    for (n, seg) in text.segments.iter().enumerate() {
        let own: Vec<RedactionSpan> = v
            .output_spans
            .iter()
            .filter(|s| s.start < seg.end && s.end > seg.start)
            .map(|s| RedactionSpan {
                start: s.start.max(seg.start) - seg.start,
                end: s.end.min(seg.end) - seg.start,
                ..s.clone()
            })
            .collect();
        let refs: Vec<&RedactionSpan> = own.iter().collect();
        let piece = apply_spans(&text.text[seg.start..seg.end], &refs);
        if n > 0 {
            rebuilt.push('\n');
        }
        rebuilt.push_str(&piece);
        pieces.push(piece);
    }
    let in_place = rebuilt == *redacted_all
        && text
            .segments
            .iter()
            .zip(&pieces)
            .all(|(seg, piece)| !seg.json || serde_json::from_str::<Value>(piece).is_ok());
    if !in_place {
        let mut result = Map::new();
        result.insert(
            "content".into(),
            json!([{"type": "text", "text": redacted_all}]),
        );
        result.insert("isError".into(), Value::Bool(text.is_error));
        if let Some(obj) = reply.as_object_mut() {
            obj.remove("error");
            obj.insert("result".into(), Value::Object(result));
        }
        return true;
    }
    for (seg, piece) in text.segments.iter().zip(pieces) {
        let new = if seg.json {
            serde_json::from_str(&piece).unwrap_or(Value::Null)
        } else {
            Value::String(piece)
        };
        if let Some(slot) = reply.pointer_mut(&seg.pointer) {
            *slot = new;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_over_the_limit_is_refused_without_echoing_it() {
        let name = format!("secret-{}", "x".repeat(crate::event::MAX_TOOL_NAME_BYTES));
        let msg = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": name, "arguments": {} }
        });
        let Err(ProxyError::InvalidParams(m)) = classify(&msg) else {
            panic!("a long name is refused");
        };
        assert!(m.contains("params.name") && !m.contains("secret-"), "{m}");
        let ok = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "x".repeat(crate::event::MAX_TOOL_NAME_BYTES), "arguments": {} }
        });
        assert!(matches!(classify(&ok), Ok(Incoming::ToolCall(_))));
    }

    fn verdict(action: Action) -> Verdict {
        Verdict {
            action,
            decision_id: "d-1".into(),
            rule_ids: vec!["secrets".into()],
            pause_id: None,
            message: "stopped: policy".into(),
            redacted_arguments_json: None,
            redacted_output: None,
            output_spans: Vec::new(),
        }
    }

    fn span(start: usize, end: usize) -> RedactionSpan {
        RedactionSpan {
            field_path: "output".into(),
            start,
            end,
            kind: "aws_access_key".into(),
            rule_id: "secrets".into(),
            replacement: "[REDACTED]".into(),
        }
    }

    /// A verdict redacting `secret` wherever it occurs in `text`.
    fn redacting(text: &str, secret: &str) -> Verdict {
        let spans: Vec<_> = text
            .match_indices(secret)
            .map(|(i, s)| span(i, i + s.len()))
            .collect();
        Verdict {
            redacted_output: Some(text.replace(secret, "[REDACTED]")),
            output_spans: spans,
            ..verdict(Action::Redact)
        }
    }

    #[test]
    fn tool_calls_are_told_apart() {
        let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"toolgate/pause_id":"p-1"}}});
        let Ok(Incoming::ToolCall(c)) = classify(&call) else {
            panic!("a tool call");
        };
        assert_eq!(c.name, "echo");
        assert_eq!(c.arguments, Some(json!({"text":"hi"})));
        assert_eq!(c.pause_id, "p-1");
        assert_eq!(id_text(&c.id), "3");
        assert_eq!(id_text(&json!("abc")), "abc");
        let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
        assert_eq!(classify(&list), Ok(Incoming::Other));
        let batch = json!([list, {"jsonrpc":"2.0","method":"notifications/initialized"}]);
        assert_eq!(classify(&batch), Ok(Incoming::Other));
    }

    #[test]
    fn unreadable_tool_calls_are_refused() {
        let batch = json!([{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]);
        assert!(matches!(
            classify(&batch),
            Err(ProxyError::InvalidRequest(_))
        ));
        for bad in [
            json!({"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":"rm -rf /"}}),
        ] {
            assert!(classify(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pause_id_of_the_wrong_type_is_refused_by_name() {
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"x","_meta":{"toolgate/pause_id":42}}});
        let e = classify(&call).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid params: `params._meta.toolgate/pause_id` must be a string"
        );
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"x","_meta":{"toolgate/pause_id":null}}});
        assert!(matches!(classify(&call), Ok(Incoming::ToolCall(c)) if c.pause_id.is_empty()));
    }

    #[test]
    fn a_blocked_result_carries_the_message_and_the_decision() {
        let mut v = verdict(Action::Pause);
        v.pause_id = Some("p-9".into());
        let r = blocked_response(&json!(4), &v);
        assert_eq!(r["id"], 4);
        assert_eq!(r["result"]["isError"], true);
        assert_eq!(r["result"]["content"][0]["text"], "stopped: policy");
        let meta = &r["result"]["_meta"][META_KEY];
        assert_eq!(meta["action"], "pause");
        assert_eq!(meta["pause_id"], "p-9");
        assert_eq!(meta["rule_ids"], json!(["secrets"]));
    }

    #[test]
    fn reply_text_joins_items_and_structured_content() {
        let reply = json!({"jsonrpc":"2.0","id":1,"result":{
            "content":[{"type":"text","text":"a"},{"type":"image","data":"xx","mimeType":"image/png"},
                       {"type":"resource","resource":{"uri":"file:///r","text":"b"}}],
            "structuredContent":{"k":"v"},"isError":false}});
        let t = reply_text(&reply);
        assert_eq!(t.text, "a\nb\n{\"k\":\"v\"}");
        assert!(!t.is_error);
        let err =
            json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"boom","data":{"x":1}}});
        let t = reply_text(&err);
        assert_eq!(t.text, "boom\n{\"x\":1}");
        assert!(t.is_error);
    }

    #[test]
    fn redaction_rewrites_each_item_where_it_sits() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let mut reply = json!({"jsonrpc":"2.0","id":1,"result":{
            "content":[{"type":"text","text":format!("key {key}")},{"type":"text","text":"plain"}],
            "structuredContent":{"aws":key,"n":1}}});
        let t = reply_text(&reply);
        apply_to_reply(&mut reply, &t, &redacting(&t.text, key));
        assert_eq!(reply["result"]["content"][0]["text"], "key [REDACTED]");
        assert_eq!(reply["result"]["content"][1]["text"], "plain");
        assert_eq!(
            reply["result"]["structuredContent"],
            json!({"aws":"[REDACTED]","n":1})
        );
        assert!(!reply.to_string().contains(key));
    }

    #[test]
    fn a_shadow_allow_leaves_the_reply_as_it_is() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let mut reply = json!({"jsonrpc":"2.0","id":1,"result":{
            "content":[{"type":"text","text":format!("key {key}")}]}});
        let before = reply.clone();
        let t = reply_text(&reply);
        let shadow = Verdict {
            action: Action::Allow,
            ..redacting(&t.text, key)
        };
        assert!(!apply_to_reply(&mut reply, &t, &shadow));
        assert_eq!(reply, before);
    }

    #[test]
    fn a_redaction_across_items_falls_back_to_one_redacted_text() {
        let mut reply = json!({"jsonrpc":"2.0","id":1,"result":{
            "content":[{"type":"text","text":"abc"},{"type":"text","text":"def"}]}});
        let t = reply_text(&reply);
        let v = Verdict {
            redacted_output: Some("ab[REDACTED]ef".into()),
            output_spans: vec![span(2, 5)],
            ..verdict(Action::Redact)
        };
        apply_to_reply(&mut reply, &t, &v);
        assert_eq!(
            reply["result"],
            json!({"content":[{"type":"text","text":"ab[REDACTED]ef"}],"isError":false})
        );
    }

    #[test]
    fn a_redaction_that_breaks_structured_json_falls_back() {
        let mut reply = json!({"jsonrpc":"2.0","id":1,"result":{
            "content":[],"structuredContent":{"a":"x"}}});
        let t = reply_text(&reply);
        // Covers the closing quote: the piece no longer parses.
        let v = Verdict {
            redacted_output: Some("{\"a\":\"[REDACTED]}".into()),
            output_spans: vec![span(6, 8)],
            ..verdict(Action::Redact)
        };
        apply_to_reply(&mut reply, &t, &v);
        assert_eq!(
            reply["result"]["content"][0]["text"],
            "{\"a\":\"[REDACTED]}"
        );
        assert!(reply["result"].get("structuredContent").is_none());
    }

    #[test]
    fn a_blocking_verdict_replaces_a_result_or_an_error() {
        for mut reply in [
            json!({"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"t"}]}}),
            json!({"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}),
        ] {
            let t = reply_text(&reply);
            apply_to_reply(&mut reply, &t, &verdict(Action::Stop));
            assert_eq!(reply["id"], "x");
            assert!(reply.get("error").is_none());
            assert_eq!(reply["result"]["isError"], true);
            assert_eq!(reply["result"]["_meta"][META_KEY]["action"], "stop");
        }
    }

    #[test]
    fn replies_are_told_from_requests_and_notifications() {
        assert!(is_reply(&json!({"jsonrpc":"2.0","id":1e0,"result":{}})));
        assert!(is_reply(
            &json!({"jsonrpc":"2.0","id":null,"error":{"code":1}})
        ));
        assert!(!is_reply(&json!({"jsonrpc":"2.0","id":1,"method":"ping"})));
        assert!(!is_reply(
            &json!({"jsonrpc":"2.0","method":"notifications/progress"})
        ));
        assert!(!is_reply(&json!([{"jsonrpc":"2.0","id":1,"result":{}}])));
    }

    #[test]
    fn replies_are_found_by_id() {
        let id = json!(7);
        let mut one = json!({"jsonrpc":"2.0","id":7,"result":{}});
        assert!(find_reply_mut(&mut one, &id).is_some());
        let mut other = json!({"jsonrpc":"2.0","id":8,"result":{}});
        assert!(find_reply_mut(&mut other, &id).is_none());
        let mut request = json!({"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"});
        assert!(find_reply_mut(&mut request, &id).is_none());
        let mut batch =
            json!([{"jsonrpc":"2.0","method":"n"}, {"jsonrpc":"2.0","id":7,"error":{}}]);
        assert!(find_reply_mut(&mut batch, &id).is_some());
    }
}
