#!/usr/bin/env bash
# AgentMarket's one test command (README; .ci/run calls it).
#
#   scripts/test.sh                          gofmt, go vet, race tests, every test
#   scripts/test.sh -run TestX ./listings/... just `go test -count=1 <args>` (paths from the repo root)
#
# It installs what is missing (Debian packages, `go install`), starts throwaway services
# under one temp dir, exports their addresses as AGENTMARKET_TEST_* variables, runs the
# checks, and stops every service and removes the temp dir on exit, whatever happens.
#
# Environment:
#   AGENTMARKET_TEST_SERVICES  comma list of services to start: postgres, clickhouse,
#                              clickhouse-cluster (ZooKeeper and three ClickHouse nodes),
#                              redis, stripe (stripe-mock), helm (the helm binary, for the
#                              chart's checks), chromium, or all / none.
#                              Default: all of them.
#   AGENTMARKET_TEST_TIMEOUT   go test -timeout (default 20m).
#   AGENTMARKET_TEST_SHARDS    how many concurrent go test runs share cmd/marketplace's
#                              tests (default 4); after the race tests, they run beside
#                              the fuzz test and the other packages, each job's output
#                              printed whole when all have ended.
#   AGENTMARKET_TEST_FUZZTIME  how far the reading rule's differential fuzz test
#                              explores beyond its corpus, as go test -fuzztime
#                              (default 1000000x: a million inputs).
#   AGENTMARKET_TEST_DATABASE_URL, AGENTMARKET_TEST_CLICKHOUSE_DSN,
#   AGENTMARKET_TEST_REDIS_URL, AGENTMARKET_TEST_STRIPE_API_BASE
#                              when already set, that service is used as given, not started.
#
# Exported to the tests:
#   AGENTMARKET_TEST_DATABASE_URL      postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
#   AGENTMARKET_TEST_CLICKHOUSE_DSN    clickhouse://127.0.0.1:PORT/default   (clickhouse)
#   AGENTMARKET_TEST_REDIS_URL         redis://127.0.0.1:PORT/0             (redis)
#   AGENTMARKET_TEST_STRIPE_API_BASE   http://127.0.0.1:PORT                (stripe)
#   AGENTMARKET_TEST_STRIPE_SECRET_KEY sk_test_123                          (stripe)
#   AGENTMARKET_TEST_CLICKHOUSE_CLUSTER       the cluster's name          (clickhouse-cluster)
#   AGENTMARKET_TEST_CLICKHOUSE_CLUSTER_NODES its nodes' DSNs, comma-separated
#   AGENTMARKET_TEST_HELM              path of the helm binary              (helm)
#   AGENTMARKET_TEST_CHROME_PATH       path of the chromium binary          (chromium)
#   AGENTMARKET_TEST_SERVICES          the services started, normalised
#   AGENTMARKET_TEST_REQUIRE_SERVICES  1: a test whose service variable is missing fails
#                                      instead of skipping
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source=scripts/lib/services.sh
. "$ROOT/scripts/lib/services.sh"

GO_TEST_TIMEOUT=${AGENTMARKET_TEST_TIMEOUT:-20m}
# Packages whose tests also run with the race detector (the concurrent hot paths).
RACE_PATTERNS=(./a2aproxy/... ./metering/...)

T0=$(am_now)
FAILED=()
ALL_SERVICES="postgres clickhouse clickhouse-cluster redis stripe helm chromium"

GO_PID=""

# run_go runs the go command in the background and waits for it, so that a SIGTERM or
# SIGINT sent to this script is handled at once (stopping go, its test binaries and then
# the services) rather than after go has finished.
run_go() {
	local rc=0
	go "$@" &
	GO_PID=$!
	wait "$GO_PID" || rc=$?
	GO_PID=""
	return "$rc"
}

on_signal() {
	local job
	for job in "${JOBS[@]}"; do
		am_kill_tree "${job#*:}" TERM
	done
	# What the stopped jobs printed so far (a failure, the test a job was
	# in) is printed before the work dir goes.
	for job in "${JOBS[@]}"; do
		wait "${job#*:}" 2>/dev/null || true
		if [ -s "$AM_WORKDIR/job.${job%%:*}.log" ]; then
			printf '\n==> stopped: what job %s printed\n' "${job%%:*}"
			cat "$AM_WORKDIR/job.${job%%:*}.log"
		fi
	done
	JOBS=()
	if [ -n "$GO_PID" ]; then
		am_kill_tree "$GO_PID" TERM
		wait "$GO_PID" 2>/dev/null || true
		GO_PID=""
	fi
	exit "$1"
}

