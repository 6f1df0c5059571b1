#!/usr/bin/env bash
# README's test command: set-up, then every Go test (the feature suite runs as
# subtests of ./sim/steps) against the embedded fake homeserver, with the race
# detector. It passes as any user on a fresh machine: a test whose dependency
# the machine lacks (root, a Docker engine, the npm packages, chromium) is left
# out with one line saying which and why, and the summary at the end lists
# every skip, or says that no test was skipped. Under CI=true a missing
# dependency fails its test, and any skip fails the run (internal/testdeps).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# goolm: mautrix's crypto in pure Go (the harness's encrypted humans,
# fakehs/e2eeclient); without it mautrix v0.32 links libolm through cgo.
go vet -tags goolm ./...
summary=$(mktemp -d)
trap 'rm -rf "$summary"' EXIT
go build -o "$summary/test-summary" ./cmd/test-summary
flags=()
[ "${CI:-}" = true ] && flags+=(-fail-on-skip)
# -timeout bounds each package's test binary: ./sim/steps runs the feature suite twice under
# the race detector (side by side since issue 38's goal 4), 10 min alone on 2 cores and
# 18.6 min on a shared machine before that (CI of 1d4fa69).
# ./sim/steps is named first so that go test starts it first: it is the longest package (its
# two feature passes), and started in ./...'s order it ended the run alone with a core idle.
# (Naming the four longest first, longest first, measured worse: cmd/zooid's image builds
# and binaries beside the feature passes, 6.9 min for README's command against 6.2.)
go test -tags goolm -race -count=1 -timeout 35m -json ./sim/steps ./... 2>&1 | "$summary/test-summary" "${flags[@]}"
