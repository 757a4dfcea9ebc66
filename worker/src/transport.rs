//! How bytes reach the host: a gRPC channel to the endpoint (a Unix socket or
//! loopback TCP), and
//! `SubmitDiagnostic` sent as already-encoded bytes, so that a retry is the same
//! request byte for byte (tonic's generated client would re-encode the message).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use nemo_relay_worker_proto::v1::DiagnosticReceipt;
use prost::bytes::{BufMut, Bytes};
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic_prost::ProstDecoder;

use crate::delivery::Submitter;

const SUBMIT_DIAGNOSTIC: &str = "/nemo.relay.worker.v1.RelayDiagnostics/SubmitDiagnostic";

/// A channel to `endpoint`, connected on first use and reconnected after a failure
/// (over a Unix socket the authority is a placeholder). Call inside a Tokio runtime.
pub(crate) fn channel(endpoint: &crate::endpoint::Endpoint) -> Channel {
    match endpoint {
        crate::endpoint::Endpoint::Unix(path) => {
            let path = path.clone();
            Endpoint::from_static("http://localhost")
                .connect_timeout(Duration::from_secs(2))
                .connect_with_connector_lazy(tower::service_fn(move |_| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
        }
        crate::endpoint::Endpoint::Tcp(address) => {
            // A `SocketAddr` always makes a valid `http://` URI.
            Endpoint::from_shared(format!("http://{address}"))
                .unwrap_or_else(|_| Endpoint::from_static("http://127.0.0.1:0"))
                .connect_timeout(Duration::from_secs(2))
                .connect_lazy()
        }
    }
}

/// `SubmitDiagnostic` over a channel, request bytes as given.
#[derive(Debug, Clone)]
pub(crate) struct GrpcSubmitter {
    channel: Channel,
}

impl GrpcSubmitter {
    pub(crate) fn new(channel: Channel) -> GrpcSubmitter {
        GrpcSubmitter { channel }
    }
}

impl Submitter for GrpcSubmitter {
    fn submit(
        &self,
        request: Bytes,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<DiagnosticReceipt, tonic::Status>> + Send + '_>> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        Box::pin(async move {
            grpc.ready()
                .await
                .map_err(|error| tonic::Status::unavailable(error.to_string()))?;
            let mut request = tonic::Request::new(request);
            request.set_timeout(deadline);
            grpc.unary(
                request,
                PathAndQuery::from_static(SUBMIT_DIAGNOSTIC),
                RawSubmissionCodec,
            )
            .await
            .map(tonic::Response::into_inner)
        })
    }
}

/// Encodes pre-encoded submission bytes as they are; decodes receipts with prost.
#[derive(Debug, Clone, Copy, Default)]
struct RawSubmissionCodec;

impl Codec for RawSubmissionCodec {
    type Encode = Bytes;
    type Decode = DiagnosticReceipt;
    type Encoder = RawEncoder;
    type Decoder = ProstDecoder<DiagnosticReceipt>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> ProstDecoder<DiagnosticReceipt> {
        ProstDecoder::default()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, buffer: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        buffer.put_slice(&item);
        Ok(())
    }
}