step() { printf '\n==> [+%ss] %s\n' "$(am_since "$T0")" "$*"; }

# parse_services turns AGENTMARKET_TEST_SERVICES into the canonical, ordered list
# "postgres clickhouse clickhouse-cluster redis stripe helm chromium" (a subset of it).
parse_services() {
	local raw=$1 s want=" "
	raw=$(printf '%s' "$raw" | tr 'A-Z,' 'a-z ')
	for s in $raw; do
		case $s in
		all) want+="$ALL_SERVICES " ;;
		none) ;;
		postgres | postgresql | pg) want+="postgres " ;;
		clickhouse | ch) want+="clickhouse " ;;
		clickhouse-cluster | cluster | ch-cluster) want+="clickhouse-cluster " ;;
		redis) want+="redis " ;;
		helm) want+="helm " ;;
		stripe | stripe-mock) want+="stripe " ;;
		chromium | chrome) want+="chromium " ;;
		*) am_die "AGENTMARKET_TEST_SERVICES: unknown service '$s' ($ALL_SERVICES, all, none)" ;;
		esac
	done
	local out=""
	for s in $ALL_SERVICES; do
		[[ $want == *" $s "* ]] && out+="$s "
	done
	printf '%s' "${out% }"
}

start_services() {
	local s
	for s in $SERVICES; do
		case $s in
		postgres)
			if [ -n "${AGENTMARKET_TEST_DATABASE_URL:-}" ]; then
				am_log "PostgreSQL: using AGENTMARKET_TEST_DATABASE_URL from the environment"
			else
				am_start_postgres
			fi
			;;
		clickhouse)
			if [ -n "${AGENTMARKET_TEST_CLICKHOUSE_DSN:-}" ]; then
				am_log "ClickHouse: using AGENTMARKET_TEST_CLICKHOUSE_DSN from the environment"
			else
				am_start_clickhouse
			fi
			;;
		clickhouse-cluster)
			if [ -n "${AGENTMARKET_TEST_CLICKHOUSE_CLUSTER:-}" ]; then
				am_log "ClickHouse cluster: using AGENTMARKET_TEST_CLICKHOUSE_CLUSTER from the environment"
			else
				am_start_clickhouse_cluster
			fi
			;;
		redis)
			if [ -n "${AGENTMARKET_TEST_REDIS_URL:-}" ]; then
				am_log "Redis: using AGENTMARKET_TEST_REDIS_URL from the environment"
			else
				am_start_redis
			fi
			;;
		helm) am_ensure_helm ;;
		stripe)
			if [ -n "${AGENTMARKET_TEST_STRIPE_API_BASE:-}" ]; then
				am_log "stripe-mock: using AGENTMARKET_TEST_STRIPE_API_BASE from the environment"
			else
				am_start_stripe_mock
			fi
			;;
		chromium) am_ensure_chromium ;;
		esac
	done
}

# ensure_cgo makes sure -race can build (it needs cgo and a C compiler).
ensure_cgo() {
	command -v gcc >/dev/null 2>&1 || am_apt_install gcc libc6-dev
}

run_gofmt() {
	local out rc=0
	out=$(gofmt -l . 2>&1) || rc=$?
	# Golden inputs under testdata/ may be unformatted (or not Go) on purpose.
	out=$(printf '%s\n' "$out" | grep -Ev '(^|/)testdata/' | sed '/^$/d' || true)
	if [ -n "$out" ]; then
		echo "gofmt -l lists files that are not gofmt-formatted (run gofmt -w on them):"
		printf '%s\n' "$out"
		return 1
	fi
	[ "$rc" -eq 0 ] || am_warn "gofmt exited $rc on files under testdata/ only (ignored)"
	echo "ok: every Go file is gofmt-formatted"
}

