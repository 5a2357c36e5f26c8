//! The upstream MCP server as the proxy reaches it: the HTTP client, which headers cross
//! over, and how its failures are named without showing its URL's path or query.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::Response;
use bytes::BytesMut;
use tokio::time::Instant;

use super::error::UpstreamError;
use super::mcp::{MAX_UPSTREAM_TIMEOUT, McpConfig, McpConfigError};

/// Connecting should be quick; the rest of the budget is for the tool itself.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The upstream MCP server: where requests go, and how it is named in errors and spans.
pub(super) struct Upstream {
    pub(super) url: reqwest::Url,
    /// `host:port`, the only part of the URL errors show (the path or query may hold a token).
    pub(super) addr: String,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) client: reqwest::Client,
    pub(super) timeout: Duration,
}

impl Upstream {
    pub(super) fn new(cfg: &McpConfig) -> Result<Upstream, McpConfigError> {
        if cfg.timeout > MAX_UPSTREAM_TIMEOUT {
            return Err(McpConfigError::Timeout);
        }
        let url = reqwest::Url::parse(&cfg.upstream)
            .map_err(|e| McpConfigError::Upstream(format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(McpConfigError::Upstream(
                "must be an http:// or https:// URL".into(),
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| McpConfigError::Upstream("has no host".into()))?
            .to_string();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| McpConfigError::Upstream("has no port".into()))?;
        let client = reqwest::Client::builder()
            .connect_timeout(cfg.timeout.min(MAX_CONNECT_TIMEOUT))
            // The client follows redirects itself: it sees what the upstream answered.
            .redirect(reqwest::redirect::Policy::none())
            // The sidecar talks to its tool server directly, whatever proxy the
            // environment names for outbound traffic.
            .no_proxy()
            .build()
            .map_err(|e| McpConfigError::Client(e.to_string()))?;
        Ok(Upstream {
            addr: format!("{host}:{port}"),
            url,
            host,
            port,
            client,
            timeout: cfg.timeout,
        })
    }

    /// The upstream URL for a request path: the proxy mirrors the upstream's paths, so an
    /// agent pointed at the proxy uses the path it used with the server.
    pub(super) fn target(&self, uri: &axum::http::Uri) -> reqwest::Url {
        let mut url = self.url.clone();
        url.set_path(uri.path());
        url.set_query(uri.query());
        url
    }

    /// The MCP endpoint is the upstream URL's path and what lies under it; other paths (an
    /// OAuth metadata document, say) are relayed as plain HTTP.
    pub(super) fn is_endpoint(&self, path: &str) -> bool {
        let base = self.url.path().trim_end_matches('/');
        base.is_empty() || path == base || path.starts_with(&format!("{base}/"))
    }

    pub(super) async fn send(
        &self,
        method: Method,
        url: reqwest::Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, UpstreamError> {
        let deadline = Instant::now() + self.timeout;
        self.send_until(method, url, headers, body, deadline).await
    }

    /// `send`, with the answer's head due by `deadline`.
    pub(super) async fn send_until(
        &self,
        method: Method,
        url: reqwest::Url,
        headers: HeaderMap,
        body: Bytes,
        deadline: Instant,
    ) -> Result<reqwest::Response, UpstreamError> {
        let mut req = self.client.request(method, url).headers(headers);
        if !body.is_empty() {
            req = req.body(body);
        }
        match tokio::time::timeout_at(deadline, req.send()).await {
            Err(_) => Err(self.timed_out()),
            Ok(Err(e)) => Err(self.failed(&e)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    pub(super) fn timed_out(&self) -> UpstreamError {
        UpstreamError::Timeout {
            addr: self.addr.clone(),
            secs: self.timeout.as_secs(),
        }
    }

    /// Names a transport failure by kind. reqwest's own message carries the whole URL, so
    /// it is not used.
    pub(super) fn failed(&self, e: &reqwest::Error) -> UpstreamError {
        let addr = self.addr.clone();
        let io = io_kind(e);
        if e.is_connect() {
            let addr = match io {
                Some(k) => format!("{addr} ({k})"),
                None => addr,
            };
            return UpstreamError::Connect { addr };
        }
        if e.is_timeout() {
            return self.timed_out();
        }
        let kind = match (io, e.is_body() || e.is_decode()) {
            (Some(k), _) => k.to_string(),
            (None, true) => "the reply body broke off".to_string(),
            (None, false) => "transport error".to_string(),
        };
        UpstreamError::Request { addr, kind }
    }
}

/// The I/O error kind under a transport error (`connection refused`, `connection reset`).
fn io_kind(e: &reqwest::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

/// Hop-by-hop headers (RFC 9110 section 7.6.1) end at the proxy.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Copies end-to-end headers. The `Connection` header's own list is dropped too, and so is
/// the length (the body may be rewritten; hyper frames it anew).
pub(super) fn end_to_end(headers: &HeaderMap, keep: impl Fn(&HeaderName) -> bool) -> HeaderMap {
    let listed: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || name == header::CONTENT_LENGTH
            || listed.iter().any(|l| l == n)
            || !keep(name)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Headers for the upstream request. `Host` becomes the upstream's; `Accept-Encoding` is
/// dropped so replies come uncompressed and can be read; the `x-toolgate-*` headers are
/// for the guard alone.
pub(super) fn upstream_headers(incoming: &HeaderMap) -> HeaderMap {
    end_to_end(incoming, |n| {
        n != header::HOST && n != header::ACCEPT_ENCODING && !n.as_str().starts_with("x-toolgate-")
    })
}

pub(super) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// An upstream answer's status and end-to-end headers, waiting for its body.
pub(super) struct Head {
    status: StatusCode,
    headers: HeaderMap,
}

impl Head {
    pub(super) fn with_body(self, body: Body) -> Response {
        let mut r = Response::new(body);
        *r.status_mut() = self.status;
        *r.headers_mut() = self.headers;
        r
    }
}

pub(super) fn head_of(resp: &reqwest::Response) -> Head {
    Head {
        status: resp.status(),
        headers: end_to_end(resp.headers(), |_| true),
    }
}

/// Reads an upstream reply body up to `limit` bytes.
pub(super) async fn read_reply(
    up: &Upstream,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Bytes, UpstreamError> {
    let too_large = || UpstreamError::TooLarge {
        addr: up.addr.clone(),
        limit,
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut buf = BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| up.failed(&e))? {
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn upstream(url: &str) -> Upstream {
        Upstream::new(&McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: url.into(),
            timeout: Duration::from_secs(1),
            max_open: 16,
        })
        .unwrap()
    }

    #[test]
    fn the_endpoint_is_the_upstream_path_and_below() {
        let up = upstream("http://127.0.0.1:9000/mcp");
        assert!(up.is_endpoint("/mcp"));
        assert!(up.is_endpoint("/mcp/x"));
        assert!(!up.is_endpoint("/mcpx"));
        assert!(!up.is_endpoint("/.well-known/oauth-protected-resource"));
        assert!(upstream("http://127.0.0.1:9000/").is_endpoint("/anything"));
        assert_eq!(up.addr, "127.0.0.1:9000");
        let t = up.target(&"/mcp/sub?a=1".parse().unwrap());
        assert_eq!(t.as_str(), "http://127.0.0.1:9000/mcp/sub?a=1");
        assert_eq!(
            upstream("https://tools.example/mcp").addr,
            "tools.example:443"
        );
    }

    #[test]
    fn bad_upstreams_are_refused() {
        for bad in ["not a url", "ftp://x/mcp", "unix:/tmp/s"] {
            assert!(
                Upstream::new(&McpConfig {
                    listen: "127.0.0.1:0".parse().unwrap(),
                    upstream: bad.into(),
                    timeout: Duration::from_secs(1),
                    max_open: 16,
                })
                .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_absurd_timeout_is_refused_not_overflowed() {
        let cfg = |secs| McpConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: "http://127.0.0.1:9000/mcp".into(),
            timeout: Duration::from_secs(secs),
            max_open: 16,
        };
        let e = Upstream::new(&cfg(u64::MAX)).err().unwrap();
        assert_eq!(e.to_string(), "--mcp-upstream-timeout-s: at most 86400 s");
        let up = Upstream::new(&cfg(MAX_UPSTREAM_TIMEOUT.as_secs())).unwrap();
        // The longest accepted still makes a deadline.
        assert!(Instant::now().checked_add(up.timeout).is_some());
    }

    #[test]
    fn hop_by_hop_and_guard_headers_stay_behind() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("host", "proxy:8080"),
            ("content-length", "12"),
            ("accept-encoding", "gzip"),
            ("x-toolgate-tenant", "acme"),
            ("authorization", "Bearer t"),
            ("mcp-session-id", "s-1"),
            ("mcp-protocol-version", "2025-06-18"),
            ("accept", "application/json, text/event-stream"),
            ("last-event-id", "42"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let out = upstream_headers(&h);
        let mut kept: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            [
                "accept",
                "authorization",
                "last-event-id",
                "mcp-protocol-version",
                "mcp-session-id",
                "traceparent"
            ]
        );
    }
}
