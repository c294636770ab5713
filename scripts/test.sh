#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy, and the whole test suite.
# Installs the system packages the tests need when run as root (CI); otherwise says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(protobuf-compiler libprotobuf-dev etcd-server postgresql-15 build-essential libclang-dev clang)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "missing system packages: ${missing[*]} (run: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