# summarize_go_test LABEL filters `go test -v` output down to what a reader needs
# and closes with a plain "N passed, N failed, N skipped" line over top-level tests;
# the counts are also kept under LABEL for the run's closing summary.
summarize_go_test() {
	# A failed package also gets the last lines of its own output: a crash,
	# a fatal error, or a helper's log line outside a _test.go file would
	# otherwise vanish from the summary.
	awk -v counts="$AM_WORKDIR/counts.$1" '
		!/^=== (RUN|PAUSE|CONT|NAME)/ && !/^ *--- PASS/ { buf[n++ % 150] = $0 }
		# A race report is printed whole: it comes before its test'"'"'s FAIL line.
		/^==================$/ { inrace = !inrace; print; next }
		inrace { print; next }
		/^=== (RUN|PAUSE|CONT|NAME)/ { next }
		/^--- PASS/ { passed++; print; next }
		/^--- FAIL/ { failed++; print; show = 1; next }
		/^--- SKIP/ { skipped++; print; show = 1; next }
		/^ +--- PASS: [^ ]+\/(postgres|clickhouse|stripe|chromium) / { print; next }
		/^ +--- (FAIL|SKIP)/ { print; show = 1; next }
		/^ +--- PASS/ { show = 0; next }
		/^FAIL\t/ {
			print "--- the last lines of the failed package:"
			for (i = (n > 150 ? n - 150 : 0); i < n - 1; i++) print "    | " buf[i % 150]
		}
		/^(ok|FAIL|\?|PASS$|panic:|fatal error:)/ { print; show = 0 }
		/^(ok +|FAIL)\t/ { n = 0; next }
		/^(\?|PASS$|panic:|fatal error:)/ { next }
		show || /^ +[^ ].*_test\.go:[0-9]+:/ { print }
		END {
			printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped
			printf "%d %d %d\n", passed, failed, skipped > counts
		}
	'
}

# print_summary closes the run: the top-level tests of every go test step, each
# step and in total, and how long the whole run took.
print_summary() {
	local label p f s a b c tp=0 tf=0 ts=0 line="" file found
	for label in race other chart; do
		# The other packages' counts come from several jobs (other, other1, ...).
		found="" p=0 f=0 s=0
		for file in "$AM_WORKDIR/counts.$label" "$AM_WORKDIR/counts.$label"[0-9]*; do
			[ -f "$file" ] || continue
			found=1
			read -r a b c <"$file"
			p=$((p + a)) f=$((f + b)) s=$((s + c))
		done
		[ -n "$found" ] || continue
		tp=$((tp + p)) tf=$((tf + f)) ts=$((ts + s))
		case $label in
		race) line+="with the race detector (${RACE_PATTERNS[*]}): $p passed, $f failed, $s skipped; " ;;
		other) line+="the other packages: $p passed, $f failed, $s skipped; " ;;
		chart) line+="the Helm chart's check: $p passed, $f failed, $s skipped; " ;;
		esac
	done
	step "summary"
	printf '    top-level tests %s\n' "${line%; }"
	printf '    in total: %d passed, %d failed, %d skipped (plus the %s fuzz run of FuzzReadingRule) in %ss\n' \
		"$tp" "$tf" "$ts" "${AGENTMARKET_TEST_FUZZTIME:-1000000x}" "$(am_since "$T0")"
}

# SHARDED_PKG is the package whose tests are split into $SHARDS concurrent go test runs.
SHARDED_PKG=github.com/agentmarket/agentmarket/cmd/marketplace
SHARDS=${AGENTMARKET_TEST_SHARDS:-4}
JOBS=()

# start_job NAME FUNC ARGS... runs FUNC ARGS in the background, its output into
# $AM_WORKDIR/job.NAME.log and the names of its failed steps into job.NAME.failed.
start_job() {
	local name=$1
	shift
	(
		set +e
		FAILED=()
		"$@"
		printf '%s\n' "${FAILED[@]}" >"$AM_WORKDIR/job.$name.failed"
	) >"$AM_WORKDIR/job.$name.log" 2>&1 &
	JOBS+=("$name:$!")
}

# wait_jobs waits for every job started, prints each one's output in the order
# they were started, and adds their failed steps to FAILED.
wait_jobs() {
	local job name pid f
	for job in "${JOBS[@]}"; do
		wait "${job#*:}" || true
	done
	for job in "${JOBS[@]}"; do
		name=${job%%:*}
		cat "$AM_WORKDIR/job.$name.log"
		if [ ! -f "$AM_WORKDIR/job.$name.failed" ]; then
			FAILED+=("job $name (no result)")
			continue
		fi
		while IFS= read -r f; do
			[ -z "$f" ] || FAILED+=("$f")
		done <"$AM_WORKDIR/job.$name.failed"
	done
	JOBS=()
}

