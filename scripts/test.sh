#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy, and the whole test suite.
# Installs the system packages the build and the tests need when run as root (CI); otherwise says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh
source scripts/envtest.sh
# Tests also start real etcd and Postgres servers and drive the server with kubectl (installed on the machine);
# xz-utils unpacks the envtest binaries; jq is in a recorded kubectl sequence the managedFields golden test replays.
ensure_packages "${BUILD_PACKAGES[@]}" etcd-server postgresql-15 python3-venv xz-utils jq

# A real kube-apiserver and etcd for the envtest tests (core/tests/framework/envtest.rs): KUBEBUILDER_ASSETS, or
# unpacked from ../shared/envtest next to the build.
ensure_envtest_assets "${CARGO_TARGET_DIR:-target}"

# The official Kubernetes Python client, for tests/e2e/python_client.rs, and cbor2 (a CBOR codec that is not ours) for
# tests/e2e/cbor.rs, in a virtualenv next to the build.
PYTHON_CLIENT_VENV="$(realpath -m "${CARGO_TARGET_DIR:-target}")/python-client"
if ! "$PYTHON_CLIENT_VENV/bin/python" -c 'import kubernetes, cbor2' 2>/dev/null; then
  python3 -m venv "$PYTHON_CLIENT_VENV"
  "$PYTHON_CLIENT_VENV/bin/pip" install -q 'kubernetes==37.0.2' 'cbor2==6.2.1'
fi
export PIZZA_TEST_PYTHON="$PYTHON_CLIENT_VENV/bin/python"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The workspace unifies features (everything on); the framework without its default features (what a minimal
# server builds) is checked on its own, in a target directory of its own so the shared one is not rebuilt.
CARGO_TARGET_DIR="$(realpath -m "${CARGO_TARGET_DIR:-target}")-min" \
  cargo clippy -p apiserver --no-default-features --lib --locked -- -D warnings
# The documentation is part of the product: broken links and bad markup fail the build.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
cargo test --workspace --locked
# Coverage-guided fuzzing (fuzz/, AFL++ through cargo-afl): every target for a few seconds; a crash fails the build.
# The instrumented build lives in $CARGO_TARGET_DIR/afl, cargo-afl and AFL++ in $CARGO_TARGET_DIR/fuzz-tools.
./scripts/fuzz.sh all "${FUZZ_SECONDS:-6}"
# The benchmark harness in quick mode, the server as its own process (the debug build the tests just made).
cargo run --locked -q -p apiserver-bench -- --quick --backends rocksdb,memory,sqlite,postgres,etcd
