#!/usr/bin/env bash
# README's main job: set-up, then the feature suite against the embedded fake
# homeserver. Extra arguments go to `zooid sim` (paths, --tags, --format, ...),
# which is the harness binary cmd/zooid-sim.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go run -tags goolm ./cmd/zooid-sim sim "$@"
