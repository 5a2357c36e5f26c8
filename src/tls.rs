//! TLS for every listener that speaks it (the gRPC port, the MCP proxy, the safety-review
//! API, a non-loopback admin port, the admission webhook): the certificate, key and, for
//! mTLS, the client CA are read from files and read again when they change (cert-manager and
//! SPIRE rotate them in place); the caller's identity is read once per connection, from the
//! client certificate, not once per request. Also the client side of the gRPC proxy's
//! `https://` upstream.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::server::TlsStream;

/// How often the certificate files are checked for a change.
pub const CERT_POLL: Duration = Duration::from_secs(5);
/// A client that has not finished its handshake by then is dropped, so slow handshakes
/// cannot hold connections open.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; past it, accepting waits. Each holds a socket and a
/// little rustls state, so this bounds what a flood of half-open clients can cost.
const MAX_HANDSHAKES: usize = 256;

/// ALPN for gRPC: HTTP/2 only.
pub const ALPN_H2: &[&[u8]] = &[b"h2"];
/// ALPN for the HTTP listeners: HTTP/2 preferred, HTTP/1.1 accepted.
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read `{path}`: {source}")]
    Read { path: String, source: io::Error },
    #[error("`{path}` holds no {what}")]
    Empty { path: String, what: &'static str },
    #[error("`{path}`: a CA certificate rustls cannot use: {message}")]
    Ca { path: String, message: String },
    #[error("certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Where a listener's certificate, key and (for mTLS) client CA bundle are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, every client must present a certificate issued by one of these CAs.
    pub client_ca: Option<PathBuf>,
}

/// The files' bytes as last read: a change is a change of content, not of modification
/// time, which coarse file-system clocks can leave equal across a quick rewrite.
#[derive(PartialEq, Eq)]
struct Pems {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

impl Pems {
    fn read(files: &TlsFiles) -> Result<Pems, TlsError> {
        Ok(Pems {
            cert: read(&files.cert)?,
            key: read(&files.key)?,
            client_ca: files.client_ca.as_ref().map(read).transpose()?,
        })
    }
}

fn read(p: &PathBuf) -> Result<Vec<u8>, TlsError> {
    std::fs::read(p).map_err(|source| TlsError::Read {
        path: p.display().to_string(),
        source,
    })
}

fn certs(pem: &[u8], p: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::Empty {
            path: p.display().to_string(),
            what: "PEM certificate",
        });
    }
    Ok(chain)
}

/// Adds the PEM CA certificates in `pem` (read from `p`) to `roots`.
fn add_cas(roots: &mut RootCertStore, pem: &[u8], p: &std::path::Path) -> Result<(), TlsError> {
    for c in certs(pem, p)? {
        roots.add(c).map_err(|e| TlsError::Ca {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
    }
    Ok(())
}

/// A client configuration trusting the public web roots and, when given, the PEM CAs in
/// `ca_pem` (`label` names where they came from in errors), offering `alpn`.
pub fn client_config(
    ca_pem: Option<&[u8]>,
    label: &str,
    alpn: &[&[u8]],
) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = ca_pem {
        add_cas(&mut roots, pem, std::path::Path::new(label))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(cfg)
}

/// Reads the files into a server configuration (ring, TLS 1.2 and 1.3). With a client CA the
/// handshake refuses a client without a certificate that chains to it.
pub fn server_config(files: &TlsFiles, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
    build(files, &Pems::read(files)?, alpn)
}

fn build(files: &TlsFiles, pems: &Pems, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
    let chain = certs(&pems.cert, &files.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&pems.key).map_err(|_| TlsError::Empty {
        path: files.key.display().to_string(),
        what: "PEM private key",
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match (&files.client_ca, &pems.client_ca) {
        (Some(ca), Some(pem)) => {
            let mut roots = RootCertStore::empty();
            add_cas(&mut roots, pem, ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Ca {
                    path: ca.display().to_string(),
                    message: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_single_cert(chain, key)?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(cfg)
}

/// A server configuration that follows its files: `current` is what the next handshake uses.
#[derive(Clone)]
pub struct Reloading {
    current: Arc<ArcSwap<ServerConfig>>,
}

impl Reloading {
    /// Reads the files now (an error is returned, so a bad certificate stops start-up) and
    /// then every `poll`, until `stop`. A pair that does not load later is logged and the
    /// previous one kept: mid-rotation the key may not match the new certificate yet.
    pub fn start(
        files: TlsFiles,
        alpn: &'static [&'static [u8]],
        poll: Duration,
        mut stop: watch::Receiver<bool>,
        what: &'static str,
    ) -> Result<Reloading, TlsError> {
        let mut seen = Pems::read(&files)?;
        let current = Arc::new(ArcSwap::from_pointee(build(&files, &seen, alpn)?));
        let out = Reloading {
            current: current.clone(),
        };
        tokio::spawn(async move {
            // The content that last failed to load: warned about once, not at every poll.
            let mut failed: Option<Pems> = None;
            loop {
                tokio::select! {
                    _ = stopped(&mut stop) => return,
                    _ = tokio::time::sleep(poll) => {}
                }
                // A file missing mid-rotation is read again at the next poll.
                let Ok(now) = Pems::read(&files) else {
                    continue;
                };
                if now == seen || failed.as_ref() == Some(&now) {
                    continue;
                }
                match build(&files, &now, alpn) {
                    Ok(cfg) => {
                        current.store(Arc::new(cfg));
                        seen = now;
                        failed = None;
                        tracing::info!(listener = what, "TLS certificate reloaded");
                    }
                    Err(e) => {
                        failed = Some(now);
                        tracing::warn!(
                            listener = what,
                            error = %e,
                            "TLS certificate not reloaded; keeping the current one"
                        );
                    }
                }
            }
        });
        Ok(out)
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.current.load_full())
    }
}

/// Resolves once `stop` turns true; the borrow of the flag ends inside, so the future is
/// `Send`.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// The verified identity: the client certificate's SPIFFE ID (a `spiffe://` URI SAN),
    /// else its first DNS SAN; `None` without a client certificate.
    pub caller: Option<Arc<str>>,
    pub remote: Option<SocketAddr>,
}

/// The identity a verified client certificate names. SPIFFE IDs win over DNS names: a
/// workload certificate from SPIRE or a mesh carries both, and the SPIFFE ID is the one
/// that names the workload rather than a host.
pub fn identity_of(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let san = parsed.subject_alternative_name().ok()??;
    let names = &san.value.general_names;
    let spiffe = names.iter().find_map(|n| match n {
        GeneralName::URI(u) if u.starts_with("spiffe://") => Some(*u),
        _ => None,
    });
    let dns = || {
        names.iter().find_map(|n| match n {
            GeneralName::DNSName(d) => Some(*d),
            _ => None,
        })
    };
    spiffe.or_else(dns).map(str::to_string)
}

/// A connection with its peer, known from the handshake on.
pub struct Identified<S> {
    inner: S,
    peer: Peer,
}

impl<S> Identified<S> {
    pub fn peer(&self) -> &Peer {
        &self.peer
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Identified<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Identified<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: Send + 'static> tonic::transport::server::Connected for Identified<S> {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

pub type TlsConn = Identified<TlsStream<TcpStream>>;

/// Connections that finished their handshake, in the order they finished. Handshakes run
/// in tasks of their own, so one slow client does not hold up the others; a failed one is
/// the client's problem and is dropped with a debug line.
pub struct TlsIncoming {
    rx: mpsc::Receiver<TlsConn>,
    local: SocketAddr,
}

impl TlsIncoming {
    pub fn new(listener: TcpListener, tls: Reloading, mut stop: watch::Receiver<bool>) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, rx) = mpsc::channel(64);
        let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, remote) = tokio::select! {
                    _ = stopped(&mut stop) => return,
                    accepted = listener.accept() => match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors and the like: wait a little, not spin.
                            tracing::warn!(error = %e, "TLS accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                // As on the plain listeners: no answer waits for the peer's delayed ACK.
                let _ = tcp.set_nodelay(true);
                let acceptor = tls.acceptor();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let stream =
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%remote, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%remote, "TLS handshake timed out");
                                return;
                            }
                        };
                    let caller = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(identity_of)
                        .map(Arc::from);
                    let conn = Identified {
                        inner: stream,
                        peer: Peer {
                            caller,
                            remote: Some(remote),
                        },
                    };
                    let _ = tx.send(conn).await;
                });
            }
        });
        TlsIncoming { rx, local }
    }
}

