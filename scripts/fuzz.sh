#!/usr/bin/env bash
# Runs every fuzz target for a while: FUZZTIME per target (default 10s; CI keeps the
# total under two minutes). Each target's seed corpus and the inputs that once found
# bugs (testdata/fuzz) also run in the ordinary `go test`. Usage: scripts/fuzz.sh [FUZZTIME]
#
# A target that fails and writes a failing input under its testdata/fuzz/, or fails on
# an input it already had, found a bug: the script fails and prints the whole output.
# One that fails without writing any is go's fuzzer failing on its own (golang/go#56238:
# a worker cut off when -fuzztime runs out reads as "context deadline exceeded" or
# "fuzzing process hung or terminated unexpectedly", with no input to replay): the
# output is printed, the target runs once more, and a second failure fails the script.
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
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# inputs lists the files of a target's failing-input directory.
inputs() { ls "$1" 2>/dev/null | sort || true; }

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  dir="$pkg/testdata/fuzz/$name"
  for try in 1 2; do
    echo "=== fuzz $pkg $name for $fuzztime"
    before=$(inputs "$dir")
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$out" 2>&1; then
      tail -n 3 "$out"
      break
    fi
    cat "$out"
    written=$(comm -13 <(echo "$before") <(inputs "$dir") | sed '/^$/d')
    if [[ -n "$written" ]]; then
      echo "fuzz.sh: $name found a failing input, written to $dir/: $written" >&2
      exit 1
    fi
    if grep -q 'failure while testing seed corpus entry' "$out"; then
      echo "fuzz.sh: $name fails on an input of its seed corpus or testdata/fuzz" >&2
      exit 1
    fi
    if [[ $try == 2 ]]; then
      echo "fuzz.sh: $name failed twice without writing a failing input" >&2
      exit 1
    fi
    echo "fuzz.sh: $name failed without writing a failing input (go's fuzzer, golang/go#56238); once more"
  done
done
