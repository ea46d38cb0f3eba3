# shellcheck shell=bash
# Throwaway services for scripts/test.sh: PostgreSQL, ClickHouse (a server, and a cluster
# of three with ZooKeeper), Redis, stripe-mock, Chromium; and the helm binary.
#
# Sourced, not run. Every service lives under one work directory ($AM_WORKDIR) and is
# stopped by am_cleanup, which test.sh installs as its EXIT trap. Each start function
# exports the AGENTMARKET_TEST_* variable(s) that the Go tests read.
#
# Versions are pinned where the tests depend on behaviour (see shared/infra.md):
# PostgreSQL 15 (Debian), ClickHouse 18.16 (Debian; the only server installable here),
# ZooKeeper 3.8 (Debian), Redis 7.0 (Debian), stripe-mock v0.162.0 (later versions dropped usage records),
# helm v3.22.0.

AM_STRIPE_MOCK_VERSION=v0.162.0

AM_WORKDIR=""          # set by am_make_workdir
AM_PG_BIN=""           # directory holding initdb/pg_ctl
AM_PG_DATA=""          # data dir of the running cluster, empty when none
AM_CH_PID=""           # pid of our clickhouse-server, empty when none
AM_STRIPE_PID=""       # pid of our stripe-mock, empty when none
AM_REDIS_PID=""        # pid of our redis-server, empty when none
AM_CLUSTER_PIDS=""     # pids of our ClickHouse cluster's nodes, space-separated
AM_ZK_PID=""           # pid of our ZooKeeper, empty when none
AM_ZK_PORT=""
AM_APT_UPDATED=0
AM_USED_PORTS=" "
# The server settings of am_start_postgres: a throwaway cluster for tests (no durability).
# scripts/meterbench-pg.sh sets its own, for PostgreSQL's default durability.
AM_PG_SETTINGS="${AM_PG_SETTINGS:--c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300}"

am_log() { printf '    %s\n' "$*"; }
am_warn() { printf 'test.sh: warning: %s\n' "$*" >&2; }
am_die() {
	printf 'test.sh: error: %s\n' "$*" >&2
	exit 1
}

# am_now prints seconds since the epoch with microseconds (bash 5).
am_now() { printf '%s' "${EPOCHREALTIME:-$(date +%s.%N)}"; }
# am_since START prints the seconds elapsed since START, e.g. "1.62".
am_since() { awk -v a="$1" -v b="$(am_now)" 'BEGIN { printf "%.2f", b - a }'; }

am_is_root() { [ "$(id -u)" -eq 0 ]; }

# am_as_pg runs a command as the postgres user: initdb and postgres refuse to run as root.
am_as_pg() {
	if am_is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# am_apt_install installs Debian packages, running `apt-get update` at most once per run.
am_apt_install() {
	local sudo=()
	if ! am_is_root; then
		command -v sudo >/dev/null 2>&1 || am_die "need root (or sudo) to install: $*"
		sudo=(sudo)
	fi
	local t0 log=${AM_WORKDIR:-/tmp}/apt.log
	t0=$(am_now)
	if [ "$AM_APT_UPDATED" -eq 0 ]; then
		"${sudo[@]}" apt-get update >"$log" 2>&1 </dev/null || {
			tail -n 30 "$log" >&2
			am_die "apt-get update failed"
		}
		AM_APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "$@" \
		>>"$log" 2>&1 </dev/null || {
		tail -n 30 "$log" >&2
		am_die "apt-get install $* failed"
	}
	am_log "installed $* (apt-get) in $(am_since "$t0")s"
}

# --- ports -------------------------------------------------------------------------------

# am_port_busy PORT succeeds when a TCP socket on this machine already uses PORT.
am_port_busy() {
	local p=$1
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htan "sport = :$p" 2>/dev/null)" ]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
	fi
}

# am_pick_port VAR stores in VAR a TCP port that nothing uses and that this run has not
# handed out before. Ports are taken below the kernel's ephemeral range, from a random
# base, so that concurrent runs and outgoing connections rarely meet.
am_pick_port() {
	local var=$1 lo=15000 hi=32767 eph_lo _ span p i
	if read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$eph_lo" -gt $((lo + 1000)) ]; then
		hi=$((eph_lo - 1))
	fi
	span=$((hi - lo))
	p=$((lo + (RANDOM * 32768 + RANDOM) % span))
	for ((i = 0; i < span; i++)); do
		if [[ $AM_USED_PORTS != *" $p "* ]] && ! am_port_busy "$p"; then
			AM_USED_PORTS+="$p "
			printf -v "$var" '%s' "$p"
			return 0
		fi
		p=$((p + 1))
		[ "$p" -lt "$hi" ] || p=$lo
	done
	am_die "no free TCP port between $lo and $hi"
}