impl tokio_stream::Stream for TlsIncoming {
    type Item = io::Result<TlsConn>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|c| c.map(Ok))
    }
}

impl axum::serve::Listener for TlsIncoming {
    type Io = TlsConn;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => {
                let peer = conn.peer.clone();
                (conn, peer)
            }
            // The accept loop ended (the server is stopping): no more connections come, and
            // graceful shutdown ends the server.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Peer> {
        Ok(Peer {
            caller: None,
            remote: Some(self.local),
        })
    }
}

/// The caller's verified identity on an HTTP edge (the MCP proxy, the review API): the
/// connection's peer over TLS; empty on a plaintext listener.
pub fn caller_of(ext: &http::Extensions) -> String {
    ext.get::<axum::extract::ConnectInfo<Peer>>()
        .and_then(|c| c.0.caller.as_deref())
        .unwrap_or_default()
        .to_string()
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsIncoming>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsIncoming>) -> Peer {
        stream.remote_addr().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spiffe_id_wins_over_a_dns_name_and_a_dns_name_is_the_fallback() {
        use rcgen::{CertificateParams, KeyPair, SanType};
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(vec!["agent.example".into()]).expect("params");
        p.subject_alt_names.push(SanType::URI(
            "spiffe://cluster.local/ns/agents/sa/a"
                .try_into()
                .expect("uri"),
        ));
        let cert = p.self_signed(&key).expect("cert");
        assert_eq!(
            identity_of(cert.der()).as_deref(),
            Some("spiffe://cluster.local/ns/agents/sa/a")
        );
        let p = CertificateParams::new(vec!["agent.example".into()]).expect("params");
        let cert = p.self_signed(&key).expect("cert");
        assert_eq!(identity_of(cert.der()).as_deref(), Some("agent.example"));
        let p = CertificateParams::new(Vec::<String>::new()).expect("params");
        let cert = p.self_signed(&key).expect("cert");
        assert_eq!(identity_of(cert.der()), None);
        assert_eq!(identity_of(&CertificateDer::from(vec![1, 2, 3])), None);
    }

    #[test]
    fn a_missing_file_or_a_bad_ca_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let files = TlsFiles {
            cert: dir.path().join("nope.pem"),
            key: dir.path().join("nope.key"),
            client_ca: None,
        };
        let e = server_config(&files, ALPN_H2).expect_err("missing");
        assert!(e.to_string().contains("nope.pem"), "{e}");
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not a pem").expect("write");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        std::fs::write(dir.path().join("c.pem"), cert.pem()).expect("write");
        std::fs::write(dir.path().join("c.key"), key.serialize_pem()).expect("write");
        let files = TlsFiles {
            cert: dir.path().join("c.pem"),
            key: dir.path().join("c.key"),
            client_ca: Some(ca),
        };
        let e = server_config(&files, ALPN_H2).expect_err("bad ca");
        assert!(e.to_string().contains("ca.pem"), "{e}");
    }
}
