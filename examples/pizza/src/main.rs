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
    // Written without panicking: a server must not die because whoever started it closed its stdout.
    let banner = format!(
        "pizza-apiserver serving on {} (storage: {backend:?}); kubeconfig: {}\nmode: {}\ntry: kubectl --kubeconfig {} api-resources\n",
        started.url,
        started.kubeconfig.display(),
        started.mode,
        started.kubeconfig.display()
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout(), banner.as_bytes());
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
