#!/usr/bin/env bash
# README's test command: set-up, then every Go test (the feature suite runs as
# subtests of ./sim/steps) against the embedded fake homeserver, with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go vet ./...
# The per-agent user tests (cmd/zooid, zooid/unixuser) create unix users and
# need root; asked for without root they fail. A non-root developer leaves
# them out with ZOOID_TEST_USERS=0 (docs/security.md).
export ZOOID_TEST_USERS="${ZOOID_TEST_USERS:-1}"
go test -race -count=1 -timeout 20m ./...
