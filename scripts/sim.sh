#!/usr/bin/env bash
# README's main job: set-up, then the feature suite against the embedded fake
# homeserver. Extra arguments go to `zooid sim` (paths, --tags, --format, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go run ./cmd/zooid sim "$@"
