//! When an OTLP export is sent again: only when the collector did not take it.
//!
//! A collector that answers "not now" (gRPC `UNAVAILABLE`, or another status the OTLP
//! specification calls retryable; `RESOURCE_EXHAUSTED` only with a delay; HTTP 429,
//! 502, 503, 504), or a connection that failed before anything was sent, has not
//! taken the batch: it is sent again after a back-off. An export that ran out of its
//! timeout, or whose connection broke once the request was on its way, may have been
//! taken: it is not sent again (the collector would count it twice) and is reported
//! as failed.
//!
//! The back-off fits a collector busy enough to refuse. Measured in the fleet test
//! (rotel behind twenty processes on two shared cores, debug builds; the slowest
//! answer to one attempt, per run): 0.18 to 0.61 s in ten runs of the fleet alone, 0.71
//! to 1.59 s with the fleet squeezed into 0.7 of a core. The first retry waits
//! [`FIRST_WAIT`], longer than the slowest answer of a collector that has its CPU, so
//! one that refused for being full has had that long to drain; each wait doubles up to
//! [`LONGEST_WAIT`] (2, 4, 8 s: past what a starved one took), with up to a quarter
//! more at random so a fleet refused at once does not come back at once; at most
//! [`RETRIES`] retries. A delay the collector asks for (gRPC `RetryInfo`, HTTP
//! `Retry-After`) is waited instead, up to [`LONGEST_WAIT`].

use std::time::{Duration, SystemTime};

use tonic::Code;

/// The wait before the first retry.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub const LONGEST_WAIT: Duration = Duration::from_secs(8);
/// Retries after the first attempt, at most.
pub const RETRIES: u32 = 4;

/// What one failed attempt means for the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The collector did not take it: send it again, after the delay it asked for if
    /// any.
    Again(Option<Duration>),
    /// It may have been taken, or the collector refused it for good: do not send it
    /// again.
    GiveUp,
}

/// The verdict on a failed gRPC export.
pub fn grpc_verdict(status: &tonic::Status) -> Verdict {
    if never_sent(status) {
        return Verdict::Again(None);
    }
    // A status with a source was made here (our own timeout, a broken connection),
    // not read from the collector's answer: it may have the batch.
    if std::error::Error::source(status).is_some() {
        return Verdict::GiveUp;
    }
    let asked = requested_delay(status);
    match status.code() {
        Code::Unavailable
        | Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::DataLoss => Verdict::Again(asked),
        // Retryable only when the collector says when (the OTLP specification).
        Code::ResourceExhausted => {
            asked.map_or(Verdict::GiveUp, |delay| Verdict::Again(Some(delay)))
        }
        _ => Verdict::GiveUp,
    }
}

/// Whether the connection failed before the request was sent (tonic marks a failed
/// connection attempt).
fn never_sent(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// The delay a gRPC collector asks for in its `RetryInfo`, if any.
fn requested_delay(status: &tonic::Status) -> Option<Duration> {
    use tonic_types::StatusExt;
    status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
}

/// How an HTTP export attempt ended, as far as retrying goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpOutcome {
    /// The collector answered with this status, and maybe a `Retry-After` of so many
    /// seconds.
    Answered {
        /// The HTTP status.
        status: u16,
        /// `Retry-After`, as delay-seconds.
        retry_after: Option<Duration>,
    },
    /// The connection could not be made: nothing was sent.
    NotConnected,
    /// Our timeout, or the connection failed after the request went out.
    Unknown,
}

/// The verdict on a failed HTTP export.
pub fn http_verdict(outcome: &HttpOutcome) -> Verdict {
    match outcome {
        HttpOutcome::Answered {
            status: 429 | 502 | 503 | 504,
            retry_after,
        } => Verdict::Again(*retry_after),
        HttpOutcome::Answered { .. } | HttpOutcome::Unknown => Verdict::GiveUp,
        HttpOutcome::NotConnected => Verdict::Again(None),
    }
}

/// The wait before retry number `retry` (1 for the first), the collector's `asked`
/// delay taking the back-off's place; `spread` in `[0, 1)` adds up to a quarter more.
pub fn wait_before(retry: u32, asked: Option<Duration>, spread: f64) -> Duration {
    let wait = asked.unwrap_or_else(|| {
        let doublings = retry.saturating_sub(1).min(16);
        FIRST_WAIT.saturating_mul(1 << doublings)
    });
    let wait = wait.min(LONGEST_WAIT);
    wait.mul_f64(1.0 + 0.25 * spread.clamp(0.0, 1.0))
        .min(LONGEST_WAIT)
}

/// A number in `[0, 1)` that differs from process to process and call to call: the
/// spread of a wait (not security-sensitive).
pub fn spread() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let mixed =
        u64::from(nanos ^ std::process::id().rotate_left(16)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 11) as f64 / (1u64 << 53) as f64
}

