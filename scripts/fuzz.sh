#!/usr/bin/env bash
# Runs every fuzz target for a while: FUZZTIME per target (default 10s; CI keeps the
# total under two minutes). Each target's seed corpus and the inputs that once found
# bugs (testdata/fuzz) also run in the ordinary `go test`. Usage: scripts/fuzz.sh [FUZZTIME]
# FUZZPARALLEL=N runs N fuzz workers a target (default: one a core), for fuzzing beside
# other work: CI fuzzes with one worker beside its Synapse stages.
#
# A target that fails and writes a failing input under its testdata/fuzz/, or fails on
# an input it already had, found a bug: the script fails and prints the whole output.
# One that fails without writing any before its fuzz time is up hung (or its worker
# died): that fails the script too, saying when (the fuzzer's last elapsed time and
# exec count; go's fuzzer has no seed to replay). Only a failure without an input at
# the very end of the fuzz time is go's fuzzer failing on its own (golang/go#56238: a
# worker cut off when -fuzztime runs out reads as "context deadline exceeded" or
# "fuzzing process hung or terminated unexpectedly"): the output is printed, the
# target runs once more, and a second failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-10s}}
parallel=()
[ -n "${FUZZPARALLEL:-}" ] && parallel=(-parallel "$FUZZPARALLEL")
targets=(
  "./zooid/tools FuzzToolArguments"
  "./zooid/history FuzzOpenCursor"
  "./zooid/history FuzzCursorRoundTrip"
  "./zooid/matrix FuzzPushTransaction"
  "./zooid/config FuzzParse"
  "./zooid/mcpserver FuzzHandshake"
  "./zooid/router FuzzMentions"
  "./zooid/recording FuzzParse"
  "./zooid/httpapi FuzzSessionBody"
)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# seconds turns a -fuzztime duration (10s, 2m, 1h) into seconds; an iteration count
# (100x) has no time to compare with, so it counts as none.
seconds() {
  case "$1" in
    *h) echo $(( ${1%h} * 3600 )) ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo 0 ;;
  esac
}

# inputs lists the files of a target's failing-input directory.
inputs() { ls "$1" 2>/dev/null | sort || true; }

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  dir="$pkg/testdata/fuzz/$name"
  for try in 1 2; do
    echo "=== fuzz $pkg $name for $fuzztime"
    before=$(inputs "$dir")
    # -fuzzminimizetime: go minimizes each input that finds new coverage for up to
    # 60 s by default, and the workers fuzz nothing meanwhile (progress reads
    # "0/sec"); measured on zooid/config's FuzzParse for 15 s, 35k execs with
    # the default against 182k with 200 tries per input.
    if go test -tags goolm -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "${parallel[@]}" "$pkg" >"$out" 2>&1; then
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
    # The fuzzer's last progress line: "fuzz: elapsed: 7s, execs: 12345 (…)".
    last=$(grep -o 'elapsed: [0-9]*s, execs: [0-9]*' "$out" | tail -n 1 || true)
    elapsed=$(sed -n 's/^elapsed: \([0-9]*\)s.*/\1/p' <<<"$last")
    if (( ${elapsed:-0} + 2 < $(seconds "$fuzztime") )); then
      echo "fuzz.sh: $name failed without a failing input before its $fuzztime were up (last progress: ${last:-none}): a hang or a dead worker" >&2
      exit 1
    fi
    if [[ $try == 2 ]]; then
      echo "fuzz.sh: $name failed twice without writing a failing input (last progress: ${last:-none})" >&2
      exit 1
    fi
    echo "fuzz.sh: $name failed without writing a failing input (go's fuzzer, golang/go#56238); once more"
  done
done
