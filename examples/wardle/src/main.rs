//! `wardle-apiserver`: serves `wardle.example.com` over HTTPS until SIGINT or SIGTERM.

use std::process::ExitCode;

use apiserver::clap::Parser;
use wardle_apiserver::server::{Options, start};

#[apiserver::tokio::main(crate = "apiserver::tokio")]
async fn main() -> ExitCode {
    let options = Options::parse();
    let server = options.server.clone();
    apiserver::app::main("wardle-apiserver", &server, start(options)).await
}
