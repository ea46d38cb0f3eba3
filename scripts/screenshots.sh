#!/usr/bin/env bash
# Saves screenshots of the web UI to docs/screenshots/: catalog, listing, seller, buyer,
# finance and operator (.png, 1280x900), and ui.sha256, the hash of the templates and
# static files they show (a test fails when the UI changed and the screenshots did not).
#
#   scripts/screenshots.sh [OUT_DIR]
#
# It starts `go run ./cmd/marketplace --demo` on a temp data dir and a free port, calls
# each demo agent through the meter a few times with the demo buyer's key (so that the
# finance and seller pages have figures), then drives headless Chromium with
# web/webtest/screenshots (signing in as the demo seller, the demo buyer and the
# operator). Chromium comes from AGENTMARKET_TEST_CHROME_PATH, the PATH, or apt-get.
# Everything it started is stopped, and the temp dir removed, on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source=scripts/lib/services.sh
. "$ROOT/scripts/lib/services.sh"

OUT=${1:-docs/screenshots}
WORK=$(mktemp -d "$(am_tmp_base)/agentmarket-shots.XXXXXX")
MARKET_PID=""

cleanup() {
	if [ -n "$MARKET_PID" ]; then
		am_kill_tree "$MARKET_PID" TERM
		wait "$MARKET_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${AGENTMARKET_TEST_CHROME_PATH:-}" ]; then
	command -v chromium >/dev/null 2>&1 || am_ensure_chromium
	AGENTMARKET_TEST_CHROME_PATH=$(command -v chromium)
	export AGENTMARKET_TEST_CHROME_PATH
fi

PORT=""
am_pick_port PORT
LOG=$WORK/marketplace.log
echo "==> starting the demo marketplace on 127.0.0.1:$PORT (log: $LOG)"
# The demo agents take free ports too (their default is the marketplace's + 100).
AGENTMARKET_ADDR=127.0.0.1:$PORT AGENTMARKET_DEMO_PORT=0 AGENTMARKET_DATA_DIR=$WORK/data AGENTMARKET_LOG_LEVEL=warn \
	go run ./cmd/marketplace --demo >"$LOG" 2>&1 </dev/null &
MARKET_PID=$!
BASE=http://127.0.0.1:$PORT
# The demo's lines come last, after the banner.
for _ in $(seq 1 600); do
	grep -q "Demo ready" "$LOG" && break
	kill -0 "$MARKET_PID" 2>/dev/null || { cat "$LOG" >&2; am_die "the marketplace exited"; }
	sleep 0.1
done
grep -q "listening on" "$LOG" || { cat "$LOG" >&2; am_die "the marketplace did not start within 60 s"; }
grep -q "Demo ready" "$LOG" || { cat "$LOG" >&2; am_die "no demo in the marketplace's output within 60 s"; }

KEY=$(tr -d '[:space:]' <"$WORK/data/demo-buyer.key")
echo "==> calling the demo agents through the meter"
texts=("Summarize the quarterly report for the board" "Translate hello world into the demo language"
	"Invoice 2026-17: consulting 1200.00, travel 310.50, licences 99.99")
n=0
while read -r version endpoint; do
	for text in "${texts[@]}"; do
		n=$((n + 1))
		if [ "$version" = "0.3" ]; then
			body='{"jsonrpc":"2.0","id":'$n',"method":"message/send","params":{"message":{"kind":"message","messageId":"m'$n'","role":"user","parts":[{"kind":"text","text":"'$text'"}]}}}'
			curl -fsS "$endpoint" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$body" >/dev/null
		else
			body='{"jsonrpc":"2.0","id":'$n',"method":"SendMessage","params":{"message":{"messageId":"m'$n'","role":"ROLE_USER","parts":[{"text":"'$text'"}]}}}'
			curl -fsS "$endpoint" -H "Authorization: Bearer $KEY" -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' -d "$body" >/dev/null
		fi
	done
done < <(sed -n 's/.*A2A \([0-9.]*\), [a-z ]*: \(http[^ ]*\/a2a\/[a-z0-9_]*\).*/\1 \2/p' "$LOG")
[ "$n" -gt 0 ] || am_die "found no demo agent endpoints in the marketplace's output"
echo "    $n calls"

# Usage reaches the store within a second or so.
for _ in $(seq 1 100); do
	curl -fsS "$BASE/api/v1/usage?group_by=listing" -H "Authorization: Bearer $KEY" | grep -q '"cost_micros"' && break
	sleep 0.1
done

echo "==> taking screenshots into $OUT"
mkdir -p "$OUT"
go run ./web/webtest/screenshots -base "$BASE" -out "$OUT" -operator-key-file "$WORK/data/operator.key"
# What the screenshots show: the pages' templates and static files they were
# taken of (web.TestScreenshotsAreCurrent compares it with today's).
(find web/templates web/static -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1) >"$OUT/ui.sha256"
