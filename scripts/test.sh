#!/usr/bin/env bash
# README's test command: set-up, then every Go test (the feature suite runs as
# subtests of ./steps) against the embedded fake homeserver, with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go vet ./...
go test -race -count=1 -timeout 20m ./...
