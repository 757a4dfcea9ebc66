//! Negotiation with the host's `RelayDiagnostics`: capabilities within 2 s, checked
//! against what the SDK accepts, then one session within 2 s with the same
//! capabilities. A host that fails any check gets an inert facade with the matching
//! availability, never an error.

use std::time::Duration;

use nemo_relay_worker_proto::v1::relay_diagnostics_client::RelayDiagnosticsClient;
use nemo_relay_worker_proto::v1::{
    DiagnosticCapabilities, DiagnosticCredentials, DiagnosticOpenRequest,
};
use tonic::transport::Channel;

/// What negotiation with the host found, independent of later delivery health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagnosticAvailability {
    /// A session is open; submissions are delivered.
    Available,
    /// The host has collection off. The facade is inert.
    Disabled,
    /// The host has no diagnostics service, or offers a protocol or limits this SDK
    /// does not accept. The facade is inert.
    Unsupported,
    /// The host could not be reached, refused the credentials, or failed. The
    /// facade is inert.
    Unavailable,
}

impl DiagnosticAvailability {
    /// The lowercase name (`available`, `disabled`, `unsupported`, `unavailable`).
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticAvailability::Available => "available",
            DiagnosticAvailability::Disabled => "disabled",
            DiagnosticAvailability::Unsupported => "unsupported",
            DiagnosticAvailability::Unavailable => "unavailable",
        }
    }
}

/// How long capabilities and the session open may take each.
pub(crate) const BOOTSTRAP_LIMIT: Duration = Duration::from_secs(2);
/// The protocol, snapshot and provenance versions this SDK speaks.
const VERSION: u32 = 1;

/// The negotiated limits the SDK holds itself to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_extensions: usize,
    pub(crate) max_metadata_bytes: usize,
    pub(crate) max_request_bytes: usize,
    pub(crate) max_correlation_bytes: usize,
    pub(crate) max_response_bytes: usize,
    pub(crate) max_pending: usize,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_timeout: Duration,
}

impl Limits {
    /// The limits of `capabilities`, or `None` when they are outside what the SDK
    /// accepts (versions 1; 258 ≤ request ≤ 16384; 256 ≤ response ≤ 131072; 1–32
    /// pending; 1–8 attempts; 0 < timeout ≤ 10000 ms).
    pub(crate) fn accept(capabilities: &DiagnosticCapabilities) -> Option<Limits> {
        let versions = (
            capabilities.protocol_version,
            capabilities.snapshot_version,
            capabilities.provenance_version,
        );
        let acceptable = versions == (VERSION, VERSION, VERSION)
            && (258..=16384).contains(&capabilities.max_request_bytes)
            && (256..=131_072).contains(&capabilities.max_response_bytes)
            && (1..=32).contains(&capabilities.max_pending_submissions)
            && (1..=8).contains(&capabilities.retry_attempts)
            && (1..=10_000).contains(&capabilities.retry_timeout_millis);
        acceptable.then(|| Limits {
            max_extensions: capabilities.max_extensions as usize,
            max_metadata_bytes: capabilities.max_metadata_bytes as usize,
            max_request_bytes: capabilities.max_request_bytes as usize,
            max_correlation_bytes: capabilities.max_correlation_bytes as usize,
            max_response_bytes: capabilities.max_response_bytes as usize,
            max_pending: capabilities.max_pending_submissions as usize,
            retry_attempts: capabilities.retry_attempts,
            retry_timeout: Duration::from_millis(u64::from(capabilities.retry_timeout_millis)),
        })
    }

    /// The largest frozen operation: the request limit less 256 bytes for the
    /// credentials, session and sequence added at send.
    pub(crate) fn max_operation_bytes(&self) -> usize {
        self.max_request_bytes.saturating_sub(256)
    }
}

/// An open session: what every submission carries, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) credentials: DiagnosticCredentials,
    pub(crate) session_id: Vec<u8>,
    pub(crate) limits: Limits,
}

