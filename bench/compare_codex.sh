#!/usr/bin/env bash
# spool's live path against Codex's app server, on the same streams in the
# same run: fetches Codex (the openai-codex-cli-bin wheel from PyPI, cached
# in ~/.cache/spool/codex-cli-bin), builds spool in release, runs
# `spool bench live --codex-bin …` (spool and Codex alternate workload by
# workload, over stdio and WebSocket), and prints one table with ratios.
#
# Usage: bench/compare_codex.sh [--quick] [--save FILE] [-- ARGS for bench live]
#   --quick      small sizes: checks the pipeline, numbers mean nothing
#   --save FILE  also keep the JSON report
# Each reply length is timed over 3 turns (the median rate, the mean CPU),
# unless ARGS say `--runs`, and shorter replies over as many turns as
# stream 20,000 deltas in all: a 2,000-delta turn streams for ~10 ms, which
# a few turns time too coarsely to compare.
# Environment: CODEX_VERSION (default below), PYTHON (default python3).
set -euo pipefail

CODEX_VERSION="${CODEX_VERSION:-0.163.0}"
PYTHON="${PYTHON:-python3}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
die() { echo "compare_codex: $*" >&2; exit 1; }

quick=()
save=""
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick=(--deltas 200,2000 --streams 10 --paced-deltas 50); shift ;;
        --save) [[ $# -ge 2 ]] || die "--save needs a file"; save="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $1 (try --help)" ;;
    esac
done
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs)"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/spool/codex-cli-bin/$CODEX_VERSION"
codex="$cache/codex_cli_bin/bin/codex"
if [[ "$("$codex" --version 2>/dev/null || true)" != "codex-cli $CODEX_VERSION" ]]; then
    echo "== fetching openai-codex-cli-bin==$CODEX_VERSION into $cache" >&2
    rm -rf "$cache" && mkdir -p "$cache/wheel"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: "openai-codex-cli-bin==$CODEX_VERSION" -d "$cache/wheel" \
        || die "pip could not download openai-codex-cli-bin==$CODEX_VERSION (is PyPI reachable?)"
    "$PYTHON" - "$cache" <<'PY'
import glob, os, stat, sys, zipfile
cache = sys.argv[1]
wheel, = glob.glob(os.path.join(cache, "wheel", "*.whl"))
with zipfile.ZipFile(wheel) as z:
    z.extractall(cache)
for path in glob.glob(os.path.join(cache, "codex_cli_bin", "bin", "*")):
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
    rm -rf "$cache/wheel"
    [[ "$("$codex" --version)" == "codex-cli $CODEX_VERSION" ]] \
        || die "the wheel's codex is not $CODEX_VERSION: $("$codex" --version)"
fi

# The build lives outside the clone, where `.ci/run` keeps it (and reuses it).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spool/target}"
echo "== building spool (release)" >&2
(cd "$root" && cargo build --release --quiet -p spool-cli)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
spool="$target_dir/release/spool"

report="$(mktemp "${TMPDIR:-/tmp}/spool-live.XXXXXX.json")"
trap 'rm -f "$report"' EXIT
echo "== spool bench live, spool and codex $CODEX_VERSION alternating" >&2
runs=(--runs 3)
if [[ ${#quick[@]} -gt 0 ]]; then runs=(); fi
for arg in "${extra[@]}"; do
    if [[ "$arg" == --runs* ]]; then runs=(); fi
done
"$spool" bench live --codex-bin "$codex" "${runs[@]}" "${quick[@]}" "${extra[@]}" > "$report"
[[ -z "$save" ]] || cp "$report" "$save"
"$PYTHON" "$here/live_table.py" "$report"
