#!/usr/bin/env bash
# Coverage-guided fuzzing of spool's parsers with cargo-fuzz (libFuzzer, nightly Rust); the
# targets and what each asserts are in docs/internals/fuzzing.md.
#
#   scripts/fuzz.sh install                  # cargo-fuzz into ~/.cache/spool/cargo-fuzz, if missing
#   scripts/fuzz.sh run [SECONDS] [TARGET…]  # build, then run each target SECONDS (default 20)
#   scripts/fuzz.sh list                     # the targets
#
# `run` installs what is missing first. Each target's corpus lives outside the clone, in
# ~/.cache/spool/fuzz-corpus/<target>, seeded from fuzz/seeds/<target> (so runs build on each
# other); crash inputs go to fuzz/artifacts/<target>/ (ignored by git). The build directory is
# "${CARGO_TARGET_DIR:-~/.cache/spool/target}-fuzz", apart from the main build's.
#
# Exit code: 0 when every target ran its time without a crash, timeout or OOM; otherwise 1, after
# running the remaining targets, with each failing input's path printed. Reproduce one with
#   cargo +nightly fuzz run <target> <artifact path>
# using the cargo-fuzz this script installs (~/.cache/spool/cargo-fuzz/bin on PATH).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cache="$HOME/.cache/spool"
fuzz_root="$cache/cargo-fuzz"
cargo_fuzz_version="0.13.2"
targets=(jsonrpc_line sse provider_events run_state apply_patch)
# Every target runs with these: a slow input or a runaway allocation is a failure too.
libfuzzer_flags=(-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1)

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}-fuzz"
export PATH="$fuzz_root/bin:$PATH"

install() {
  if ! cargo +nightly --version >/dev/null 2>&1; then
    command -v rustup >/dev/null 2>&1 || {
      echo "fuzz.sh: the nightly toolchain is missing and rustup is not available" >&2
      return 1
    }
    echo "fuzz.sh: installing the nightly toolchain (rustup toolchain install nightly)" >&2
    rustup toolchain install nightly --profile minimal
  fi
  if [[ "$("$fuzz_root/bin/cargo-fuzz" --version 2>/dev/null)" == "cargo-fuzz $cargo_fuzz_version" ]]; then
    return 0
  fi
  echo "fuzz.sh: installing cargo-fuzz $cargo_fuzz_version into $fuzz_root" >&2
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version" --root "$fuzz_root"
}

# The last value libFuzzer reported for `name` in a log (`cov`, `ft`, or a final
# `stat::…`); empty if there is none.
stat() {
  { grep -oE "(^|[[:space:]])$1:[[:space:]]+[0-9]+" "$2" || true; } | tail -n 1 | awk '{print $NF}'
}

run() {
  local seconds="${1:-20}"
  shift || true
  local selected=("$@")
  ((${#selected[@]})) || selected=("${targets[@]}")
  [[ "$seconds" =~ ^[0-9]+$ ]] || {
    echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2
    return 2
  }
  install
  echo "fuzz.sh: building ${selected[*]} (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
  cargo +nightly fuzz build

  local failed=() summary=()
  mkdir -p "$cache/fuzz-logs"
  for target in "${selected[@]}"; do
    local corpus="$cache/fuzz-corpus/$target" artifacts="fuzz/artifacts/$target"
    local log="$cache/fuzz-logs/$target.log"
    mkdir -p "$corpus" "$artifacts"
    cp -n fuzz/seeds/"$target"/* "$corpus"/ 2>/dev/null || true
    local start="$cache/fuzz-logs/.start-$target"
    touch "$start"
    echo "==> fuzz $target for ${seconds}s (corpus $corpus, log $log)" >&2
    local rc=0
    cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$seconds" \
      "${libfuzzer_flags[@]}" >"$log" 2>&1 || rc=$?
    local runs cov ft speed
    runs=$(stat stat::number_of_executed_units "$log")
    cov=$(stat cov "$log")
    ft=$(stat ft "$log")
    speed=$(stat stat::average_exec_per_sec "$log")
    if ((rc == 0)); then
      summary+=("ok      $target: ${runs:-?} execs, ${speed:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}")
    else
      tail -n 60 "$log" >&2
      local artifact
      artifact=$(find "$artifacts" -type f -newer "$start" | head -n 1)
      summary+=("FAILED  $target (exit $rc): artifact ${artifact:-none written; see $log}")
      failed+=("$target")
    fi
  done
  echo
  echo "==> fuzz summary (${seconds}s per target)"
  local line
  for line in "${summary[@]}"; do echo "    $line"; done
  ((${#failed[@]} == 0))
}

case "${1:-}" in
  install) install ;;
  run)
    shift
    run "$@"
    ;;
  list) printf '%s\n' "${targets[@]}" ;;
  *)
    echo "usage: scripts/fuzz.sh install | run [SECONDS] [TARGET…] | list" >&2
    exit 2
    ;;
esac
