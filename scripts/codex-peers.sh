#!/usr/bin/env bash
# Installs the official Codex clients that spool's peer tests drive against `spool app-server`,
# into a cache outside the clone so reruns and fresh clones reuse them:
#
#   - a Python virtualenv with the Codex Python SDK (PyPI openai-codex, module openai_codex),
#     installed --no-deps: its declared dependency openai-codex-cli-bin is the bundled Codex
#     binary, which the tests replace with spool. Only the packages the SDK imports (pydantic,
#     packaging) and pydantic's own imports are installed, each pinned.
#   - the Codex CLI from npm (@openai/codex), whose real binary comes in a platform-specific
#     optional dependency; this script makes sure the one for this machine is present.
#   - a real third-party MCP server from npm, the reference filesystem server
#     (@modelcontextprotocol/server-filesystem), which the MCP tests run with `npx --offline`.
#
#   scripts/codex-peers.sh [install]  install what is missing (a no-op when the stamp matches)
#   scripts/codex-peers.sh python     print the venv's python (exit 1 when not installed)
#   scripts/codex-peers.sh codex      print the codex binary (exit 1 when not installed)
#   scripts/codex-peers.sh npm-prefix print the npm prefix holding the MCP filesystem server
#
# Environment:
#   SPOOL_PEERS_HOME   where to install (default ${XDG_CACHE_HOME:-~/.cache}/spool/peers)
#   SPOOL_PEERS_PYTHON the python that creates the venv (default python3)
set -euo pipefail

readonly PEERS="${SPOOL_PEERS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/spool/peers}"
readonly VENV="$PEERS/venv"
readonly NPM_DIR="$PEERS/npm"
readonly BASE_PYTHON="${SPOOL_PEERS_PYTHON:-python3}"

readonly SDK_VERSION="0.163.0"
readonly CODEX_VERSION="0.163.0"
readonly MCP_FS_PACKAGE="@modelcontextprotocol/server-filesystem"
readonly MCP_FS_VERSION="2026.8.31"
# openai_codex imports pydantic (its models) and packaging (runtime version checks); the rest
# is what pydantic imports. Versions satisfy the SDK's requirements (pydantic>=2.12,
# packaging>=26.2) and pydantic's own pins (pydantic 2.14.4 needs pydantic-core 2.50.5).
readonly PY_PINS=(
  "openai-codex==$SDK_VERSION"
  "pydantic==2.14.4"
  "pydantic-core==2.50.5"
  "annotated-types==0.8.0"
  "typing-extensions==4.16.0"
  "typing-inspection==0.4.5"
  "packaging==26.3"
)

say() { printf 'codex-peers: %s\n' "$*" >&2; }
die() { printf 'codex-peers: error: %s\n' "$*" >&2; exit 1; }

# The npm package directory and binary of this machine's platform package.
platform() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo "linux-x64 x86_64-unknown-linux-musl" ;;
    Linux-aarch64 | Linux-arm64) echo "linux-arm64 aarch64-unknown-linux-musl" ;;
    *) die "no Codex npm binary is known for $(uname -s)-$(uname -m)" ;;
  esac
}
read -r NPM_PLATFORM NPM_TRIPLE < <(platform)
readonly NPM_PLATFORM NPM_TRIPLE
readonly CODEX_BIN="$NPM_DIR/node_modules/.bin/codex"
readonly NPM_PACKAGES="$NPM_DIR/node_modules/@openai"
readonly CODEX_NATIVE="$NPM_PACKAGES/codex-$NPM_PLATFORM/vendor/$NPM_TRIPLE/bin/codex"
readonly MCP_FS_BIN="$NPM_DIR/node_modules/.bin/mcp-server-filesystem"

python_version() { "$1" -c 'import sys; print("python", sys.version.split()[0])'; }

# The stamp names every pinned version and the interpreter the venv was built with, so a
# change to any of them reinstalls.
stamp_key() {
  printf '%s\n' "${PY_PINS[@]}" "@openai/codex@$CODEX_VERSION" "$NPM_PLATFORM" \
    "$MCP_FS_PACKAGE@$MCP_FS_VERSION"
  python_version "$BASE_PYTHON"
}
readonly STAMP="$PEERS/installed.stamp"

python_ok() {
  [[ -x "$VENV/bin/python" ]] &&
    "$VENV/bin/python" -c 'import openai_codex, pydantic, packaging' 2>/dev/null
}

codex_ok() {
  [[ -x "$CODEX_NATIVE" ]] &&
    [[ "$("$CODEX_BIN" --version 2>/dev/null)" == "codex-cli $CODEX_VERSION" ]]
}

