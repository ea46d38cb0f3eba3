// Package clickhousetest gives tests fresh ClickHouse databases: one per
// test, created on the server that AGENTMARKET_TEST_CLICKHOUSE_DSN names
// (scripts/test.sh starts one) and dropped afterwards; or on every node of
// the cluster that AGENTMARKET_TEST_CLICKHOUSE_CLUSTER names (scripts/test.sh
// starts one with ZooKeeper). Without those variables tests skip, unless
// AGENTMARKET_TEST_REQUIRE_SERVICES=1 makes them fail, so CI can never skip
// silently.
package clickhousetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/agentmarket/agentmarket/metering/clickhouse"
)

// DSNEnv names the variable with the DSN of the test server's admin
// database (native protocol: clickhouse://127.0.0.1:PORT/default).
const DSNEnv = "AGENTMARKET_TEST_CLICKHOUSE_DSN"

// RequireEnv set to 1 turns skips for missing services into failures.
const RequireEnv = "AGENTMARKET_TEST_REQUIRE_SERVICES"

// AdminDSN returns the test server's admin DSN. It skips the test when
// none is configured, or fails it under RequireEnv=1.
func AdminDSN(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(DSNEnv)
	if admin == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s is not set but %s=1: run the tests through scripts/test.sh", DSNEnv, RequireEnv)
		}
		tb.Skipf("%s not set: ClickHouse tests skipped (scripts/test.sh sets it)", DSNEnv)
	}
	return admin
}

// DSN creates a fresh database on the test server and returns a DSN naming
// it; the database is dropped when the test ends.
func DSN(tb testing.TB) string {
	tb.Helper()
	admin := AdminDSN(tb)
	return withDatabase(tb, admin, freshDatabase(tb, admin, ""))
}

// freshDatabase creates a database with a random name through the server
// admin names (on every node of cluster, when given) and drops it when the
// test ends.
func freshDatabase(tb testing.TB, admin, cluster string) string {
	tb.Helper()
	opts, err := ch.ParseDSN(admin)
	if err != nil {
		tb.Fatalf("bad test ClickHouse DSN: %v", err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		tb.Fatalf("connect to test clickhouse: %v", err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	on := ""
	if cluster != "" {
		on = " ON CLUSTER " + cluster
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+name+on); err != nil {
		conn.Close()
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+on); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
		conn.Close()
	})
	return name
}

// withDatabase is dsn naming database name instead.
func withDatabase(tb testing.TB, dsn, name string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("bad test ClickHouse DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Open opens the usage store on a fresh database, closed after the test.
func Open(tb testing.TB) *clickhouse.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := clickhouse.Open(ctx, DSN(tb))
	if err != nil {
		tb.Fatalf("open clickhouse usage store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Cluster variables: the cluster's name in the nodes' remote_servers, and
// the admin DSN of each node (comma-separated, the first shard's replicas
// first).
const (
	ClusterEnv      = "AGENTMARKET_TEST_CLICKHOUSE_CLUSTER"
	ClusterNodesEnv = "AGENTMARKET_TEST_CLICKHOUSE_CLUSTER_NODES"
)

// Cluster creates a fresh database on every node of the test cluster and
// returns the cluster's name and a DSN naming that database on each node;
// the database is dropped on every node when the test ends. It skips the
// test when no cluster is configured, or fails it under RequireEnv=1.
func Cluster(tb testing.TB) (cluster string, nodes []string) {
	tb.Helper()
	cluster, list := os.Getenv(ClusterEnv), os.Getenv(ClusterNodesEnv)
	if cluster == "" || list == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s and %s are not set but %s=1: run the tests through scripts/test.sh with clickhouse-cluster in AGENTMARKET_TEST_SERVICES",
				ClusterEnv, ClusterNodesEnv, RequireEnv)
		}
		tb.Skipf("%s not set: ClickHouse cluster tests skipped (scripts/test.sh sets it)", ClusterEnv)
	}
	admins := strings.Split(list, ",")
	name := freshDatabase(tb, admins[0], cluster)
	for _, a := range admins {
		nodes = append(nodes, withDatabase(tb, a, name))
	}
	return cluster, nodes
}
