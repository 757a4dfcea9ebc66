//! Admission before decoding: at most [`limits::CONCURRENT_CALLS`] diagnostic calls and
//! [`limits::CONCURRENT_READS`] reads are decoded at once; a call over the limit is
//! answered `RESOURCE_EXHAUSTED` with the not-consumed metadata before its body is
//! read, so a flood costs the host no decoding and the client may send it again.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::Semaphore;
use tonic::body::Body;
use tonic::server::NamedService;

use super::diagnostics_service::{exhausted, limits};

/// How many calls of each kind may be decoded at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Capabilities, open and submit calls.
    pub calls: usize,
    /// `ReadDiagnosticPage` calls.
    pub reads: usize,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            calls: limits::CONCURRENT_CALLS,
            reads: limits::CONCURRENT_READS,
        }
    }
}

/// A service that admits calls by [`Admission`] before handing them on.
#[derive(Debug, Clone)]
pub struct Admitted<S> {
    inner: S,
    calls: Arc<Semaphore>,
    reads: Arc<Semaphore>,
}

impl<S> Admitted<S> {
    /// `inner` behind `admission`.
    pub fn new(inner: S, admission: Admission) -> Self {
        Admitted {
            inner,
            calls: Arc::new(Semaphore::new(admission.calls)),
            reads: Arc::new(Semaphore::new(admission.reads)),
        }
    }
}

impl<S> tower::Service<http::Request<Body>> for Admitted<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let semaphore = if request.uri().path().ends_with("/ReadDiagnosticPage") {
            &self.reads
        } else {
            &self.calls
        };
        match Arc::clone(semaphore).try_acquire_owned() {
            Ok(permit) => {
                let answer = self.inner.call(request);
                Box::pin(async move {
                    let response = answer.await;
                    drop(permit);
                    response
                })
            }
            Err(_) => Box::pin(async { Ok(exhausted("too many concurrent calls").into_http()) }),
        }
    }
}

impl<S: NamedService> NamedService for Admitted<S> {
    const NAME: &'static str = S::NAME;
}