# am_wait_port PORT SECONDS PID waits until something listens on 127.0.0.1:PORT, failing
# early when process PID (if given) has exited.
am_wait_port() {
	local port=$1 secs=$2 pid=${3:-} deadline
	deadline=$(($(date +%s) + secs))
	while [ "$(date +%s)" -le "$deadline" ]; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
	return 1
}

# am_stop_pid PID NAME sends SIGTERM, waits up to 10 s, then SIGKILL.
am_stop_pid() {
	local pid=$1 name=$2 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		am_warn "$name (pid $pid) ignored SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# am_stop_pids NAME PID... stops several processes at once: SIGTERM to all, up to
# 10 s for all, then SIGKILL to those left.
am_stop_pids() {
	local name=$1 pid i left
	shift
	for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
	for ((i = 0; i < 200; i++)); do
		left=0
		for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
		[ "$left" -eq 0 ] && break
		sleep 0.05
	done
	for pid in "$@"; do
		if kill -0 "$pid" 2>/dev/null; then
			am_warn "$name (pid $pid) ignored SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
}

# am_kill_tree PID SIGNAL signals PID and all its descendants (children first), e.g. the
# go command and the test binaries it runs.
am_kill_tree() {
	local pid=$1 sig=$2 child
	if command -v pgrep >/dev/null 2>&1; then
		for child in $(pgrep -P "$pid" 2>/dev/null); do
			am_kill_tree "$child" "$sig"
		done
	fi
	kill -"$sig" "$pid" 2>/dev/null || true
}

# --- work directory and cleanup ------------------------------------------------------------

# am_tmp_base prints a directory for the work dir that the postgres user can traverse
# ($TMPDIR may be under /root, which it cannot).
am_tmp_base() {
	local base=${TMPDIR:-/tmp}
	base=${base%/}
	if [ ! -d "$base" ] || ! [ -w "$base" ]; then
		base=/tmp
	elif am_is_root && id postgres >/dev/null 2>&1 && ! runuser -u postgres -- test -x "$base" 2>/dev/null; then
		base=/tmp
	fi
	printf '%s' "$base"
}

# am_sweep_stale removes work dirs of earlier runs whose script died without its trap
# (SIGKILL, machine reset), stopping any service they left running. Dirs of runs that are
# still alive are left alone.
am_sweep_stale() {
	local base=$1 d owner pidf pid
	[ -n "$AM_PG_BIN" ] || am_find_pg_bin || true
	for d in "$base"/agentmarket-test.*; do
		[ -d "$d" ] || continue
		owner=$(cat "$d/owner.pid" 2>/dev/null || true)
		if [ -n "$owner" ]; then
			kill -0 "$owner" 2>/dev/null && continue
		elif [ -z "$(find "$d" -maxdepth 0 -mmin +30 2>/dev/null)" ]; then
			continue # just created by a run that has not written its pid yet
		fi
		am_log "removing leftovers of an earlier run: $d"
		if [ -f "$d/pg/postmaster.pid" ] && [ -n "$AM_PG_BIN" ]; then
			am_as_pg "$AM_PG_BIN/pg_ctl" -D "$d/pg" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
		fi
		for pidf in "$d"/*.svcpid; do
			[ -f "$pidf" ] || continue
			pid=$(cat "$pidf" 2>/dev/null || true)
			# Only kill the pid if it still is the service we started (pids get reused).
			if [ -n "$pid" ] && grep -qa -e clickhouse -e stripe-mock -e zookeeper "/proc/$pid/cmdline" 2>/dev/null; then
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done
		rm -rf "$d" 2>/dev/null || am_warn "could not remove $d"
	done
}

am_make_workdir() {
	local base
	base=$(am_tmp_base)
	am_sweep_stale "$base"
	AM_WORKDIR=$(mktemp -d "$base/agentmarket-test.XXXXXX") || am_die "mktemp failed in $base"
	# The postgres user must traverse it to reach its data dir.
	chmod 755 "$AM_WORKDIR"
	echo $$ >"$AM_WORKDIR/owner.pid"
}

# am_cleanup stops every service this run started and removes the work dir. It is the
# EXIT trap, so it must not fail and stays quiet: go test's output closes the log.
am_cleanup() {
	set +e
	if [ -n "$AM_REDIS_PID" ]; then
		am_stop_pid "$AM_REDIS_PID" redis-server
		AM_REDIS_PID=""
	fi
	if [ -n "$AM_STRIPE_PID" ]; then
		am_stop_pid "$AM_STRIPE_PID" stripe-mock
		AM_STRIPE_PID=""
	fi
	if [ -n "$AM_CH_PID" ]; then
		am_stop_pid "$AM_CH_PID" clickhouse-server
		AM_CH_PID=""
	fi
	if [ -n "$AM_CLUSTER_PIDS" ]; then
		# shellcheck disable=SC2086 # one pid per word
		am_stop_pids clickhouse-server $AM_CLUSTER_PIDS
		AM_CLUSTER_PIDS=""
	fi
	if [ -n "$AM_ZK_PID" ]; then
		am_stop_pid "$AM_ZK_PID" zookeeper
		AM_ZK_PID=""
	fi
	if [ -n "$AM_PG_DATA" ]; then
		if ! am_as_pg "$AM_PG_BIN/pg_ctl" -D "$AM_PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1; then
			am_as_pg "$AM_PG_BIN/pg_ctl" -D "$AM_PG_DATA" -m immediate -w -t 10 stop >/dev/null 2>&1 ||
				am_warn "could not stop PostgreSQL in $AM_PG_DATA"
		fi
		AM_PG_DATA=""
	fi
	if [ -n "$AM_WORKDIR" ] && [ -d "$AM_WORKDIR" ]; then
		rm -rf "$AM_WORKDIR" || am_warn "could not remove $AM_WORKDIR"
	fi
	AM_WORKDIR=""
}

# --- PostgreSQL ----------------------------------------------------------------------------

am_find_pg_bin() {
	local d
	if [ -x /usr/lib/postgresql/15/bin/initdb ]; then
		AM_PG_BIN=/usr/lib/postgresql/15/bin
		return 0
	fi
	# Any other installed major version will do for a throwaway cluster; take the newest.
	d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	if [ -n "$d" ] && [ -x "$d/initdb" ]; then
		AM_PG_BIN=$d
		return 0
	fi
	return 1
}

am_ensure_postgres() {
	am_find_pg_bin && return 0
	am_apt_install postgresql
	am_find_pg_bin || am_die "PostgreSQL installed but no initdb under /usr/lib/postgresql/*/bin"
}

# am_start_postgres starts a throwaway cluster (trust auth; fsync off unless AM_PG_SETTINGS
# says otherwise) on 127.0.0.1 and exports AGENTMARKET_TEST_DATABASE_URL. Tests create their
# own databases from it.
am_start_postgres() {
	local t0 data port try ok=0
	t0=$(am_now)
	am_ensure_postgres
	if am_is_root; then
		id postgres >/dev/null 2>&1 || am_die "no postgres user (is the postgresql package installed?)"
	fi
	data=$AM_WORKDIR/pg
	if am_is_root; then
		install -d -o postgres -g postgres -m 700 "$data"
	else
		install -d -m 700 "$data"
	fi
	am_as_pg "$AM_PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale --no-sync \
		>"$AM_WORKDIR/initdb.log" 2>&1 </dev/null ||
		{
			cat "$AM_WORKDIR/initdb.log" >&2
			am_die "initdb failed"
		}
	# A port can be taken between the check and the bind (another run); try a few.
	for try in 1 2 3; do
		am_pick_port port
		if am_as_pg "$AM_PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $data $AM_PG_SETTINGS" \
			start >"$AM_WORKDIR/pg_ctl.log" 2>&1 </dev/null; then
			ok=1
			break
		fi
		am_warn "PostgreSQL did not start on port $port (try $try)"
		# pg_ctl -w may give up while the postmaster still runs: make sure it is gone.
		am_as_pg "$AM_PG_BIN/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
	done
	if [ "$ok" -ne 1 ]; then
		tail -n 30 "$data/server.log" "$AM_WORKDIR/pg_ctl.log" >&2 2>/dev/null
		am_die "PostgreSQL did not start"
	fi
	AM_PG_DATA=$data
	export AGENTMARKET_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	am_log "PostgreSQL $("$AM_PG_BIN/postgres" -V | awk '{print $3}') on 127.0.0.1:$port, up in $(am_since "$t0")s"
}

# --- ClickHouse ----------------------------------------------------------------------------

am_ensure_clickhouse() {
	command -v clickhouse-server >/dev/null 2>&1 && command -v clickhouse-client >/dev/null 2>&1 && return 0
	am_apt_install clickhouse-server clickhouse-client
	command -v clickhouse-server >/dev/null 2>&1 || am_die "clickhouse-server not found after install"
}

# am_write_clickhouse_config DIR TCP_PORT HTTP_PORT writes a self-contained server config:
# nothing under /etc or /var is read or written.
am_write_clickhouse_config() {
	local dir=$1 tcp=$2 http=$3
	mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
	cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>$dir/server.log</log>
    <errorlog>$dir/server.err.log</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>$tcp</tcp_port>
  <http_port>$http</http_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>200</max_concurrent_queries>
</yandex>
EOF
	cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>4000000000</max_memory_usage>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks>
        <ip>127.0.0.1</ip>
        <ip>::1</ip>
      </networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries>
        <errors>0</errors>
        <result_rows>0</result_rows>
        <read_rows>0</read_rows>
        <execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
EOF
}

# am_start_clickhouse runs clickhouse-server (as the current user: 18.16 accepts root) on
# free ports and exports AGENTMARKET_TEST_CLICKHOUSE_DSN (native protocol; the HTTP
# protocol does not work between clickhouse-go v2 and 18.16).
am_start_clickhouse() {
	local t0 dir tcp http try ok=0 i
	t0=$(am_now)
	am_ensure_clickhouse
	dir=$AM_WORKDIR/clickhouse
	for try in 1 2 3; do
		am_pick_port tcp
		am_pick_port http
		rm -rf "$dir"
		am_write_clickhouse_config "$dir" "$tcp" "$http"
		clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout.log" 2>&1 </dev/null &
		AM_CH_PID=$!
		echo "$AM_CH_PID" >"$AM_WORKDIR/clickhouse.svcpid"
		for ((i = 0; i < 600; i++)); do # 30 s
			if clickhouse-client --host 127.0.0.1 --port "$tcp" -q 'SELECT 1' >/dev/null 2>&1; then
				ok=1
				break
			fi
			kill -0 "$AM_CH_PID" 2>/dev/null || break
			sleep 0.05
		done
		[ "$ok" -eq 1 ] && break
		am_warn "ClickHouse did not start on ports $tcp/$http (try $try)"
		tail -n 20 "$dir/server.err.log" "$dir/stdout.log" >&2 2>/dev/null
		am_stop_pid "$AM_CH_PID" clickhouse-server
		AM_CH_PID=""
	done
	[ "$ok" -eq 1 ] || am_die "ClickHouse did not start"
	export AGENTMARKET_TEST_CLICKHOUSE_DSN="clickhouse://127.0.0.1:$tcp/default"
	am_log "ClickHouse $(clickhouse-client --host 127.0.0.1 --port "$tcp" -q 'SELECT version()' 2>/dev/null) on 127.0.0.1:$tcp (http $http), up in $(am_since "$t0")s"
}

# --- ClickHouse cluster (ZooKeeper and three ClickHouse nodes) ----------------------------

AM_CLUSTER_NAME=agentmarket_test

am_ensure_zookeeper() {
	[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 && return 0
	am_apt_install zookeeper
	[ -f /usr/share/java/zookeeper.jar ] || am_die "zookeeper installed but /usr/share/java/zookeeper.jar is missing"
}

# am_ch_ok PORT succeeds when a ClickHouse server answers on 127.0.0.1:PORT.
am_ch_ok() { clickhouse-client --host 127.0.0.1 --port "$1" -q 'SELECT 1' >/dev/null 2>&1; }

# am_zk_ok PORT succeeds when ZooKeeper on 127.0.0.1:PORT says it is fine.
am_zk_ok() {
	local out
	out=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && timeout 1 cat <&3) 2>/dev/null) || return 1
	[ "$out" = imok ]
}

