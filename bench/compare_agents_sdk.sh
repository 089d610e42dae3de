#!/usr/bin/env bash
# spool's store against the OpenAI Agents SDK's SQLiteSession:
# installs openai-agents into a throwaway virtualenv, runs workloads (a)-(d)
# on SQLiteSession with its defaults, runs `spool bench store` (release
# build), and prints one table. Both sides write their store files to the
# same temp directory, so the same filesystem.
#
# Usage: bench/compare_agents_sdk.sh [--runs N] [--quick] [--save DIR]
#                                    [--spool-workloads a,b,...]
#   --runs N        runs per workload, median reported (default 3)
#   --quick         tiny sizes: checks the pipeline, numbers mean nothing
#   --save DIR      also keep both JSON reports (sdk.json, spool.json) in DIR
#   --spool-workloads LIST   spool's workloads (default a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r)
# Environment: AGENTS_VERSION (default below), PYTHON (default python3),
#              TMPDIR (where the temp directory goes).
set -euo pipefail

# The version this script was verified with; override to try another.
AGENTS_VERSION="${AGENTS_VERSION:-0.24.0}"
PYTHON="${PYTHON:-python3}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

die() {
    echo "compare_agents_sdk: $*" >&2
    exit 1
}

runs=3
quick=()
save=""
spool_workloads="a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) [[ $# -ge 2 ]] || die "--runs needs a number"; runs="$2"; shift 2 ;;
        --quick) quick=(--quick); shift ;;
        --save) [[ $# -ge 2 ]] || die "--save needs a directory"; save="$2"; shift 2 ;;
        --spool-workloads) [[ $# -ge 2 ]] || die "--spool-workloads needs a list"
            spool_workloads="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $1 (try --help)" ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, got '$runs'"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs)"

work="$(mktemp -d "${TMPDIR:-/tmp}/spool-compare.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/stores"

echo "== virtualenv with openai-agents==$AGENTS_VERSION (in $work)" >&2
"$PYTHON" -m venv "$work/venv" \
    || die "'$PYTHON -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "openai-agents==$AGENTS_VERSION" \
    || die "pip could not install openai-agents==$AGENTS_VERSION (is PyPI reachable?)"
installed="$("$work/venv/bin/python" -c \
    'import importlib.metadata as m; print(m.version("openai-agents"))')"
echo "   installed openai-agents $installed" >&2

echo "== Agents SDK SQLiteSession: workloads a,b,c,d" >&2
"$work/venv/bin/python" "$here/agents_sdk_bench.py" \
    --dir "$work/stores" --runs "$runs" "${quick[@]}" >"$work/sdk.json" \
    || die "the Agents SDK benchmark failed (see above)"

# The build lives outside the clone, where `.ci/run` keeps it (and reuses it).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spool/target}"
echo "== building spool (release)" >&2
(cd "$root" && cargo build --release -p spool-cli) || die "cargo build failed"
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
spool="$target_dir/release/spool"
[[ -x "$spool" ]] || die "no spool binary at $spool after the build"

echo "== spool bench store: workloads $spool_workloads" >&2
"$spool" bench store --workloads "$spool_workloads" --runs "$runs" \
    --dir "$work/stores" "${quick[@]}" >"$work/spool.json" \
    || die "spool bench store failed (see above)"

if [[ -n "$save" ]]; then
    mkdir -p "$save"
    cp "$work/sdk.json" "$work/spool.json" "$save/"
    echo "   reports saved in $save" >&2
fi
echo >&2
"$PYTHON" "$here/compare_table.py" "$work/sdk.json" "$work/spool.json"