/// Capabilities, then a session; otherwise the availability of an inert facade.
pub(crate) async fn negotiate(
    channel: Channel,
    credentials: DiagnosticCredentials,
) -> Result<Session, DiagnosticAvailability> {
    let mut client = RelayDiagnosticsClient::new(channel);
    let mut request = tonic::Request::new(credentials.clone());
    request.set_timeout(BOOTSTRAP_LIMIT);
    let capabilities = bounded(client.get_diagnostic_capabilities(request)).await?;
    if !capabilities.enabled {
        return Err(DiagnosticAvailability::Disabled);
    }
    let limits = Limits::accept(&capabilities).ok_or(DiagnosticAvailability::Unsupported)?;
    let mut request = tonic::Request::new(DiagnosticOpenRequest {
        credentials: Some(credentials.clone()),
        protocol_version: VERSION,
        snapshot_version: VERSION,
        provenance_version: VERSION,
    });
    request.set_timeout(BOOTSTRAP_LIMIT);
    let session = bounded(client.open_diagnostic_session(request)).await?;
    if session.capabilities.as_ref() != Some(&capabilities) || session.session_id.len() != 16 {
        return Err(DiagnosticAvailability::Unsupported);
    }
    Ok(Session {
        credentials,
        session_id: session.session_id,
        limits,
    })
}

/// One bootstrap call within [`BOOTSTRAP_LIMIT`]: `UNIMPLEMENTED` means the host has
/// no diagnostics (unsupported); any other failure, unavailable.
async fn bounded<T>(
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, DiagnosticAvailability> {
    match tokio::time::timeout(BOOTSTRAP_LIMIT, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => {
            Err(DiagnosticAvailability::Unsupported)
        }
        Ok(Err(_)) | Err(_) => Err(DiagnosticAvailability::Unavailable),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The reference host's capabilities with `pending` queue slots.
    pub(crate) fn capabilities(pending: u32) -> DiagnosticCapabilities {
        DiagnosticCapabilities {
            protocol_version: 1,
            snapshot_version: 1,
            catalogue_version: 1,
            enabled: true,
            can_read_context: false,
            max_components: 8,
            max_extensions: 16,
            max_metadata_bytes: 16 * 1024,
            max_request_bytes: 16 * 1024,
            max_detail_bytes: 1024,
            max_correlation_bytes: 1024,
            max_response_bytes: 128 * 1024,
            max_pending_submissions: pending,
            retry_attempts: 3,
            retry_timeout_millis: 2000,
            provenance_version: 1,
        }
    }

    /// Limits as negotiated from [`capabilities`].
    pub(crate) fn limits(pending: u32) -> Limits {
        Limits::accept(&capabilities(pending)).expect("the reference host's values")
    }

    #[test]
    fn capabilities_outside_the_sdk_bounds_are_not_accepted() {
        let accepted = limits(32);
        assert_eq!(accepted.max_pending, 32);
        assert_eq!(accepted.retry_attempts, 3);
        assert_eq!(accepted.retry_timeout, Duration::from_millis(2000));
        assert_eq!(accepted.max_operation_bytes(), 16 * 1024 - 256);
        type Change = fn(&mut DiagnosticCapabilities);
        let changes: [(&str, Change); 9] = [
            ("protocol 2", |c| c.protocol_version = 2),
            ("provenance 0", |c| c.provenance_version = 0),
            ("request 257", |c| c.max_request_bytes = 257),
            ("request 16385", |c| c.max_request_bytes = 16385),
            ("response 255", |c| c.max_response_bytes = 255),
            ("pending 0", |c| c.max_pending_submissions = 0),
            ("pending 33", |c| c.max_pending_submissions = 33),
            ("attempts 9", |c| c.retry_attempts = 9),
            ("timeout 0", |c| c.retry_timeout_millis = 0),
        ];
        for (what, change) in changes {
            let mut offered = capabilities(32);
            change(&mut offered);
            assert_eq!(Limits::accept(&offered), None, "{what}");
        }
    }
}
