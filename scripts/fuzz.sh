#!/usr/bin/env bash
# Runs every fuzz target for a while: FUZZTIME per target (default 10s; CI keeps the
# total under two minutes). Each target's seed corpus and the inputs that once found
# bugs (testdata/fuzz) also run in the ordinary `go test`. Usage: scripts/fuzz.sh [FUZZTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-10s}}
targets=(
  "./zooid/tools FuzzToolArguments"
  "./zooid/history FuzzOpenCursor"
  "./zooid/history FuzzCursorRoundTrip"
  "./zooid/matrix FuzzPushTransaction"
  "./zooid/config FuzzParse"
  "./zooid/mcpserver FuzzHandshake"
  "./zooid/router FuzzMentions"
  "./scenarios FuzzParse"
  "./zooid/httpapi FuzzSessionBody"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "=== fuzz $pkg $name for $fuzztime"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tail -n 3
done
