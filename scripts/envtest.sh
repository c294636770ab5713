# Sourced by test.sh: points KUBEBUILDER_ASSETS at a directory holding `kube-apiserver` and `etcd`, the convention of
# controller-runtime's envtest that `apiserver::envtest` follows.
#
# When KUBEBUILDER_ASSETS is already set (e.g. by `setup-envtest use -p path`), it is used as is. Otherwise the two
# binaries are unpacked from the xz files kept beside this repository (`../shared/envtest`, see its README) into a
# cache directory next to the build, once; they are unpacked again only when an .xz file is newer.
#
# Usage: ensure_envtest_assets TARGET_DIR
ensure_envtest_assets() {
  local target_dir="$1"
  if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    local b
    for b in kube-apiserver etcd; do
      if [ ! -x "$KUBEBUILDER_ASSETS/$b" ]; then
        echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no executable $b" >&2
        exit 1
      fi
    done
    return
  fi
  local src
  src="$(dirname "$(pwd -P)")/shared/envtest"
  local bin
  bin="$(realpath -m "$target_dir")/envtest-bin"
  local b
  for b in kube-apiserver etcd; do
    if [ ! -f "$src/$b.xz" ]; then
      echo "the envtest tests need kube-apiserver and etcd: set KUBEBUILDER_ASSETS to a directory holding both" \
        "(e.g. \`setup-envtest use -p path\`), or put kube-apiserver.xz and etcd.xz in $src ($src/$b.xz is missing)" >&2
      exit 1
    fi
  done
  mkdir -p "$bin"
  for b in kube-apiserver etcd; do
    if [ ! -x "$bin/$b" ] || [ "$src/$b.xz" -nt "$bin/$b" ]; then
      # Unpack beside the target and rename, so an interrupted run never leaves a truncated binary behind.
      xz -dc "$src/$b.xz" >"$bin/$b.partial"
      chmod +x "$bin/$b.partial"
      mv -f "$bin/$b.partial" "$bin/$b"
    fi
  done
  export KUBEBUILDER_ASSETS="$bin"
}