# Cheap on purpose (every test run asks): the stamp is written only after both installs were
# verified, so the files being there is enough.
installed() {
  [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(stamp_key)" ]] &&
    [[ -x "$VENV/bin/python" && -x "$CODEX_BIN" && -x "$CODEX_NATIVE" && -x "$MCP_FS_BIN" ]]
}

normalize() { tr 'A-Z_' 'a-z-' | sort; }

install_python() {
  command -v "$BASE_PYTHON" >/dev/null || die "'$BASE_PYTHON' is required"
  # An intact venv with exactly the pins, on the same interpreter version, is kept. Names
  # are compared as pip normalizes them (freeze writes pydantic_core, the pins pydantic-core).
  local have="" want
  if [[ -x "$VENV/bin/python" ]]; then
    have="$({ "$VENV/bin/pip" freeze --disable-pip-version-check 2>/dev/null; python_version \
      "$VENV/bin/python"; } | normalize)" || have=""
  fi
  want="$({ printf '%s\n' "${PY_PINS[@]}"; python_version "$BASE_PYTHON"; } | normalize)"
  if [[ "$have" == "$want" ]] && python_ok; then
    return
  fi
  say "creating $VENV with ${PY_PINS[*]}"
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv "$VENV"
  # --no-deps for all of them: the list above is the whole closure, and openai-codex's
  # declared openai-codex-cli-bin dependency (a bundled Codex binary) must stay out.
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    "${PY_PINS[@]}"
  python_ok || die "the venv cannot import openai_codex"
}

install_codex() {
  command -v npm >/dev/null || die "'npm' is required"
  if codex_ok; then
    return
  fi
  say "installing @openai/codex@$CODEX_VERSION into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "@openai/codex@$CODEX_VERSION" >&2
  if [[ ! -x "$CODEX_NATIVE" ]]; then
    # npm skips optional dependencies in some setups (--omit=optional in a user config);
    # the launcher is useless without the platform binary, so ask for it by name.
    say "the $NPM_PLATFORM binary is missing; installing it explicitly"
    npm install --prefix "$NPM_DIR" --save-exact --no-audit --no-fund --loglevel=error \
      "@openai/codex-$NPM_PLATFORM@npm:@openai/codex@$CODEX_VERSION-$NPM_PLATFORM" >&2
  fi
  [[ -x "$CODEX_NATIVE" ]] || die "no $NPM_PLATFORM binary at $CODEX_NATIVE"
  local version
  version="$("$CODEX_BIN" --version)" || die "$CODEX_BIN --version failed"
  [[ "$version" == "codex-cli $CODEX_VERSION" ]] || die "$CODEX_BIN reports '$version'"
}

mcp_fs_ok() {
  [[ -x "$MCP_FS_BIN" ]] &&
    grep -q "\"version\": \"$MCP_FS_VERSION\"" \
      "$NPM_DIR/node_modules/$MCP_FS_PACKAGE/package.json" 2>/dev/null
}

install_mcp_fs() {
  if mcp_fs_ok; then
    return
  fi
  say "installing $MCP_FS_PACKAGE@$MCP_FS_VERSION into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "$MCP_FS_PACKAGE@$MCP_FS_VERSION" >&2
  mcp_fs_ok || die "no $MCP_FS_PACKAGE@$MCP_FS_VERSION at $MCP_FS_BIN"
}

# The system tools the peers need (npm for the TUI, tmux to run it in), from Debian's packages
# when they are missing and this user may install them.
ensure_system_tools() {
  local missing=()
  command -v npm >/dev/null || missing+=(nodejs npm)
  command -v tmux >/dev/null || missing+=(tmux)
  ((${#missing[@]} == 0)) && return
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    say "installing ${missing[*]} from Debian's packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; } \
      || die "could not install ${missing[*]}"
  else
    die "missing ${missing[*]}: install them (apt-get install ${missing[*]})"
  fi
}

install() {
  mkdir -p "$PEERS"
  # Tests running in parallel may call this at once; one installs, the others wait.
  exec 9>"$PEERS/.install.lock"
  flock 9
  ensure_system_tools
  if installed; then
    return
  fi
  rm -f "$STAMP"
  install_python
  install_codex
  install_mcp_fs
  stamp_key >"$STAMP"
  say "installed: $VENV/bin/python, $CODEX_BIN, $MCP_FS_BIN"
}

require_installed() {
  installed || die "the Codex peers are not installed: run scripts/codex-peers.sh install"
}

case "${1:-install}" in
  install) install ;;
  python) require_installed; printf '%s\n' "$VENV/bin/python" ;;
  codex) require_installed; printf '%s\n' "$CODEX_BIN" ;;
  npm-prefix) require_installed; printf '%s\n' "$NPM_DIR" ;;
  *) die "usage: $0 [install|python|codex|npm-prefix]" ;;
esac
