//! The event context a proxied request carries: session, step, tenant and task goal, read
//! from its headers and its JSON-RPC id, each bounded because it keys state kept in memory.

use axum::http::HeaderMap;
use serde_json::Value;

use super::error::ProxyError;
use super::jsonrpc;
use crate::event::{Context, MAX_ID_BYTES};

/// Overrides `Mcp-Session-Id` as the session the guard keys state on.
pub const SESSION_HEADER: &str = "x-toolgate-session-id";
pub const TENANT_HEADER: &str = "x-toolgate-tenant";
pub const TASK_GOAL_HEADER: &str = "x-toolgate-task-goal";
/// Overrides the JSON-RPC id as the step id (RETRY attempts are counted per step).
pub const STEP_HEADER: &str = "x-toolgate-step-id";
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";

/// The MCP session a request belongs to, as the upstream knows it (`""` when stateless).
pub fn mcp_session(headers: &HeaderMap) -> String {
    headers
        .get(MCP_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The event context of a tool call: the session from `x-toolgate-session-id` or
/// `Mcp-Session-Id`, the step from `x-toolgate-step-id` or the JSON-RPC id, tenant and task
/// goal from their headers; the caller's verified identity from the connection.
pub fn context(headers: &HeaderMap, caller: &str, id: &Value) -> Result<Context, ProxyError> {
    let get = |name: &str| -> Result<Option<String>, ProxyError> {
        headers
            .get(name)
            .map(|v| {
                String::from_utf8(v.as_bytes().to_vec()).map_err(|_| {
                    ProxyError::InvalidRequest(format!("header `{name}` is not UTF-8"))
                })
            })
            .transpose()
    };
    let over =
        |what: String| ProxyError::InvalidRequest(format!("{what} is over {MAX_ID_BYTES} bytes"));
    // Each is bounded whether or not it is the one used: the MCP session and the JSON-RPC
    // id key the calls awaiting replies even when the `x-toolgate-*` headers override them.
    let bounded = |name: &str| -> Result<Option<String>, ProxyError> {
        let value = get(name)?;
        match value {
            Some(v) if v.len() > MAX_ID_BYTES => Err(over(format!("header `{name}`"))),
            v => Ok(v),
        }
    };
    let session = bounded(SESSION_HEADER)?;
    let mcp_session = bounded(MCP_SESSION_HEADER)?;
    let step = bounded(STEP_HEADER)?;
    let tenant = bounded(TENANT_HEADER)?;
    let id_text = jsonrpc::id_text(id);
    if id_text.len() > MAX_ID_BYTES {
        return Err(over("`id`".into()));
    }
    Ok(Context {
        session_id: session.or(mcp_session).unwrap_or_default(),
        step_id: step.unwrap_or(id_text),
        tenant: tenant.unwrap_or_default(),
        task_goal: get(TASK_GOAL_HEADER)?.unwrap_or_default(),
        labels: Default::default(),
        caller: caller.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn context_comes_from_headers_and_the_id() {
        let mut h = HeaderMap::new();
        h.insert("mcp-session-id", HeaderValue::from_static("mcp-s"));
        h.insert(TENANT_HEADER, HeaderValue::from_static("acme"));
        h.insert(TASK_GOAL_HEADER, HeaderValue::from_static("tidy the repo"));
        let c = context(&h, "", &serde_json::json!(5)).unwrap();
        assert_eq!(
            (c.session_id.as_str(), c.step_id.as_str(), c.tenant.as_str()),
            ("mcp-s", "5", "acme")
        );
        assert_eq!(c.task_goal, "tidy the repo");
        h.insert(SESSION_HEADER, HeaderValue::from_static("mine"));
        h.insert(STEP_HEADER, HeaderValue::from_static("step-3"));
        let c = context(&h, "", &serde_json::json!("x")).unwrap();
        assert_eq!(
            (c.session_id.as_str(), c.step_id.as_str()),
            ("mine", "step-3")
        );
        let long = serde_json::json!("x".repeat(MAX_ID_BYTES + 1));
        assert!(matches!(
            context(&HeaderMap::new(), "", &long),
            Err(ProxyError::InvalidRequest(_))
        ));
    }

    #[test]
    fn every_id_is_bounded_even_when_overridden() {
        let long = "x".repeat(MAX_ID_BYTES + 1);
        // The step header overrides the JSON-RPC id, which still keys the awaited call.
        let mut h = HeaderMap::new();
        h.insert(STEP_HEADER, HeaderValue::from_static("step-1"));
        let e = context(&h, "", &serde_json::json!(long)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid request: `id` is over 256 bytes",
            "names the field"
        );
        // Likewise the MCP session behind an `x-toolgate-session-id`.
        let mut h = HeaderMap::new();
        h.insert(SESSION_HEADER, HeaderValue::from_static("mine"));
        h.insert(MCP_SESSION_HEADER, HeaderValue::from_str(&long).unwrap());
        let e = context(&h, "", &serde_json::json!(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid request: header `mcp-session-id` is over 256 bytes"
        );
        for name in [SESSION_HEADER, STEP_HEADER, TENANT_HEADER] {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_str(&long).unwrap());
            let e = context(&h, "", &serde_json::json!(1))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("header `{name}`")), "{e}");
        }
        assert!(
            context(
                &HeaderMap::new(),
                "",
                &serde_json::json!("x".repeat(MAX_ID_BYTES))
            )
            .is_ok()
        );
    }
}