# am_start_zookeeper starts a standalone ZooKeeper on a free loopback port (no admin
# server) and sets AM_ZK_PORT.
am_start_zookeeper() {
	local dir=$AM_WORKDIR/zookeeper i try
	am_ensure_zookeeper
	for try in 1 2 3; do
		am_pick_port AM_ZK_PORT
		rm -rf "$dir"
		mkdir -p "$dir/data"
		printf '%s\n' "tickTime=500" "initLimit=10" "syncLimit=5" "dataDir=$dir/data" "clientPort=$AM_ZK_PORT" \
			"clientPortAddress=127.0.0.1" "admin.enableServer=false" "maxClientCnxns=0" "4lw.commands.whitelist=ruok" >"$dir/zoo.cfg"
		java -Xmx128m -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dzookeeper.jmx.log4j.disable=true \
			-cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
			>"$dir/zookeeper.log" 2>&1 </dev/null &
		AM_ZK_PID=$!
		echo "$AM_ZK_PID" >"$AM_WORKDIR/zookeeper.svcpid"
		for ((i = 0; i < 300; i++)); do # 30 s
			am_zk_ok "$AM_ZK_PORT" && return 0
			kill -0 "$AM_ZK_PID" 2>/dev/null || break
			sleep 0.1
		done
		am_warn "ZooKeeper did not start on port $AM_ZK_PORT (try $try)"
		tail -n 20 "$dir/zookeeper.log" >&2 2>/dev/null
		am_stop_pid "$AM_ZK_PID" zookeeper
		AM_ZK_PID=""
	done
	am_die "ZooKeeper did not start"
}

