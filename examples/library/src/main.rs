//! `library-apiserver`: serves `library.example.com` until SIGINT or SIGTERM.

use apiserver::clap::Parser;
use library_apiserver::{Options, start};

#[apiserver::tokio::main(crate = "apiserver::tokio")]
async fn main() -> std::process::ExitCode {
    let options = Options::parse();
    apiserver::app::main("library-apiserver", &options.server.clone(), start(options)).await
}