/// How long to wait after failed attempt number `attempt` (1 for the first) whose
/// failure means `verdict`, before sending again; `None`: do not send again (the
/// collector may have it, refused it for good, or [`RETRIES`] retries were made).
pub fn next_wait(attempt: u32, verdict: Verdict) -> Option<Duration> {
    match verdict {
        Verdict::Again(asked) if attempt <= RETRIES => Some(wait_before(attempt, asked, spread())),
        Verdict::Again(_) | Verdict::GiveUp => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_refusing_is_tried_again_and_a_local_failure_is_not() {
        assert_eq!(
            grpc_verdict(&tonic::Status::unavailable("busy")),
            Verdict::Again(None)
        );
        assert_eq!(
            grpc_verdict(&tonic::Status::invalid_argument("bad")),
            Verdict::GiveUp
        );
        // Without a delay, RESOURCE_EXHAUSTED is final (the OTLP specification).
        assert_eq!(
            grpc_verdict(&tonic::Status::resource_exhausted("full")),
            Verdict::GiveUp
        );
        // Made here from our own timeout: the collector may have the batch.
        let timeout: Box<dyn std::error::Error + Send + Sync> = Box::new(tonic::TimeoutExpired(()));
        let status = tonic::Status::from_error(timeout);
        assert_eq!(status.code(), Code::Cancelled);
        assert_eq!(grpc_verdict(&status), Verdict::GiveUp);
        // A failed connection attempt: nothing was sent.
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let connect: Box<dyn std::error::Error + Send + Sync> =
            Box::new(tonic::ConnectError(Box::new(refused)));
        let status = tonic::Status::from_error(connect);
        assert_eq!(grpc_verdict(&status), Verdict::Again(None));
    }

    #[test]
    fn a_delay_the_collector_asks_for_is_waited() {
        use tonic_types::{ErrorDetails, StatusExt};
        let details = ErrorDetails::with_retry_info(Some(Duration::from_secs(3)));
        let status = tonic::Status::with_error_details(Code::ResourceExhausted, "full", details);
        assert_eq!(
            grpc_verdict(&status),
            Verdict::Again(Some(Duration::from_secs(3)))
        );
        assert_eq!(
            wait_before(1, Some(Duration::from_secs(3)), 0.0),
            Duration::from_secs(3)
        );
        assert_eq!(
            wait_before(1, Some(Duration::from_secs(600)), 0.0),
            LONGEST_WAIT
        );
    }

    #[test]
    fn http_answers_that_say_not_now_are_tried_again_and_nothing_else() {
        for status in [429, 502, 503, 504] {
            let answer = HttpOutcome::Answered {
                status,
                retry_after: None,
            };
            assert_eq!(http_verdict(&answer), Verdict::Again(None), "{status}");
        }
        for status in [400, 401, 404, 413, 500] {
            let answer = HttpOutcome::Answered {
                status,
                retry_after: None,
            };
            assert_eq!(http_verdict(&answer), Verdict::GiveUp, "{status}");
        }
        assert_eq!(
            http_verdict(&HttpOutcome::NotConnected),
            Verdict::Again(None)
        );
        assert_eq!(http_verdict(&HttpOutcome::Unknown), Verdict::GiveUp);
    }

    #[test]
    fn waits_double_from_the_first_up_to_the_longest_with_a_quarter_spread() {
        let waits: Vec<Duration> = (1..=RETRIES).map(|n| wait_before(n, None, 0.0)).collect();
        assert_eq!(
            waits,
            [1, 2, 4, 8].map(Duration::from_secs),
            "1 s, doubling, at most 8 s"
        );
        assert_eq!(
            wait_before(2, None, 0.999),
            Duration::from_secs(2).mul_f64(1.24975)
        );
        assert_eq!(wait_before(9, None, 0.5), LONGEST_WAIT);
        for _ in 0..100 {
            let spread = spread();
            assert!((0.0..1.0).contains(&spread), "{spread}");
        }
    }

    #[test]
    fn attempts_stop_at_a_final_failure_or_after_the_last_retry() {
        let again = Verdict::Again(None);
        let waits: Vec<Option<Duration>> = (1..=RETRIES + 1).map(|n| next_wait(n, again)).collect();
        assert!(
            waits[..RETRIES as usize].iter().all(Option::is_some),
            "{waits:?}"
        );
        assert_eq!(waits[RETRIES as usize], None, "no retry past the last");
        assert_eq!(next_wait(1, Verdict::GiveUp), None);
        let asked = next_wait(1, Verdict::Again(Some(Duration::from_secs(5))));
        assert!(asked.is_some_and(|wait| wait >= Duration::from_secs(5)));
    }
}
