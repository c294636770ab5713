#!/usr/bin/env bash
# Keeps a reused target directory from filling the disk: of the test and binary executables in debug/deps, only the
# newest of each name stays (every source change leaves a new one behind, a few hundred MiB each). Cargo rebuilds
# whatever it still needs. trybuild's own target directory (tests/trybuild) is pruned the same way: it keeps a
# library of the crate per source change too.
set -euo pipefail
target="${1:?usage: prune-target.sh TARGET_DIR}"

prune_deps() {
  local deps="$1"
  [ -d "$deps" ] || return 0
  cd "$deps"
  # Executables have no extension; their names end in -<hash>. Newest first per name, drop the rest.
  find . -maxdepth 1 -type f -perm -u+x ! -name '*.*' -printf '%T@ %f\n' \
    | awk '{ name = $2; sub(/-[0-9a-f]+$/, "", name); print name, $1, $2 }' \
    | sort -k1,1 -k2,2nr \
    | awk 'seen[$1]++ { print $3 }' \
    | xargs -r rm -f --
  # An executable whose test target is gone (files merged into one binary, a test renamed) has no newer one to
  # replace it: any executable untouched for a week goes (cargo relinks one it still needs).
  find . -maxdepth 1 -type f -perm -u+x ! -name '*.*' -mtime +7 -delete
  # The workspace's own libraries get new hashes whenever the checkout moves (a fresh clone elsewhere) or the source
  # changes: of those, too, only the newest two of each kind stay (a crate may be built with and without its
  # `testing` feature).
  for crate in apiserver apiserver_derive apiserver_storage apiserver_storage_etcd apiserver_storage_sql \
    apiserver_storage_rocks apiserver_backends pizza_apiserver apiserver_bench apiserver_cel apiserver_tests \
    apiserver_fuzz apiserver_gotext library_apiserver \
    wardle_apiserver inventory_apiserver; do
    for ext in rlib rmeta so; do
      { ls -t "lib${crate}"-*."${ext}" 2>/dev/null || true; } | tail -n +3 | xargs -r rm -f --
    done
  done
}

prune_deps "$target/debug/deps"
prune_deps "$target/afl/debug/deps"
prune_deps "$target/tests/trybuild/x86_64-unknown-linux-gnu/debug/deps"
