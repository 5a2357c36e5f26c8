//! The ToolService proxy's client to its upstream: HTTP/2 on `h2` directly (with prior
//! knowledge for `http://`, by ALPN over rustls for `https://`), as a tower service tonic's
//! generated client runs on.
//!
//! Why not hyper's client (or tonic's `Channel`, built on it): it hands each request to a
//! dispatch task and sends the body from a second task once the new stream is open, so a
//! unary call leaves as two writes (HEADERS, then DATA) with a task hop between them, and the
//! tool server wakes twice. Here the caller's task queues the HEADERS and the whole body
//! together before the connection task runs, so they go out in one write.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::Status;
use tower::BoxError;

/// hyper's HTTP/2 client windows, kept so a 64 KB result is not throttled by the protocol's
/// 64 KiB default.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// How the connection is opened and kept.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub connect_timeout: Duration,
    /// A PING this often on an idle connection...
    pub keep_alive: Duration,
    /// ...and the connection is dropped when its answer takes longer than this.
    pub keep_alive_timeout: Duration,
}

/// A handle onto one shared HTTP/2 connection, opened on first use and again after it fails.
/// Clones share the connection.
#[derive(Clone)]
pub struct H2Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// `host:port`, as connected to.
    addr: String,
    /// For an `https://` upstream: the TLS client and the name its certificate must carry.
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    settings: Settings,
    /// The live connection's handle; `None` before the first call and after a failure.
    live: Mutex<Option<SendRequest<Bytes>>>,
    /// One connection attempt at a time: calls that find no connection wait for it rather
    /// than each opening their own.
    connecting: tokio::sync::Mutex<()>,
}

/// A failure on the way as the error tonic's client turns into the call's status. A stream
/// the tool server reset keeps its reason (tonic maps REFUSED_STREAM to UNAVAILABLE, CANCEL to
/// CANCELLED, ...); a connection that cannot be made, fails or is lost is UNAVAILABLE, as gRPC
/// clients report it.
fn failed(e: h2::Error) -> BoxError {
    if e.is_reset() && e.is_remote() {
        Box::new(e)
    } else {
        unavailable(e)
    }
}

fn unavailable(e: impl fmt::Display) -> BoxError {
    Box::new(Status::unavailable(e.to_string()))
}

impl H2Client {
    /// A client for `host:port`; with `tls`, the connection is TLS and the server's
    /// certificate must name `host`.
    pub fn new(
        host: &str,
        port: u16,
        tls: Option<rustls::ClientConfig>,
        settings: Settings,
    ) -> Result<H2Client, String> {
        let tls = match tls {
            None => None,
            Some(cfg) => {
                // The URL keeps an IPv6 literal's brackets; a certificate names it without.
                let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
                    .map_err(|e| format!("`{host}` is not a name TLS can check: {e}"))?
                    .to_owned();
                Some((tokio_rustls::TlsConnector::from(Arc::new(cfg)), name))
            }
        };
        // An IPv6 literal keeps its brackets from the URL, so `host:port` parses as is.
        Ok(H2Client {
            shared: Arc::new(Shared {
                addr: format!("{host}:{port}"),
                tls,
                settings,
                live: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
            }),
        })
    }
}

impl Shared {
    fn current(&self) -> Option<SendRequest<Bytes>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A handle ready for one more stream: the live connection's, or a new connection's
    /// when there is none or it has failed.
    async fn ready(&self) -> Result<SendRequest<Bytes>, BoxError> {
        if let Some(tx) = self.current()
            && let Ok(tx) = tx.ready().await
        {
            return Ok(tx);
        }
        let _one = self.connecting.lock().await;
        // Another call may have connected while this one waited.
        if let Some(tx) = self.current()
            && let Ok(tx) = tx.ready().await
        {
            return Ok(tx);
        }
        let tx = self.connect().await?;
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx.clone());
        tx.ready().await.map_err(failed)
    }

    async fn connect(&self) -> Result<SendRequest<Bytes>, BoxError> {
        let s = self.settings;
        let opened = tokio::time::timeout(s.connect_timeout, async {
            let tcp = tokio::net::TcpStream::connect(&self.addr).await?;
            tcp.set_nodelay(true)?;
            match &self.tls {
                None => handshake(tcp, s).await,
                Some((connector, name)) => {
                    let tls = connector.connect(name.clone(), tcp).await?;
                    // gRPC is HTTP/2 only; a server that did not agree to it would read the
                    // connection preface as garbage.
                    if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                        return Err(std::io::Error::other(
                            "the server did not agree to HTTP/2 (ALPN h2)",
                        ));
                    }
                    handshake(tls, s).await
                }
            }
        })
        .await;
        match opened {
            Ok(Ok(tx)) => Ok(tx),
            Ok(Err(e)) => Err(unavailable(format_args!("cannot connect: {e}"))),
            Err(_) => Err(unavailable(format_args!(
                "cannot connect: no connection within {:?}",
                s.connect_timeout
            ))),
        }
    }
}