# race_step PKGS: the concurrent hot paths' tests with the race detector.
race_step() {
	step "go test -count=1 -race ${RACE_PATTERNS[*]}"
	if [ -z "$1" ]; then
		am_log "no test files under ${RACE_PATTERNS[*]} yet: skipped"
	else
		# shellcheck disable=SC2086 # one import path per word
		CGO_ENABLED=1 run_go test -v -count=1 -race -timeout "$GO_TEST_TIMEOUT" $1 | summarize_go_test race ||
			FAILED+=("go test -race")
	fi
}

# fuzz_step: the reading rule's differential fuzz test.
fuzz_step() {
	# The differential fuzz test of the meter's reading rule, for a bounded number of
	# inputs beyond its committed corpus (a2aproxy/wire/testdata/fuzz/FuzzReadingRule).
	# A count, not a duration: with a duration Go 1.26's fuzz coordinator can report
	# its own stop as "context deadline exceeded" on a loaded machine
	# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
	# A million inputs take about 25 s on an idle machine.
	step "go test -fuzz FuzzReadingRule -fuzztime ${AGENTMARKET_TEST_FUZZTIME:-1000000x} ./a2aproxy/wire/"
	run_go test -run '^$' -fuzz '^FuzzReadingRule$' -fuzztime "${AGENTMARKET_TEST_FUZZTIME:-1000000x}" ./a2aproxy/wire/ || FAILED+=("fuzz FuzzReadingRule")
}

# other_step PKGS [LABEL]: every other package but the sharded one, without
# the race detector (-v, filtered: package results, every failure and skip,
# and each test's run against a real service (".../postgres") stay
# visible), counted under LABEL (default other).
other_step() {
	step "go test -count=1 $1"
	[ -n "${1// /}" ] || return 0
	# shellcheck disable=SC2086 # one import path per word
	run_go test -v -count=1 -timeout "$GO_TEST_TIMEOUT" $1 | summarize_go_test "${2:-other}" || FAILED+=("go test")
}

# shard_tests PKG N prints N -run patterns, one a line, that split PKG's
# top-level tests among them (dealt in turn, in the order go test lists them);
# nothing when the package does not build.
shard_tests() {
	local names
	names=$(go test -list '.*' "$1" 2>/dev/null | grep -E '^(Test|Example|Fuzz)' || true)
	[ -n "$names" ] || return 0
	printf '%s\n' "$names" | awk -v n="$2" '
		{ s[(NR - 1) % n] = s[(NR - 1) % n] (s[(NR - 1) % n] == "" ? "" : "|") $0 }
		END { for (i = 0; i < n; i++) if (s[i] != "") printf "^(%s)$\n", s[i] }
	'
}

# shard_step PKG K/N PATTERN: shard K of N of PKG's tests.
shard_step() {
	step "go test -count=1 $1, shard $2 ($(printf '%s' "$3" | tr -cd '|' | wc -c | awk '{print $1 + 1}') tests)"
	run_go test -v -count=1 -timeout "$GO_TEST_TIMEOUT" -run "$3" "$1" | summarize_go_test "other${2%%/*}" || FAILED+=("go test ($1, shard $2)")
}

