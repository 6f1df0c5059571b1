#!/usr/bin/env bash
# Installs what the tests and the main job need on a fresh machine: Go modules
# and the npm packages of every tracked package-lock.json (real MCP and ACP peers
# used by interoperability tests), and chromium where it can. Safe to run again;
# it reuses what is there.
#
# What a developer's machine cannot have (npm, chromium without root) is not an
# error here: the tests that need it are left out, each with one line saying
# why (internal/testdeps). Under CI=true every dependency is required.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=false
[ "${CI:-}" = true ] && ci=true

# missing reports a dependency this machine lacks: fatal under CI=true.
missing() {
  if $ci; then
    echo "setup: $1 (CI=true: every dependency is required)" >&2
    exit 1
  fi
  echo "setup: $1; the tests that need it will be left out, each saying so" >&2
}

command -v go >/dev/null || { echo "setup: Go 1.26 is required" >&2; exit 1; }
go mod download

if ! command -v npm >/dev/null; then
  missing "npm is missing (install Node 20+ with npm for the real MCP clients and agents)"
else
  for lock in $(git ls-files '*package-lock.json'); do
    dir=$(dirname "$lock")
    if [ ! -d "$dir/node_modules" ] || [ "$lock" -nt "$dir/node_modules" ]; then
      echo "setup: npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
    fi
  done
fi

# The report's browser test (sim/report) drives Debian's chromium headless.
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing chromium"
    apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
      apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null
    }
  else
    missing "chromium is missing (as root: apt-get install -y chromium)"
  fi
fi
