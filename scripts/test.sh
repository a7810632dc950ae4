#!/usr/bin/env bash
# Installs what the tests need, then runs every test with the race detector.
# Usage: scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
go version
go vet ./...
go test -race -count=1 -timeout 30m "$@" ./...
# The crash test: the real binary killed with SIGKILL at random moments
# during a few thousand operations, checked against the provider's own log.
go run ./scripts/crashtest -ops 3000 -kills 8 -timeout 10m
