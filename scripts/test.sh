#!/usr/bin/env bash
# The test command (see README): runs the whole workspace's tests with cargo-nextest against a
# real local model server. Starts the server with scripts/local-model.sh (setting it up on the
# first run), exports SPOOL_LOCAL_MODEL_URL for the end-to-end tests, and stops the server on
# exit only if this script started it; likewise a real PostgreSQL (scripts/postgres.sh, which
# installs Debian's package on a fresh machine), whose URL it exports as SPOOL_TEST_POSTGRES_URL.
# Installs the Codex clients the compatibility tests drive
# (scripts/codex-peers.sh: the Python SDK and the TUI, cached in ~/.cache/spool/peers) and finds
# Codex's protocol schema (scripts/codex-schema.sh), and the headless Chromium of the trace
# viewer's tests (scripts/browser.sh). Extra arguments go to `cargo nextest run`.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -p spool-store  # one crate
#
# The exit code is nextest's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test.sh: cargo-nextest is missing; installing it (cargo install cargo-nextest --locked)" >&2
  cargo install cargo-nextest --locked
fi

model=scripts/local-model.sh
postgres=scripts/postgres.sh
started_model=0
started_postgres=0
# Decided before `start`, so a server that fails half-way through starting is stopped too.
"$model" status >/dev/null || started_model=1
"$postgres" status >/dev/null 2>&1 || started_postgres=1

# shellcheck disable=SC2317  # invoked by the EXIT trap
stop_servers() {
  if ((started_model)); then
    "$model" stop || echo "test.sh: warning: could not stop the local model server" >&2
  fi
  if ((started_postgres)); then
    "$postgres" stop || echo "test.sh: warning: could not stop PostgreSQL" >&2
  fi
}
trap stop_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/codex-peers.sh install >&2
scripts/codex-schema.sh >/dev/null
scripts/browser.sh >/dev/null

SPOOL_LOCAL_MODEL_URL="$("$model" start)"
export SPOOL_LOCAL_MODEL_URL
echo "test.sh: SPOOL_LOCAL_MODEL_URL=$SPOOL_LOCAL_MODEL_URL" >&2
SPOOL_TEST_POSTGRES_URL="$("$postgres" start | tail -n 1)"
export SPOOL_TEST_POSTGRES_URL
echo "test.sh: SPOOL_TEST_POSTGRES_URL=$SPOOL_TEST_POSTGRES_URL" >&2

status=0
cargo nextest run --workspace --no-fail-fast "$@" || status=$?
exit "$status"
