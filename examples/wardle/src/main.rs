//! `wardle-apiserver`: serves `wardle.example.com` over HTTPS until SIGINT or SIGTERM.

apiserver::main!(wardle_apiserver::server::start);
