//! The edge layer in front of every gRPC service: admits at most N calls at once and sheds
//! the rest with UNAVAILABLE (fail fast rather than queue without bound), and reports an
//! oversized request as RESOURCE_EXHAUSTED (tonic's decoder says OUT_OF_RANGE).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::Semaphore;
use tonic::codegen::http;
use tower::{Layer, Service};

use super::status::ApiError;

#[derive(Clone)]
pub struct ShedLayer {
    permits: Arc<Semaphore>,
    max: usize,
}

impl ShedLayer {
    pub fn new(max_in_flight: usize) -> ShedLayer {
        ShedLayer {
            permits: Arc::new(Semaphore::new(max_in_flight)),
            max: max_in_flight,
        }
    }
}

impl<S> Layer<S> for ShedLayer {
    type Service = Shed<S>;
    fn layer(&self, inner: S) -> Shed<S> {
        Shed {
            inner,
            permits: self.permits.clone(),
            max: self.max,
        }
    }
}

#[derive(Clone)]
pub struct Shed<S> {
    inner: S,
    permits: Arc<Semaphore>,
    max: usize,
}

type BoxFut<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> Service<http::Request<B>> for Shed<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFut<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            let status = tonic::Status::from(ApiError::Overloaded {
                in_flight: self.max,
            });
            return Box::pin(async move { Ok(status.into_http()) });
        };
        // Take the service that was driven to readiness; leave a fresh clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let mut res = inner.call(req).await?;
            remap_too_large(&mut res);
            // The permit lives as long as the response body: a stream holds its place until
            // it ends, so streams count against the limit like unary calls.
            Ok(res.map(|body| {
                tonic::body::Body::new(Permitted {
                    inner: body,
                    _permit: permit,
                })
            }))
        })
    }
}

/// A response body that holds a concurrency permit until it is dropped.
struct Permitted {
    inner: tonic::body::Body,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl http_body::Body for Permitted {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// tonic rejects a message over the decoding limit (before reading its body) with
/// OUT_OF_RANGE; the contract says RESOURCE_EXHAUSTED for size limits.
fn remap_too_large(res: &mut http::Response<tonic::body::Body>) {
    let h = res.headers_mut();
    let is_size = h.get("grpc-status").is_some_and(|v| v.as_bytes() == b"11")
        && h.get("grpc-message").is_some_and(|v| {
            let s = String::from_utf8_lossy(v.as_bytes());
            s.contains("too%20large") || s.contains("too large")
        });
    if is_size {
        h.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tokio::sync::oneshot;
    use tower::ServiceExt;

    #[tokio::test]
    async fn calls_past_the_limit_are_shed_with_unavailable() {
        // A service that holds each call until released, standing in for slow handlers.
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let release = std::sync::Arc::new(tokio::sync::Mutex::new(Some(release_rx)));
        let svc = tower::service_fn(move |_req: http::Request<()>| {
            let release = release.clone();
            async move {
                if let Some(rx) = release.lock().await.take() {
                    let _ = rx.await;
                }
                Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
            }
        });
        let layer = ShedLayer::new(1);
        let first = tokio::spawn(layer.layer(svc.clone()).oneshot(http::Request::new(())));
        // Let the first call take the only permit.
        while layer.permits.available_permits() != 0 {
            tokio::task::yield_now().await;
        }
        let shed = layer
            .layer(svc.clone())
            .oneshot(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(shed.headers().get("grpc-status").unwrap(), "14");
        release_tx.send(()).unwrap();
        let ok = first.await.unwrap().unwrap();
        assert!(ok.headers().get("grpc-status").is_none());
        // The permit is back: the next call is admitted.
        let again = layer
            .layer(svc)
            .oneshot(http::Request::new(()))
            .await
            .unwrap();
        assert!(again.headers().get("grpc-status").is_none());
    }
}
