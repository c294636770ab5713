//! `pizza-apiserver`: serves `restaurant.programming-kubernetes.info` over HTTPS until SIGINT or SIGTERM.

use std::process::ExitCode;

use clap::Parser;
use pizza_apiserver::server::{Options, start};

/// mimalloc: glibc's malloc and free were the largest item of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let options = Options::parse();
    let telemetry = match options.tracing.start() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("pizza-apiserver: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::registry()
        .with(options.logging.layer(&["pizza_apiserver"]))
        .with(telemetry.as_ref().map(|t| t.layer()))
        .init();
    let backend = options.storage_backend;
    let started = match start(options).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("pizza-apiserver: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "pizza-apiserver serving on {} (storage: {backend:?}); kubeconfig: {}",
        started.url,
        started.kubeconfig.display()
    );
    println!("mode: {}", started.mode);
    println!(
        "try: kubectl --kubeconfig {} api-resources",
        started.kubeconfig.display()
    );
    let result = started.server.run_until_signal().await;
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pizza-apiserver: {e}");
            ExitCode::FAILURE
        }
    }
}
