//! An OTLP/gRPC trace receiver that counts what it is sent, so that the cost of exporting every span can be
//! measured against a live collector (`--otlp-receiver`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

/// Spans received so far.
#[derive(Clone, Default)]
pub struct Receiver(Arc<AtomicU64>);

impl Receiver {
    /// How many spans have arrived.
    pub fn spans(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Serves the receiver on `address` (loopback) in the background.
pub async fn start(address: SocketAddr) -> std::io::Result<Receiver> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let receiver = Receiver::default();
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await;
    });
    Ok(receiver)
}
