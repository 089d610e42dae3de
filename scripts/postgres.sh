#!/usr/bin/env bash
# Runs a real PostgreSQL server for spool's tests: Debian's PostgreSQL 15 binaries, a
# throwaway cluster on 127.0.0.1, a superuser `spool` that loopback clients reach without a
# password. Tests create a database of their own on it (spool-testkit's `postgres` module), so
# parallel test processes never share one.
#
#   scripts/postgres.sh start    start (initdb on the first start); prints the server's URL last
#   scripts/postgres.sh stop     stop the server and remove the cluster this script made
#   scripts/postgres.sh status   print running/stopped and the URL (exit 3 when stopped)
#
# The binaries come from Debian's `postgresql` package; when they are missing and this runs as
# root with apt (CI's fresh machines), it installs the package. PostgreSQL refuses to run as
# root, so as root the cluster belongs to the package's `postgres` user (`runuser`). The
# cluster is only for tests: `trust` authentication, `fsync` on as in production.
#
# Environment:
#   SPOOL_POSTGRES_HOME   the cluster, pid and log (default /tmp/spool-postgres-$UID: a folder
#                         the `postgres` user can reach, which ~/.cache under /root is not)
#   SPOOL_POSTGRES_PORT   port on 127.0.0.1 (default 8179)
#   SPOOL_POSTGRES_START_TIMEOUT  seconds to wait for the server (default 60)
set -euo pipefail

readonly HOME_DIR="${SPOOL_POSTGRES_HOME:-/tmp/spool-postgres-$(id -u)}"
readonly PORT="${SPOOL_POSTGRES_PORT:-8179}"
readonly START_TIMEOUT="${SPOOL_POSTGRES_START_TIMEOUT:-60}"
readonly DATA="$HOME_DIR/data"
readonly LOG="$HOME_DIR/server.log"
readonly URL="postgres://spool@127.0.0.1:${PORT}/postgres"

die() { echo "postgres.sh: $*" >&2; exit 1; }

# The folder holding initdb and pg_ctl: Debian's versioned folder, else the PATH.
bindir() {
  local dir
  for dir in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]] && { echo "$dir"; return 0; }
  done
  local initdb
  initdb="$(command -v initdb 2>/dev/null)" || return 1
  dirname "$(readlink -f "$initdb")"
}

ensure_binaries() {
  bindir >/dev/null && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "postgres.sh: installing Debian's postgresql package" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -q --no-install-recommends postgresql >&2; } \
      || die "could not install postgresql"
    bindir >/dev/null || die "postgresql is installed but initdb and pg_ctl are not found"
  else
    die "PostgreSQL's initdb and pg_ctl are missing: install Debian's postgresql package"
  fi
}

# Runs a server binary as the cluster's owner.
as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

running() {
  [[ -f "$DATA/postmaster.pid" ]] && as_owner "$(bindir)/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
  ensure_binaries
  local bin
  bin="$(bindir)"
  if running; then
    echo "$URL"
    return 0
  fi
  mkdir -p "$HOME_DIR"
  if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the postgres user (Debian's package makes it)"
    chown postgres: "$HOME_DIR"
  fi
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    rm -rf "$DATA"
    as_owner "$bin/initdb" -D "$DATA" -U spool --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      >"$HOME_DIR/initdb.log" 2>&1 || { cat "$HOME_DIR/initdb.log" >&2; die "initdb failed"; }
  fi
  # Sockets in the cluster's folder, TCP on loopback only; enough connections for a test run's
  # parallel processes.
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$START_TIMEOUT" \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$DATA -c max_connections=200" \
    start >&2 || { tail -n 20 "$LOG" >&2 || true; die "the server did not start (log: $LOG)"; }
  echo "$URL"
}

stop() {
  if running; then
    as_owner "$(bindir)/pg_ctl" -D "$DATA" -m fast -w stop >&2
  fi
  # Only what start made: SPOOL_POSTGRES_HOME may name a folder holding more.
  rm -rf "$DATA" "$LOG" "$HOME_DIR/initdb.log"
  rmdir "$HOME_DIR" 2>/dev/null || true
}

status() {
  if bindir >/dev/null && running; then
    echo "running $URL"
  else
    echo "stopped"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
