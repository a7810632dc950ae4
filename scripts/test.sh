#!/usr/bin/env bash
# Installs what the tests need, then runs every test with the race detector.
# Usage: scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
go version
go vet ./...
go test -race -count=1 -timeout 30m "$@" ./...
