#!/usr/bin/env bash
# Installs what the tests need, then runs every test with the race detector.
# Usage: scripts/test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
go version
# The support page's browser test drives Debian's Chromium; it fails (it
# does not skip) without it.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
	else
		echo "scripts/test.sh: chromium is missing; install it (sudo apt-get install -y --no-install-recommends chromium) and run again" >&2
		exit 1
	fi
fi
# The PostgreSQL store's tests start a throwaway server from Debian's
# package (initdb + postgres in a temporary directory, as an unprivileged
# user); they fail (they do not skip) without it. PACER_TEST_POSTGRES=
# postgres://… points them at an existing server instead.
if [ -z "${PACER_TEST_POSTGRES:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
	else
		echo "scripts/test.sh: PostgreSQL is missing; install it (sudo apt-get install -y --no-install-recommends postgresql) and run again" >&2
		exit 1
	fi
fi
go vet ./...
go test -race -count=1 -timeout 30m "$@" ./...
# The engine, state-machine, pruner and feed tests (package scheduler,
# through internal/teststore) once more on PostgreSQL: a throwaway server,
# a database per test. The state machine's property runs 20 times there
# (100 on SQLite): each run is a database of its own. Measured here with
# the race detector on 2 shared cores: 1 min (load 3), 2 min (load 5).
PACER_TEST_STORE=postgres go test -race -count=1 -timeout 15m "$@" ./scheduler/ -rapid.checks=20
# The crash test: the real binary killed with SIGKILL at random moments
# during a few thousand operations, checked against the provider's own log.
go run ./scripts/crashtest -ops 3000 -kills 8 -timeout 10m
# The same on PostgreSQL: two serve processes on one database (a
# throwaway durable server, or a new database on PACER_TEST_POSTGRES's),
# either killed at random, the throwaway server crashed and restarted
# once; the change feed read through both.
go run ./scripts/crashtest -db "${PACER_TEST_POSTGRES:-postgres}" -procs 2 -ops 3000 -kills 8 -timeout 10m