main() {
	command -v go >/dev/null 2>&1 || am_die "go is not on PATH"
	SERVICES=$(parse_services "${AGENTMARKET_TEST_SERVICES-all}")

	trap am_cleanup EXIT
	trap 'on_signal 130' INT
	trap 'on_signal 143' TERM

	step "services: ${SERVICES:-none}  ($(go version | awk '{print $3, $4}'))"
	am_make_workdir
	am_log "work dir $AM_WORKDIR"
	start_services
	# The README's tour and the split deployment's steps run as written: with curl.
	command -v curl >/dev/null 2>&1 || am_apt_install curl
	# Signed cards are checked by a verifier of their own (scripts/cardsig.mjs): with node.
	command -v node >/dev/null 2>&1 || am_apt_install nodejs
	export AGENTMARKET_TEST_SERVICES="${SERVICES// /,}"
	export AGENTMARKET_TEST_REQUIRE_SERVICES=1
	# The billing property test tries this many new random buyer sequences
	# besides its fixed seeds (a failure names its seed).
	export AGENTMARKET_BILLING_SEQUENCES="${AGENTMARKET_BILLING_SEQUENCES:-25}"
	env | grep '^AGENTMARKET_TEST_' | sort | sed 's/^/    /'

	if [ "$#" -gt 0 ]; then
		step "go test -count=1 -timeout $GO_TEST_TIMEOUT $*"
		local rc=0
		run_go test -count=1 -timeout "$GO_TEST_TIMEOUT" "$@" || rc=$?
		exit "$rc"
	fi

	step "gofmt -l ."
	run_gofmt || FAILED+=("gofmt")

	step "go vet ./... (and the chart check's module, scripts/chartcheck)"
	run_go vet ./... || FAILED+=("go vet")
	run_go -C scripts/chartcheck vet ./... || FAILED+=("go vet (chartcheck)")

	# Only packages that have tests; the dirs may still be empty.
	local race_pkgs all_pkgs rest_pkgs p shard
	race_pkgs=$(go list -e -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' \
		"${RACE_PATTERNS[@]}" 2>/dev/null || true)
	[ -z "$race_pkgs" ] || ensure_cgo

	# The race tests run alone: they hold the CPU, and some measure fairness
	# in real time (push under flood).
	race_step "$race_pkgs"

	# The steps below run at once, each its own job with its output in a file,
	# printed whole in this order when all have ended: the marketplace's tests
	# mostly wait on services and subprocesses (the CPU idles 80-98% while they
	# run alone), so they are split into shards by name and run beside the
	# fuzz test and the other packages.
	start_job fuzz fuzz_step
	if all_pkgs=$(go list -e ./... 2>/dev/null) && [ -n "$all_pkgs" ]; then
		rest_pkgs=""
		for p in $all_pkgs; do
			[[ $'\n'$race_pkgs$'\n' == *$'\n'$p$'\n'* ]] && continue
			[ "$p" = "$SHARDED_PKG" ] && continue
			rest_pkgs+="$p "
		done
		start_job other other_step "$rest_pkgs"
		if [[ $'\n'$all_pkgs$'\n' == *$'\n'$SHARDED_PKG$'\n'* ]]; then
			local -a shards
			mapfile -t shards < <(shard_tests "$SHARDED_PKG" "$SHARDS")
			if [ "${#shards[@]}" -eq 0 ]; then
				# go test -list failed (the package does not build): let go test say why.
				start_job other1 other_step "$SHARDED_PKG" other1
			fi
			for shard in "${!shards[@]}"; do
				start_job "other$((shard + 1))" shard_step "$SHARDED_PKG" "$((shard + 1))/${#shards[@]}" "${shards[$shard]}"
			done
		fi
	else
		# go list could not even load the module: let go test say why.
		start_job other other_step ./...
	fi
	wait_jobs

	# The Helm chart: helm lint, helm template, every manifest decoded strictly into the
	# Kubernetes API's types (a module of its own: those types stay out of go.mod).
	step "go test ./scripts/chartcheck (the Helm chart)"
	run_go -C scripts/chartcheck test -v -count=1 -timeout "$GO_TEST_TIMEOUT" ./... | summarize_go_test chart || FAILED+=("chart check")

	# The web UI's screenshots in docs/ are made by scripts/screenshots.sh: run it
	# here (into a temp dir) so that it keeps working as the UI changes.
	if [[ " $SERVICES " == *" chromium "* ]]; then
		step "scripts/screenshots.sh (the web UI's screenshots, into a temp dir)"
		local shots="$AM_WORKDIR/screenshots" n=0
		if scripts/screenshots.sh "$shots"; then
			n=$(find "$shots" -name '*.png' -size +10k | wc -l)
		fi
		if [ "$n" -ge 6 ]; then
			echo "ok: $n screenshots"
		else
			echo "screenshots.sh made $n of the 6 screenshots"
			FAILED+=("screenshots")
		fi
	fi

	print_summary
	if [ "${#FAILED[@]}" -gt 0 ]; then
		printf 'test.sh: FAILED: %s\n' "$(
			IFS=,
			echo "${FAILED[*]}"
		)" >&2
		exit 1
	fi
}

# Sourced (scripts/summary_test.go reads the functions), it only defines them.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
