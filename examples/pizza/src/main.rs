//! `pizza-apiserver`: serves `restaurant.programming-kubernetes.info` over HTTPS until SIGINT or SIGTERM.

/// mimalloc: glibc's malloc and free were the largest item of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

apiserver::main!(pizza_apiserver::server::start);