# am_cluster_xml TCP0 TCP1 TCP2 prints the remote_servers entry of the test cluster:
# shard 01 with two replicas (nodes 1 and 2), shard 02 with one (node 3).
am_cluster_xml() {
	printf '<remote_servers><%s>' "$AM_CLUSTER_NAME"
	printf '<shard><internal_replication>true</internal_replication>'
	printf '<replica><host>127.0.0.1</host><port>%s</port></replica>' "$1" "$2"
	printf '</shard><shard><internal_replication>true</internal_replication>'
	printf '<replica><host>127.0.0.1</host><port>%s</port></replica>' "$3"
	printf '</shard></%s></remote_servers>' "$AM_CLUSTER_NAME"
}

# am_cluster_alive TCP... succeeds when every node answers.
am_cluster_alive() {
	local port
	for port in "$@"; do am_ch_ok "$port" || return 1; done
}

# am_restart_dead_nodes TCP0 TCP1 TCP2 starts again the cluster's nodes that stopped
# (their config and data are kept) and waits until every node answers.
am_restart_dead_nodes() {
	local ports=("$@") pids=() pid n i dir
	read -r -a pids <<<"$AM_CLUSTER_PIDS"
	AM_CLUSTER_PIDS=""
	for n in 0 1 2; do
		pid=${pids[$n]}
		if ! kill -0 "$pid" 2>/dev/null; then
			dir=$AM_WORKDIR/cluster-node$((n + 1))
			clickhouse-server --config-file="$dir/config.xml" >>"$dir/stdout.log" 2>&1 </dev/null &
			pid=$!
			echo "$pid" >"$AM_WORKDIR/cluster-node$((n + 1)).svcpid"
		fi
		AM_CLUSTER_PIDS+="$pid "
	done
	for ((i = 0; i < 600; i++)); do # 30 s
		am_cluster_alive "${ports[@]}" && return 0
		sleep 0.05
	done
}

