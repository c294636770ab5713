#!/usr/bin/env bash
# Builds and runs the pizza server on its default storage (SQLite, embedded); extra arguments go to the server, e.g.
#   ./scripts/pizza.sh --secure-port 8443 --storage-backend memory
# Only the default features are built (no RocksDB, no etcd client: a C compiler is all it needs); for RocksDB:
#   cargo run --locked -p pizza-apiserver --features rocksdb -- --storage-backend rocksdb
# Installs the build's system packages first when run as root; otherwise says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh
ensure_packages "${PIZZA_PACKAGES[@]}"
exec cargo run --locked -p pizza-apiserver -- "$@"
