#!/usr/bin/env bash
# Runs cmd/meterbench against PostgreSQL + ClickHouse, started here and stopped after
# (BENCHMARKS.md, "On PostgreSQL + ClickHouse, and with ClickHouse down").
#
#   go build -o /tmp/meterbench ./cmd/meterbench
#   scripts/meterbench-pg.sh /tmp/meterbench -d 5s -rounds 1 -half-load=false -sse-streams 0
#   CLICKHOUSE_DB=nosuchdb scripts/meterbench-pg.sh /tmp/meterbench …   # ClickHouse "down": every insert fails
#   REDIS=1 scripts/meterbench-pg.sh /tmp/meterbench …   # also a Redis, for the meters' shared state
#
# PostgreSQL runs with its default durability (fsync and synchronous_commit on), unlike the
# test suite's throwaway cluster; each run gets fresh databases. Autovacuum looks every second
# (autovacuum_naptime=1, the default is a minute): the tables of a fresh database grow from
# empty during a run, and until they are analyzed PostgreSQL plans the meter's primary-key
# reads as sequential scans (26 ms a lookup at 100,000 rows), which a database in service for
# more than a minute does not do. AUTOVACUUM_NAPTIME=60 measures that first minute instead.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 METERBENCH [flags…]" >&2; exit 2; }
bin=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/services.sh
source "$here/lib/services.sh"
AM_PG_SETTINGS="-c max_connections=300 -c autovacuum_naptime=${AUTOVACUUM_NAPTIME:-1}"
am_make_workdir
trap am_cleanup EXIT
am_start_postgres
am_start_clickhouse
redis_url=""
if [ "${REDIS:-0}" = 1 ]; then
	am_start_redis
	redis_url=$AGENTMARKET_TEST_REDIS_URL
fi
pg=${AGENTMARKET_TEST_DATABASE_URL%%/postgres\?*}
ch=${AGENTMARKET_TEST_CLICKHOUSE_DSN%/default}
chdb=${CLICKHOUSE_DB:-bench}
am_as_pg psql -q "$AGENTMARKET_TEST_DATABASE_URL" -c "CREATE DATABASE bench" >/dev/null
[ "$chdb" = bench ] && clickhouse-client --host 127.0.0.1 --port "${ch##*:}" -q "CREATE DATABASE bench"
echo "PostgreSQL $pg ($AM_PG_SETTINGS), ClickHouse $ch/$chdb${redis_url:+, Redis $redis_url}; load $(cut -d' ' -f1-3 /proc/loadavg)"
AGENTMARKET_DATABASE_URL="$pg/bench?sslmode=disable" \
AGENTMARKET_CLICKHOUSE_URL="$ch/$chdb" \
AGENTMARKET_REDIS_URL="$redis_url" \
AGENTMARKET_SECRET_KEY=${AGENTMARKET_SECRET_KEY:-MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=} \
	"$bin" "$@"
