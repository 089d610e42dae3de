#!/usr/bin/env bash
# The headless browser of the trace viewer's tests: Debian's chromium and chromium-driver
# (/usr/bin/chromium, /usr/bin/chromedriver). Installs them when missing (as root, with
# apt-get) and prints the two paths. The tests start their own chromedriver per test.
#
#   scripts/browser.sh          # install if needed, print the paths
set -euo pipefail

die() { echo "browser.sh: $*" >&2; exit 1; }

have() { [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; }

if ! have; then
  [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null \
    || die "chromium and chromium-driver are missing: install Debian's packages (apt-get install chromium chromium-driver)"
  echo "browser.sh: installing Debian's chromium and chromium-driver" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -q --no-install-recommends chromium chromium-driver >&2; } \
    || die "could not install chromium and chromium-driver"
  have || die "chromium-driver is installed but /usr/bin/chromedriver is not there"
fi
echo /usr/bin/chromium
echo /usr/bin/chromedriver
