//! `pizza-apiserver`: serves `restaurant.programming-kubernetes.info` over HTTPS until SIGINT or SIGTERM.

use std::process::ExitCode;

use apiserver::clap::Parser;
use pizza_apiserver::server::{Options, start};

/// mimalloc: glibc's malloc and free were the largest item of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[apiserver::tokio::main(crate = "apiserver::tokio")]
async fn main() -> ExitCode {
    let options = Options::parse();
    let server = options.server.clone();
    apiserver::app::main("pizza-apiserver", &server, start(options)).await
}
