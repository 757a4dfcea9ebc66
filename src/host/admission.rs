//! Admission before decoding: at most [`limits::CONCURRENT_CALLS`] diagnostic calls and
//! [`limits::CONCURRENT_READS`] reads are decoded at once; a call over the limit is
//! answered `RESOURCE_EXHAUSTED` with the not-consumed metadata before its body is
//! read, so a flood costs the host no decoding and the client may send it again. An
//! admitted call has [`limits::CALL_DEADLINE`] to be answered, else it is answered
//! `DEADLINE_EXCEEDED` (acceptance unknown: the client retries the same bytes, which
//! the sequence rules make safe).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

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
    /// How long an admitted call may take, body reading included.
    pub deadline: Duration,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            calls: limits::CONCURRENT_CALLS,
            reads: limits::CONCURRENT_READS,
            deadline: limits::CALL_DEADLINE,
        }
    }
}

/// A service that admits calls by [`Admission`] before handing them on.
#[derive(Debug, Clone)]
pub struct Admitted<S> {
    inner: S,
    calls: Arc<Semaphore>,
    reads: Arc<Semaphore>,
    deadline: Duration,
}

impl<S> Admitted<S> {
    /// `inner` behind `admission`.
    pub fn new(inner: S, admission: Admission) -> Self {
        Admitted {
            inner,
            calls: Arc::new(Semaphore::new(admission.calls)),
            reads: Arc::new(Semaphore::new(admission.reads)),
            deadline: admission.deadline,
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
                let deadline = self.deadline;
                Box::pin(async move {
                    let response = match tokio::time::timeout(deadline, answer).await {
                        Ok(response) => response,
                        Err(_) => Ok(tonic::Status::deadline_exceeded(format!(
                            "the host did not answer within {} ms; acceptance unknown",
                            deadline.as_millis()
                        ))
                        .into_http()),
                    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Service, ServiceExt};

    fn request(path: &str) -> http::Request<Body> {
        http::Request::builder()
            .uri(format!(
                "http://localhost/nemo.relay.worker.v1.RelayDiagnostics/{path}"
            ))
            .body(Body::empty())
            .expect("a valid request")
    }

    fn grpc_status(response: &http::Response<Body>) -> Option<tonic::Code> {
        tonic::Status::from_header_map(response.headers()).map(|status| status.code())
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_slower_than_the_deadline_is_answered_deadline_exceeded_and_frees_its_slot() {
        let slow = tower::service_fn(|request: http::Request<Body>| async move {
            if request.uri().path().ends_with("/SubmitDiagnostic") {
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            Ok::<_, Infallible>(http::Response::new(Body::empty()))
        });
        let mut admitted = Admitted::new(
            slow,
            Admission {
                calls: 1,
                reads: 1,
                deadline: Duration::from_secs(2),
            },
        );
        let late = admitted
            .ready()
            .await
            .expect("ready")
            .call(request("SubmitDiagnostic"))
            .await
            .expect("infallible");
        assert_eq!(grpc_status(&late), Some(tonic::Code::DeadlineExceeded));
        // The one call slot is free again: a quick call is admitted and answered.
        let quick = admitted
            .ready()
            .await
            .expect("ready")
            .call(request("GetDiagnosticCapabilities"))
            .await
            .expect("infallible");
        assert_eq!(grpc_status(&quick), None, "answered by the service itself");
    }

    #[test]
    fn the_default_deadline_is_the_protocols_two_seconds() {
        assert_eq!(Admission::default().deadline, Duration::from_millis(2000));
    }
}