# am_start_clickhouse_cluster starts ZooKeeper and three ClickHouse nodes forming the
# cluster $AM_CLUSTER_NAME (am_cluster_xml), each with its {shard} and {replica}
# macros and distributed DDL, and exports AGENTMARKET_TEST_CLICKHOUSE_CLUSTER and
# AGENTMARKET_TEST_CLICKHOUSE_CLUSTER_NODES (the nodes' DSNs, node 1 first).
am_start_clickhouse_cluster() {
	local t0 n dir i ok cluster extra nodes="" tcp=() http=() inter=() shards=(01 01 02)
	t0=$(am_now)
	am_ensure_clickhouse
	am_start_zookeeper
	for n in 0 1 2; do
		am_pick_port "tcp[$n]"
		am_pick_port "http[$n]"
		am_pick_port "inter[$n]"
	done
	cluster=$(am_cluster_xml "${tcp[@]}")
	for n in 0 1 2; do
		dir=$AM_WORKDIR/cluster-node$((n + 1))
		am_write_clickhouse_config "$dir" "${tcp[$n]}" "${http[$n]}"
		extra="  <interserver_http_port>${inter[$n]}</interserver_http_port>"
		extra+="<interserver_http_host>127.0.0.1</interserver_http_host>"
		extra+="<zookeeper><node><host>127.0.0.1</host><port>$AM_ZK_PORT</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>"
		extra+="<distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>"
		extra+="<macros><shard>${shards[$n]}</shard><replica>node$((n + 1))</replica></macros>$cluster"
		sed -i "s|</yandex>|$extra\n</yandex>|" "$dir/config.xml"
		clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout.log" 2>&1 </dev/null &
		AM_CLUSTER_PIDS+="$! "
		echo "$!" >"$AM_WORKDIR/cluster-node$((n + 1)).svcpid"
	done
	for n in 0 1 2; do
		ok=0
		for ((i = 0; i < 600; i++)); do # 30 s
			if am_ch_ok "${tcp[$n]}"; then
				ok=1
				break
			fi
			sleep 0.05
		done
		if [ "$ok" -ne 1 ]; then
			tail -n 20 "$AM_WORKDIR/cluster-node$((n + 1))/server.err.log" "$AM_WORKDIR/cluster-node$((n + 1))/stdout.log" >&2 2>/dev/null
			am_die "ClickHouse cluster node $((n + 1)) did not start on port ${tcp[$n]}"
		fi
		nodes+="${nodes:+,}clickhouse://127.0.0.1:${tcp[$n]}/default"
	done
	# A distributed DDL query sent right after the start has been seen to crash an 18.16
	# node (twice in about twenty fresh clusters, never later): one goes round first, and
	# a node that dies of it is started again.
	for i in 1 2 3; do
		if clickhouse-client --host 127.0.0.1 --port "${tcp[0]}" -q "CREATE DATABASE IF NOT EXISTS am_warmup ON CLUSTER $AM_CLUSTER_NAME" >/dev/null 2>&1 &&
			clickhouse-client --host 127.0.0.1 --port "${tcp[0]}" -q "DROP DATABASE IF EXISTS am_warmup ON CLUSTER $AM_CLUSTER_NAME" >/dev/null 2>&1 &&
			am_cluster_alive "${tcp[@]}"; then
			break
		fi
		[ "$i" -lt 3 ] || am_die "the ClickHouse cluster does not run distributed DDL (see $AM_WORKDIR/cluster-node*/server.err.log)"
		am_warn "the ClickHouse cluster failed its first distributed DDL (try $i); starting the nodes that stopped again"
		am_restart_dead_nodes "${tcp[@]}"
	done
	export AGENTMARKET_TEST_CLICKHOUSE_CLUSTER=$AM_CLUSTER_NAME
	export AGENTMARKET_TEST_CLICKHOUSE_CLUSTER_NODES=$nodes
	am_log "ClickHouse cluster $AM_CLUSTER_NAME: nodes 127.0.0.1:${tcp[0]} and ${tcp[1]} (shard 01), ${tcp[2]} (shard 02), ZooKeeper $AM_ZK_PORT; up in $(am_since "$t0")s"
}