/// Opens HTTP/2 over `io` and runs the connection on its own task.
async fn handshake<IO>(io: IO, s: Settings) -> std::io::Result<SendRequest<Bytes>>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut conn) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| match e.into_io() {
            Some(io) => io,
            None => std::io::Error::other("the HTTP/2 handshake failed"),
        })?;
    let ping = conn.ping_pong();
    tokio::spawn(async move {
        // The connection ends when the upstream closes it, when it fails, or when a PING
        // goes unanswered; its calls then fail and the next call connects anew.
        tokio::select! {
            _ = conn => {}
            _ = keep_alive(ping, s) => {}
        }
    });
    Ok(tx)
}

/// Returns when a PING went unanswered for `keep_alive_timeout` (or cannot be sent); never
/// otherwise.
async fn keep_alive(ping: Option<h2::PingPong>, s: Settings) {
    let Some(mut ping) = ping else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(s.keep_alive).await;
        if ping.send_ping(h2::Ping::opaque()).is_err() {
            return;
        }
        match tokio::time::timeout(
            s.keep_alive_timeout,
            std::future::poll_fn(|cx| ping.poll_pong(cx)),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

type CallFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Incoming>, BoxError>> + Send + 'static>>;

impl tower::Service<http::Request<tonic::body::Body>> for H2Client {
    type Response = http::Response<Incoming>;
    type Error = BoxError;
    type Future = CallFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness (a connection, and room for a stream on it) is awaited in the call,
        // where a failed connection can be replaced.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            // A request here is one encoded message, already in memory: the whole body is
            // read first so it leaves with the HEADERS.
            let body = body.collect().await?.to_bytes();
            let answer = match send(&shared, head(&parts), body.clone()).await {
                // The upstream closed the connection (GOAWAY) or refused the stream before
                // reading the call: it was never processed, so it goes once more on a new
                // connection. This is what a rolling restart of the tool server looks like.
                Err(e) if unprocessed(&e) => send(&shared, head(&parts), body).await,
                other => other,
            }
            .map_err(|e| match e.downcast::<h2::Error>() {
                Ok(e) => failed(*e),
                Err(e) => e,
            })?;
            Ok(answer.map(|recv| Incoming {
                recv,
                data_done: false,
            }))
        })
    }
}

/// One try of a call: a ready connection, the HEADERS and the body queued together, and the
/// answer's head. Fails with the connection's error (already a status) or the stream's
/// `h2::Error`.
async fn send(
    shared: &Shared,
    head: http::Request<()>,
    body: Bytes,
) -> Result<http::Response<h2::RecvStream>, BoxError> {
    let mut tx = shared.ready().await?;
    let (answer, mut stream) = tx.send_request(head, body.is_empty())?;
    if !body.is_empty() {
        stream.send_data(body, true)?;
    }
    Ok(answer.await?)
}

/// The request line and headers of a call, for each try (extensions stay behind: h2 sends
/// none of them).
fn head(parts: &http::request::Parts) -> http::Request<()> {
    let mut r = http::Request::new(());
    *r.method_mut() = parts.method.clone();
    *r.uri_mut() = parts.uri.clone();
    *r.headers_mut() = parts.headers.clone();
    r
}

/// A stream the upstream provably did not process: refused, or cut off by a GOAWAY that
/// named an earlier last stream.
fn unprocessed(e: &BoxError) -> bool {
    e.downcast_ref::<h2::Error>().is_some_and(|e| {
        e.is_remote() && (e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM))
    })
}

/// The upstream's answer body: its DATA, then its trailers (where gRPC puts the status).
/// Dropping it before the end resets the stream, which cancels the call upstream.
pub struct Incoming {
    recv: h2::RecvStream,
    data_done: bool,
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.data_done {
            match self.recv.poll_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(data))) => {
                    // What was read is out of the window: the upstream may send as much again.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(failed(e)))),
                Poll::Ready(None) => self.data_done = true,
            }
        }
        match self.recv.poll_trailers(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(t))) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Poll::Ready(Ok(None)) => Poll::Ready(None),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(failed(e)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}
