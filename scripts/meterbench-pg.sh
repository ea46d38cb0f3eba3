#!/usr/bin/env bash
# Runs cmd/meterbench against PostgreSQL + ClickHouse, started here and stopped after
# (BENCHMARKS.md, "On PostgreSQL + ClickHouse, and with ClickHouse down").
#
#   go build -o /tmp/meterbench ./cmd/meterbench
#   scripts/meterbench-pg.sh /tmp/meterbench -d 5s -rounds 1 -half-load=false -sse-streams 0
#   CLICKHOUSE_DB=nosuchdb scripts/meterbench-pg.sh /tmp/meterbench …   # ClickHouse "down": every insert fails
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
AM_WORKDIR=$(mktemp -d /tmp/meterbench-pg.XXXXXX)
chmod 755 "$AM_WORKDIR"
pgdata=$AM_WORKDIR/pgdata
cleanup() {
	[ -n "${pgport:-}" ] && am_as_pg "$AM_PG_BIN/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null 2>&1 || true
	[ -n "$AM_CH_PID" ] && am_stop_pid "$AM_CH_PID" clickhouse-server
	rm -rf "$AM_WORKDIR"
}
trap cleanup EXIT
am_ensure_postgres
if am_is_root; then install -d -o postgres -g postgres -m 700 "$pgdata"; else install -d -m 700 "$pgdata"; fi
am_as_pg "$AM_PG_BIN/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-locale >"$AM_WORKDIR/initdb.log" 2>&1
am_pick_port pgport
am_as_pg "$AM_PG_BIN/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $pgport -k $pgdata -c max_connections=300 -c autovacuum_naptime=${AUTOVACUUM_NAPTIME:-1}" start >/dev/null
am_start_clickhouse
ch=${AGENTMARKET_TEST_CLICKHOUSE_DSN%/default}
chdb=${CLICKHOUSE_DB:-bench}
am_as_pg psql -q -h 127.0.0.1 -p "$pgport" -U postgres -c "CREATE DATABASE bench" >/dev/null
[ "$chdb" = bench ] && clickhouse-client --host 127.0.0.1 --port "${ch##*:}" -q "CREATE DATABASE bench"
echo "PostgreSQL on 127.0.0.1:$pgport (fsync on), ClickHouse $ch/$chdb; load $(cut -d' ' -f1-3 /proc/loadavg)"
AGENTMARKET_DATABASE_URL="postgres://postgres@127.0.0.1:$pgport/bench?sslmode=disable" \
AGENTMARKET_CLICKHOUSE_URL="$ch/$chdb" \
AGENTMARKET_SECRET_KEY=${AGENTMARKET_SECRET_KEY:-MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=} \
	"$bin" "$@"