# --- helm (the chart's checks) -------------------------------------------------------------

AM_HELM_VERSION=v3.22.0

# am_ensure_helm installs helm $AM_HELM_VERSION through the Go module proxy when the one in
# GOBIN is missing or another version (the build takes a minute or two; later runs reuse
# it), and exports AGENTMARKET_TEST_HELM.
am_ensure_helm() {
	local t0 gobin bin
	t0=$(am_now)
	gobin=$(go env GOBIN)
	[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
	bin=$gobin/helm
	if ! { [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -q "helm.sh/helm/v3[[:space:]]*$AM_HELM_VERSION"; }; then
		am_log "installing helm $AM_HELM_VERSION (go install; a minute or two, once)"
		# Outside the module, so the project's go.mod is neither read nor changed.
		(cd / && GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$AM_HELM_VERSION") ||
			am_die "go install helm failed"
	fi
	export AGENTMARKET_TEST_HELM=$bin
	am_log "helm $AM_HELM_VERSION at $bin, ready in $(am_since "$t0")s"
}

# --- stripe-mock ---------------------------------------------------------------------------

am_stripe_mock_bin() {
	local gobin
	gobin=$(go env GOBIN)
	[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
	printf '%s/stripe-mock' "$gobin"
}

am_ensure_stripe_mock() {
	local bin
	bin=$(am_stripe_mock_bin)
	if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -q "stripe-mock[[:space:]]*$AM_STRIPE_MOCK_VERSION"; then
		return 0
	fi
	am_log "installing stripe-mock $AM_STRIPE_MOCK_VERSION (go install)"
	# Outside the module, so the project's go.mod is neither read nor changed.
	(cd / && GOFLAGS=-mod=mod go install "github.com/stripe/stripe-mock@$AM_STRIPE_MOCK_VERSION") ||
		am_die "go install stripe-mock failed"
}

# am_start_stripe_mock starts Stripe's API mock and exports AGENTMARKET_TEST_STRIPE_API_BASE
# and AGENTMARKET_TEST_STRIPE_SECRET_KEY (any sk_test_ key is accepted by the mock).
am_start_stripe_mock() {
	local t0 bin port tls_port try ok=0
	t0=$(am_now)
	am_ensure_stripe_mock
	bin=$(am_stripe_mock_bin)
	for try in 1 2 3; do
		am_pick_port port
		# Without -https-addr it also listens on *:12112, which concurrent runs would share.
		am_pick_port tls_port
		"$bin" -http-addr "127.0.0.1:$port" -https-addr "127.0.0.1:$tls_port" \
			>"$AM_WORKDIR/stripe-mock.log" 2>&1 </dev/null &
		AM_STRIPE_PID=$!
		echo "$AM_STRIPE_PID" >"$AM_WORKDIR/stripe-mock.svcpid"
		if am_wait_port "$port" 30 "$AM_STRIPE_PID"; then
			ok=1
			break
		fi
		am_warn "stripe-mock did not start on port $port (try $try)"
		tail -n 20 "$AM_WORKDIR/stripe-mock.log" >&2 2>/dev/null
		am_stop_pid "$AM_STRIPE_PID" stripe-mock
		AM_STRIPE_PID=""
	done
	[ "$ok" -eq 1 ] || am_die "stripe-mock did not start"
	export AGENTMARKET_TEST_STRIPE_API_BASE="http://127.0.0.1:$port"
	export AGENTMARKET_TEST_STRIPE_SECRET_KEY=sk_test_123
	am_log "stripe-mock $AM_STRIPE_MOCK_VERSION on 127.0.0.1:$port (https $tls_port), up in $(am_since "$t0")s"
}

# --- Redis (the hot state meters share) ---------------------------------------------------

am_ensure_redis() {
	command -v redis-server >/dev/null 2>&1 || am_apt_install redis-server
	command -v redis-server >/dev/null 2>&1 || am_die "redis-server not found after install"
}

# am_start_redis starts a throwaway redis-server (no persistence) on 127.0.0.1 and exports
# AGENTMARKET_TEST_REDIS_URL. Tests keep apart by key prefix or by their own ids.
am_start_redis() {
	local t0 port try ok=0
	t0=$(am_now)
	am_ensure_redis
	for try in 1 2 3; do
		am_pick_port port
		redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize no \
			--dir "$AM_WORKDIR" --logfile "$AM_WORKDIR/redis.log" </dev/null >/dev/null 2>&1 &
		AM_REDIS_PID=$!
		echo "$AM_REDIS_PID" >"$AM_WORKDIR/redis.svcpid"
		if am_wait_port "$port" 30 "$AM_REDIS_PID"; then
			ok=1
			break
		fi
		am_warn "redis-server did not start on port $port (try $try)"
		tail -n 20 "$AM_WORKDIR/redis.log" >&2 2>/dev/null
		am_stop_pid "$AM_REDIS_PID" redis-server
		AM_REDIS_PID=""
	done
	[ "$ok" -eq 1 ] || am_die "redis-server did not start"
	export AGENTMARKET_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
	am_log "Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$port, up in $(am_since "$t0")s"
}

# --- Chromium (browser tests) --------------------------------------------------------------

# am_ensure_chromium installs Debian's chromium and exports AGENTMARKET_TEST_CHROME_PATH for
# chromedp. Tests run it headless with --no-sandbox (root) and with background networking off.
am_ensure_chromium() {
	local t0 bin
	t0=$(am_now)
	bin=$(command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true)
	if [ -z "$bin" ]; then
		am_apt_install chromium
		bin=$(command -v chromium 2>/dev/null) || am_die "chromium not found after install"
	fi
	export AGENTMARKET_TEST_CHROME_PATH=$bin
	am_log "Chromium at $bin ($("$bin" --version 2>/dev/null | head -n 1)), ready in $(am_since "$t0")s"
}
