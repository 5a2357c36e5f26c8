//! The one place proxy errors become HTTP answers: a status code and a JSON-RPC error body.
//! The matches are exhaustive on purpose, so a new error cannot ship without an answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Why the proxy answered a request itself instead of relaying the upstream's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The body is not JSON; the message gives line and column, never the text.
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a message the guard can judge (a batch with a tool call, a tool call
    /// without an id, a header over its limit).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A tool call whose params the guard cannot read, so it cannot be judged.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("request body is over the policy's max_message_bytes ({limit} bytes)")]
    TooLarge { limit: usize },
    /// The pack refuses this caller (`callers.unknown: deny`).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The proxy is at its limit of requests in flight.
    #[error("overloaded: too many requests in flight; retry with backoff")]
    Overloaded,
    /// The proxy holds its limit of open requests and streams.
    #[error("overloaded: too many open requests and streams; close one or retry with backoff")]
    TooManyOpen,
    #[error("upstream unavailable: {0}")]
    Upstream(#[from] UpstreamError),
    /// A fault inside the proxy (a decision task died); never carries request content.
    #[error("internal error: {0}")]
    Internal(String),
}

/// How the upstream failed. Messages name its address and the kind of failure, never the
/// URL's path or query (they may carry tokens) nor any payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("cannot connect to {addr}")]
    Connect { addr: String },
    #[error("{addr} did not answer within {secs} s")]
    Timeout { addr: String, secs: u64 },
    #[error("{addr} answered HTTP {status}")]
    Status { addr: String, status: u16 },
    #[error("{addr} sent a tools/call reply that cannot be read: {why}")]
    Malformed { addr: String, why: String },
    #[error("{addr} sent a tools/call reply over max_message_bytes ({limit} bytes)")]
    TooLarge { addr: String, limit: usize },
    #[error("the stream from {addr} ended before the tools/call reply")]
    Incomplete { addr: String },
    #[error("request to {addr} failed: {kind}")]
    Request { addr: String, kind: String },
}

impl UpstreamError {
    /// A short fixed name of the failure, for the upstream span's status.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Connect { .. } => "connect",
            UpstreamError::Timeout { .. } => "timeout",
            UpstreamError::Status { .. } => "status",
            UpstreamError::Malformed { .. } => "malformed_reply",
            UpstreamError::TooLarge { .. } => "reply_too_large",
            UpstreamError::Incomplete { .. } => "incomplete_stream",
            UpstreamError::Request { .. } => "request",
        }
    }
}

/// JSON-RPC error codes (JSON-RPC 2.0 section 5.1).
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

impl ProxyError {
    pub fn status_and_code(&self) -> (StatusCode, i64) {
        match self {
            ProxyError::Parse(_) => (StatusCode::BAD_REQUEST, PARSE_ERROR),
            ProxyError::InvalidRequest(_) => (StatusCode::BAD_REQUEST, INVALID_REQUEST),
            ProxyError::InvalidParams(_) => (StatusCode::BAD_REQUEST, INVALID_PARAMS),
            ProxyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST),
            ProxyError::Forbidden(_) => (StatusCode::FORBIDDEN, INVALID_REQUEST),
            ProxyError::Overloaded | ProxyError::TooManyOpen => {
                (StatusCode::SERVICE_UNAVAILABLE, INTERNAL_ERROR)
            }
            ProxyError::Upstream(_) => (StatusCode::BAD_GATEWAY, INTERNAL_ERROR),
            ProxyError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR),
        }
    }

    /// The JSON-RPC error answer for the request `id` (`null` when it is not known).
    pub fn body(&self, id: Option<&Value>) -> Value {
        let (_, code) = self.status_and_code();
        super::jsonrpc::error_response(id, code, &self.to_string())
    }

    pub fn into_response_for(self, id: Option<&Value>) -> Response {
        let (status, _) = self.status_and_code();
        (status, axum::Json(self.body(id))).into_response()
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        self.into_response_for(None)
    }
}
