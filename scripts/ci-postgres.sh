#!/usr/bin/env bash
# Runs a command against a throw-away PostgreSQL cluster (default: the test suite,
# `npm run test:postgres`), for .ci/run and for local use:
#
#   scripts/ci-postgres.sh                                  # the whole suite on Postgres
#   scripts/ci-postgres.sh npm run test:postgres -- test/unit/ledger.test.ts
#
# Installs Debian's postgresql when no server binaries are present (as root:
# apt-get), then initdb's a cluster in a temp dir owned by a non-root user (the
# `postgres` system user when run as root), starts it on 127.0.0.1 at a free port
# with trust authentication for a superuser role `gemforge`, exports
# TEST_DATABASE_URL, runs the command, and always stops and deletes the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

PGBIN="$(find_bin)"
if [[ -z "$PGBIN" || ! -x "$PGBIN/initdb" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "ci-postgres: no PostgreSQL server under /usr/lib/postgresql and not root to install it" >&2
    exit 2
  fi
  echo "ci-postgres: installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  PGBIN="$(find_bin)"
fi
echo "ci-postgres: using $PGBIN"

# Who runs the server: never root (postgres refuses); the postgres user if we are root.
if [[ $(id -u) -eq 0 ]]; then
  RUN_AS=(runuser -u postgres --)
else
  RUN_AS=()
fi

WORK="$(mktemp -d /tmp/gemforge-pg.XXXXXX)"
chmod 755 "$WORK"
mkdir "$WORK/data"
[[ $(id -u) -eq 0 ]] && chown postgres: "$WORK/data"
PORT="$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")"

cleanup() {
  "${RUN_AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 130" INT TERM

# Room for the connections of the files the tests run at once (scripts/run-tests.mjs runs as
# many as there are cores, 2 to 4, unless TEST_CONCURRENCY says; each file's servers and workers
# hold pools of up to 10): 200 for the 2 of a 2-core machine, 100 more per file beyond, up to
# 1000 (each slot takes shared memory at start).
FILES_AT_ONCE="${TEST_CONCURRENCY:-$(nproc)}"
if [[ -z "${TEST_CONCURRENCY:-}" ]] && (( FILES_AT_ONCE > 4 )); then FILES_AT_ONCE=4; fi
MAX_CONNECTIONS=$(( FILES_AT_ONCE * 100 ))
if (( MAX_CONNECTIONS < 200 )); then MAX_CONNECTIONS=200; fi
if (( MAX_CONNECTIONS > 1000 )); then MAX_CONNECTIONS=1000; fi

"${RUN_AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U gemforge -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
"${RUN_AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/data/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $WORK/data -c max_connections=$MAX_CONNECTIONS -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null
echo "ci-postgres: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT"

export TEST_DATABASE_URL="postgres://gemforge@127.0.0.1:$PORT/postgres"
if [[ $# -eq 0 ]]; then set -- npm run test:postgres; fi
"$@"
