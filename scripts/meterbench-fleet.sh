#!/usr/bin/env bash
# Runs cmd/meterbench -fleet: two meters on PostgreSQL, ClickHouse and Redis, all started here
# and stopped after (scripts/meterbench-pg.sh with REDIS=1; BENCHMARKS.md, "A fleet of meters").
#
#   go build -o /tmp/meterbench ./cmd/meterbench
#   scripts/meterbench-fleet.sh /tmp/meterbench -d 8s -rounds 1 -half-load=false -sse-streams 0
#   REDIS=0 scripts/meterbench-fleet.sh /tmp/meterbench …   # the same fleet without Redis
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 METERBENCH [flags…]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
shift
REDIS=${REDIS:-1} exec "$here/meterbench-pg.sh" "$bin" -fleet "$@"
