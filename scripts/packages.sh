# Sourced by the other scripts: installs missing Debian packages when run as root, else says what is missing.
# Usage: ensure_packages pkg...
ensure_packages() {
  local missing=()
  for p in "$@"; do
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
}

# What building the workspace needs: protoc for etcd-client, libclang for RocksDB's bindings, a C/C++ toolchain.
BUILD_PACKAGES=(protobuf-compiler libprotobuf-dev build-essential libclang-dev clang)
# What the pizza server's default build (SQLite, no RocksDB or etcd client) needs: a C compiler (SQLite, ring).
PIZZA_PACKAGES=(build-essential)
