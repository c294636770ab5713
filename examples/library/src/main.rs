//! `library-apiserver`: serves `library.example.com` until SIGINT or SIGTERM.

apiserver::main!(library_apiserver::start);
