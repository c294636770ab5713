#!/usr/bin/env bash
# Coverage-guided fuzzing with AFL++ (through cargo-afl, on the stable toolchain).
#
#   scripts/fuzz.sh TARGET [SECONDS]   fuzz one target (default 60 s), seeded with fuzz/corpus/TARGET
#   scripts/fuzz.sh all [SECONDS]      every target in turn, SECONDS each
#   scripts/fuzz.sh list               the targets' names
#   scripts/fuzz.sh build              only build the harness (prints its path)
#
# Prints the executions per target; exits non-zero when a target crashed (a panic, an abort or a stack overflow),
# with the crashing inputs copied to fuzz/crashes/TARGET/ (replay one with
# `cargo test -p apiserver-fuzz` after moving it to fuzz/regressions/TARGET/).
#
# cargo-afl and AFL++'s runtime are installed on first use under $CARGO_TARGET_DIR/fuzz-tools (or target/); the
# instrumented build is in $CARGO_TARGET_DIR/afl, apart from the ordinary builds (its RUSTFLAGS differ).
# FUZZ_JOBS=N runs N AFL++ instances per target (one main, the rest secondary; default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/fuzz.sh TARGET|all|list|build [SECONDS]" >&2
  exit 2
}
target="${1:-}"
[ -n "$target" ] || usage
seconds="${2:-60}"
jobs="${FUZZ_JOBS:-1}"
repo="$(pwd)"
base="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
tools="$base/fuzz-tools"
afl_version=0.18.2
export PATH="$tools/bin:$PATH"
# cargo-afl keeps AFL++ (built for the toolchain in use) under $XDG_DATA_HOME/afl.rs.
export XDG_DATA_HOME="$tools/share"

ensure_afl() {
  if ! cargo afl --version 2>/dev/null | grep -q "$afl_version"; then
    echo "fuzz: installing cargo-afl $afl_version into $tools" >&2
    CARGO_TARGET_DIR="$tools/build" cargo install --locked --root "$tools" --version "$afl_version" cargo-afl
  fi
  # AFL++ as cargo-afl builds it for this toolchain: rustc-<release>-<commit>/afl.rs-<version>/.
  local rustc_dir
  rustc_dir="rustc-$(rustc -vV | sed -n 's/^release: //p')-$(rustc -vV | sed -n 's/^commit-hash: \(.......\).*/\1/p')"
  afl_fuzz="$XDG_DATA_HOME/afl.rs/$rustc_dir/afl.rs-$afl_version/afl/bin/afl-fuzz"
  if [ ! -x "$afl_fuzz" ]; then
    echo "fuzz: building AFL++" >&2
    cargo afl config --build --force
  fi
}

# The harness binary: one executable, the target named on its command line. Optimised (AFL_OPT_LEVEL) with debug
# assertions and overflow checks (cargo-afl's flags), built in parallel codegen units to keep CI's build short.
build() {
  ensure_afl
  echo "fuzz: building the instrumented harness" >&2
  AFL_OPT_LEVEL="${AFL_OPT_LEVEL:-2}" RUSTFLAGS="-C codegen-units=16" CARGO_TARGET_DIR="$base/afl" \
    cargo afl build --locked -q -p apiserver-fuzz --features afl --bin apiserver-fuzz >&2
  harness="$base/afl/debug/apiserver-fuzz"
  # The coverage map the harness needs (larger than AFL++'s default); afl-fuzz refuses to guess it.
  AFL_MAP_SIZE="$(AFL_DUMP_MAP_SIZE=1 "$harness" list || true)"
  export AFL_MAP_SIZE
}

targets() {
  sed -n 's/^    ("\([a-z_]*\)", targets::.*/\1/p' fuzz/src/lib.rs
}

if [ "$target" = list ]; then
  targets
  exit 0
fi

# Runs one target for $seconds; prints "TARGET EXECS"; returns 1 on crashes.
run() {
  local name="$1"
  [ -d "fuzz/corpus/$name" ] || { echo "fuzz: no target $name (see scripts/fuzz.sh list)" >&2; return 2; }
  local out="$base/fuzz-out/$name"
  rm -rf "$out"
  mkdir -p "$out"
  # Seeds: the corpus and the past crashes.
  local seeds="$out/seeds"
  mkdir -p "$seeds"
  cp fuzz/corpus/"$name"/* "$seeds"/
  if [ -d "fuzz/regressions/$name" ]; then cp fuzz/regressions/"$name"/* "$seeds"/ 2>/dev/null || true; fi
  local pids=()
  for ((i = 0; i < jobs; i++)); do
    local role=(-M main)
    ((i == 0)) || role=(-S "secondary$i")
    # afl-fuzz itself, not `cargo afl fuzz`: that adds `-c0` (CmpLog), which needs LLVM plugins and a nightly
    # toolchain, and without them every input times out.
    AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_FAST_CAL=1 \
      "$afl_fuzz" "${role[@]}" -V "$seconds" -t 5000 -i "$seeds" -o "$out/afl" -- "$harness" "$name" \
      >"$out/afl-$i.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  local execs=0 crashes=0 hangs=0
  for stats in "$out"/afl/*/fuzzer_stats; do
    [ -f "$stats" ] || continue
    execs=$((execs + $(sed -n 's/^execs_done *: *//p' "$stats")))
  done
  crashes=$(find "$out"/afl/*/crashes -type f -name 'id:*' 2>/dev/null | wc -l)
  hangs=$(find "$out"/afl/*/hangs -type f -name 'id:*' 2>/dev/null | wc -l)
  if ((status != 0)) && [ ! -f "$out/afl/main/fuzzer_stats" ]; then
    echo "fuzz: afl-fuzz failed for $name:" >&2
    tail -n 30 "$out/afl-0.log" >&2
    return 1
  fi
  printf '%-16s %12d execs  %d crashes  %d hangs\n' "$name" "$execs" "$crashes" "$hangs"
  if ((hangs > 0)); then
    echo "fuzz: $name: inputs that ran over 5 s are in $out/afl/*/hangs/" >&2
  fi
  if ((crashes > 0)); then
    mkdir -p "fuzz/crashes/$name"
    find "$out"/afl/*/crashes -type f -name 'id:*' -exec cp {} "fuzz/crashes/$name/" \;
    echo "fuzz: $name crashed; the inputs are in $repo/fuzz/crashes/$name/" >&2
    return 1
  fi
}

build
if [ "$target" = build ]; then
  echo "$harness"
  exit 0
fi
failed=()
if [ "$target" = all ]; then
  for name in $(targets); do
    run "$name" || failed+=("$name")
  done
else
  run "$target" || failed+=("$target")
fi
if ((${#failed[@]})); then
  echo "fuzz: crashes in: ${failed[*]}" >&2
  exit 1
fi
