#!/usr/bin/env bash
# Prints the folder that holds Codex 0.163.0's JSON Schema of its app-server protocol: the
# oracle the end-to-end tests check every message against (tests/support/schema.rs).
#
# Looked for, in order: $SPOOL_CODEX_SCHEMA_DIR; ../shared/codex-app-server-schema/0.163.0 beside
# the checkout; the cache ~/.cache/spool/codex-schema/0.163.0. When none holds it, the cache is
# filled the way Codex publishes it: its CLI wheel from PyPI (openai-codex-cli-bin, ~140 MB,
# kept in the cache) runs `codex app-server generate-json-schema`.
#
#   scripts/codex-schema.sh             # print the folder (generating it if needed)
#   scripts/codex-schema.sh --generate  # regenerate the cache even if a copy exists elsewhere
set -euo pipefail
version=0.163.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/spool/codex-schema"
out="$cache/$version"

has_schema() { [[ -n "$1" && -f "$1/ServerNotification.json" && -f "$1/codex_app_server_protocol.v2.schemas.json" ]]; }

if [[ "${1:-}" != "--generate" ]]; then
  for dir in "${SPOOL_CODEX_SCHEMA_DIR:-}" "$root/../shared/codex-app-server-schema/$version" "$out"; do
    if has_schema "$dir"; then
      echo "$dir"
      exit 0
    fi
  done
fi

case "$(uname -m)" in
  x86_64) platform=manylinux_2_17_x86_64 ;;
  aarch64) platform=manylinux_2_17_aarch64 ;;
  *) echo "codex-schema: no Codex CLI wheel for $(uname -m)" >&2; exit 1 ;;
esac
wheels="$cache/wheels"
mkdir -p "$wheels"
if ! compgen -G "$wheels/openai_codex_cli_bin-$version-*$(uname -m)*.whl" >/dev/null; then
  echo "codex-schema: downloading openai-codex-cli-bin==$version from PyPI (~140 MB, cached in $wheels)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform "$platform" \
    "openai-codex-cli-bin==$version" -d "$wheels" >&2
fi
wheel=$(compgen -G "$wheels/openai_codex_cli_bin-$version-*$(uname -m)*.whl" | head -n1)
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked" "$out.partial"' EXIT
python3 -m zipfile -e "$wheel" "$unpacked"
codex=$(find "$unpacked" -type f -name codex -path '*bin*' | head -n1)
[[ -n "$codex" ]] || { echo "codex-schema: no codex binary in $wheel" >&2; exit 1; }
chmod +x "$codex"
rm -rf "$out.partial"
"$codex" app-server generate-json-schema --out "$out.partial" >&2
has_schema "$out.partial" || { echo "codex-schema: the generated schema lacks its files" >&2; exit 1; }
rm -rf "$out"
mv "$out.partial" "$out"
echo "$out"
