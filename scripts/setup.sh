#!/usr/bin/env bash
# Installs what the tests and the main job need on a fresh machine: Go modules
# and the npm packages of every tracked package-lock.json (real MCP and ACP peers
# used by interoperability tests). Safe to run again; it reuses what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "setup: Go 1.26 is required" >&2; exit 1; }
go mod download

if git ls-files --error-unmatch '*package-lock.json' >/dev/null 2>&1 || [ -n "$(git ls-files '*package-lock.json')" ]; then
  command -v npm >/dev/null || { echo "setup: npm is required for the interoperability tests" >&2; exit 1; }
  for lock in $(git ls-files '*package-lock.json'); do
    dir=$(dirname "$lock")
    if [ ! -d "$dir/node_modules" ] || [ "$lock" -nt "$dir/node_modules" ]; then
      echo "setup: npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi

# The report's browser test (sim/report) drives Debian's chromium headless;
# without it that test fails, so install it when missing (needs root and apt).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing chromium"
    apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
      apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null
    }
  else
    echo "setup: chromium is required for the report's browser test (as root: apt-get install -y chromium)" >&2
    exit 1
  fi
fi
