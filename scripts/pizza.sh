#!/usr/bin/env bash
# Builds and runs the pizza server on its default (embedded) storage; extra arguments go to the server, e.g.
#   ./scripts/pizza.sh --secure-port 8443 --storage-backend sqlite
# Installs the build's system packages first when run as root; otherwise says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh
ensure_packages "${BUILD_PACKAGES[@]}"
exec cargo run --locked -p pizza-apiserver -- "$@"
