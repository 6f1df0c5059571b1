#!/usr/bin/env bash
# Installs what the tests and the main job need on a fresh machine: Go modules
# and the npm packages of every tracked package-lock.json (real MCP and ACP peers
# used by interoperability tests), and chromium where it can. Safe to run again;
# it reuses what is there, and copies a node_modules installed from the same
# lockfile before (kept under ~/.cache/zooid, below) instead of installing it again.
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
  # A copy of each installed node_modules is kept per lockfile, so a fresh clone on a machine
  # that installed the same lockfile before copies it (about 3 s for the three, against npm ci's
  # 23-27 s of two cores, most of it unpacking 1 GB and building node-pty; issue 38's goal 4).
  # The key is the lockfile, package.json, node's version (node-pty's ABI) and the machine.
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/zooid/node_modules"
  for lock in $(git ls-files '*package-lock.json'); do
    dir=$(dirname "$lock")
    if [ -d "$dir/node_modules" ] && ! [ "$lock" -nt "$dir/node_modules" ]; then
      continue
    fi
    key=$( (cat "$lock" "$dir/package.json"; node --version; uname -m) | sha256sum | cut -c1-16)
    slot="$cache/${dir//\//_}"
    if [ -d "$slot/$key" ]; then
      echo "setup: $dir/node_modules copied from $slot/$key (installed from the same lockfile before)"
      rm -rf "$dir/node_modules" "$dir/node_modules.partial"
      cp -a "$slot/$key" "$dir/node_modules.partial"
      mv "$dir/node_modules.partial" "$dir/node_modules"
      touch "$dir/node_modules" # newer than the lockfile, which a clone has just written
      continue
    fi
    echo "setup: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
    # Kept only whole: a copy is renamed into place once complete, and replaces the
    # copy of an older lockfile.
    if mkdir -p "$slot" && cp -a "$dir/node_modules" "$slot/$key.partial.$$"; then
      find "$slot" -mindepth 1 -maxdepth 1 ! -name "$key.partial.$$" -exec rm -rf {} +
      mv "$slot/$key.partial.$$" "$slot/$key"
    else
      echo "setup: could not keep a copy of $dir/node_modules in $slot (the next clone installs again)" >&2
      rm -rf "$slot/$key.partial.$$"
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
