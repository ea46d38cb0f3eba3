package clickhouse_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/storetest"
	"github.com/agentmarket/agentmarket/migrations"
)

// TestClusterStatements: each kind of statement the migrations use becomes
// its cluster form, and every statement of every migration has one.
func TestClusterStatements(t *testing.T) {
	got, err := clickhouse.ClusterStatements(`CREATE TABLE IF NOT EXISTS usage (
    id String,
    amount Decimal(18, 6)
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(time)
ORDER BY (buyer_org_id, time, id)`, "am", "agentmarket")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CREATE TABLE IF NOT EXISTS agentmarket.usage_local ON CLUSTER am (\n    id String,\n    amount Decimal(18, 6)\n) " +
			"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/agentmarket/usage_local', '{replica}') PARTITION BY toYYYYMM(time)\nORDER BY (buyer_org_id, time, id)",
		"CREATE TABLE IF NOT EXISTS agentmarket.usage ON CLUSTER am AS agentmarket.usage_local " +
			"ENGINE = Distributed(am, agentmarket, usage_local, cityHash64(buyer_org_id, time, id))",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CREATE TABLE:\n got  %q\n want %q", got, want)
	}

	got, err = clickhouse.ClusterStatements("CREATE TABLE IF NOT EXISTS totals (k String, n Int64) ENGINE = SummingMergeTree(n) ORDER BY k", "am", "db")
	if err != nil || !strings.Contains(got[0], "ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/db/totals_local', '{replica}', n) ORDER BY k") ||
		!strings.HasSuffix(got[1], "cityHash64(k))") {
		t.Errorf("engine with parameters: %q, %v", got, err)
	}

	got, err = clickhouse.ClusterStatements("ALTER TABLE usage ADD COLUMN IF NOT EXISTS region String", "am", "db")
	if err != nil || !reflect.DeepEqual(got, []string{
		"ALTER TABLE db.usage_local ON CLUSTER am ADD COLUMN IF NOT EXISTS region String",
	}) {
		t.Errorf("ALTER: %q, %v", got, err)
	}

	got, err = clickhouse.ClusterStatements("INSERT INTO state (name, value)\nSELECT 'from', now() FROM usage", "am", "db")
	if err != nil || !reflect.DeepEqual(got, []string{"INSERT INTO db.state (name, value) SELECT 'from', now() FROM usage"}) {
		t.Errorf("INSERT … SELECT: %q, %v", got, err)
	}
	got, err = clickhouse.ClusterStatements("CREATE TABLE IF NOT EXISTS usage_rollup (kind UInt8, buyer_org_id String) ENGINE = SummingMergeTree ORDER BY (kind, buyer_org_id)", "am", "db")
	if err != nil || !strings.HasSuffix(got[1], "cityHash64(buyer_org_id))") {
		t.Errorf("usage_rollup is sharded by buyer (a row's marker and cells on one shard): %q, %v", got, err)
	}

	for _, refused := range []string{
		"CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t AS SELECT 1",
		"CREATE TABLE IF NOT EXISTS t (a String) ENGINE = Log",
		"INSERT INTO usage SELECT * FROM old",
	} {
		if _, err := clickhouse.ClusterStatements(refused, "am", "db"); err == nil {
			t.Errorf("%q has a cluster form", refused)
		}
	}

	ms, err := migrations.List(migrations.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, stmt := range clickhouse.Statements(m.SQL) {
			if _, err := clickhouse.ClusterStatements(stmt, "am", "db"); err != nil {
				t.Errorf("%s: %v", m.Version, err)
			}
		}
	}
	if clickhouse.ValidCluster("am; DROP TABLE usage") || !clickhouse.ValidCluster("agentmarket_prod") {
		t.Error("ValidCluster")
	}
}

// TestClusterStore: on a real cluster (ClickHouse 18.16 with ZooKeeper,
// scripts/test.sh), the store keeps the contract every store keeps.
func TestClusterStore(t *testing.T) {
	clickhousetest.Cluster(t) // skip (or fail under scripts/test.sh) before any subtest
	storetest.Run(t, func(t *testing.T) metering.Store {
		cluster, nodes := clickhousetest.Cluster(t)
		return openOn(t, nodes[0], cluster)
	})
}

func openOn(t *testing.T, dsn, cluster string) *clickhouse.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := clickhouse.Open(ctx, dsn, clickhouse.WithCluster(cluster))
	if err != nil {
		t.Fatalf("open on %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClusterSpreadsAndCountsOnce: the migrations create the replicated
// tables and the Distributed ones on every node; rows inserted through one
// node spread over the shards and reach every replica; the same batch sent
// again through another node (a meter re-sending after a crash, behind
// another replica) counts once, whichever node answers.
func TestClusterSpreadsAndCountsOnce(t *testing.T) {
	ctx := context.Background()
	cluster, nodes := clickhousetest.Cluster(t)
	if len(nodes) < 3 {
		t.Fatalf("the test cluster needs 3 nodes (a shard of two replicas and a shard of one), got %d", len(nodes))
	}
	first := openOn(t, nodes[0], cluster)
	last := openOn(t, nodes[len(nodes)-1], cluster) // migrations again, from another node: nothing to do

	t0 := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	var rows []metering.Usage
	for i := range 2000 {
		u := storetest.Row(i, t0.Add(time.Duration(i)*97*time.Millisecond))
		u.BuyerOrgID = []string{"org_a", "org_b", "org_c", "org_d"}[i%4]
		rows = append(rows, u)
	}
	if err := first.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := last.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for i, dsn := range nodes {
		s := openOn(t, dsn, cluster)
		for _, g := range []metering.GroupBy{metering.ByBuyer, metering.ByDay} {
			q := metering.Query{GroupBy: g}
			got, err := s.Totals(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if want := storetest.Reference(rows, q); !reflect.DeepEqual(got, want) {
				t.Errorf("node %d: Totals by %s\n got  %+v\n want %+v", i+1, g, got, want)
			}
		}
	}

	// Each node's own tables: the engines, and where the rows are.
	db := nodes[0][strings.LastIndex(nodes[0], "/")+1:]
	local := make([]uint64, len(nodes))
	for i, dsn := range nodes {
		conn := nodeConn(t, dsn)
		engines := map[string]string{}
		rs, err := conn.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = ?", db)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var name, engine string
			if err := rs.Scan(&name, &engine); err != nil {
				t.Fatal(err)
			}
			engines[name] = engine
		}
		rs.Close()
		want := map[string]string{"usage": "Distributed", "usage_local": "ReplicatedReplacingMergeTree",
			"schema_migrations": "Distributed", "schema_migrations_local": "ReplicatedReplacingMergeTree",
			"usage_rollup": "Distributed", "usage_rollup_local": "ReplicatedSummingMergeTree",
			"usage_rollup_state": "Distributed", "usage_rollup_state_local": "ReplicatedReplacingMergeTree"}
		if !reflect.DeepEqual(engines, want) {
			t.Errorf("node %d: tables %v, want %v", i+1, engines, want)
		}
		// A replica may still be fetching its parts: wait a little.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if err := conn.QueryRow(ctx, "SELECT count() FROM usage_local FINAL").Scan(&local[i]); err != nil {
				t.Fatal(err)
			}
			if i != 1 || local[1] == local[0] || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Nodes 1 and 2 are the replicas of shard 1, node 3 is shard 2.
	if local[0] != local[1] || local[0] == 0 || local[2] == 0 || local[0]+local[2] != uint64(len(rows)) {
		t.Errorf("rows per node %v: want shard 1's on nodes 1 and 2 alike, shard 2's on node 3, %d in all", local, len(rows))
	}
}

// TestClusterModeIsChecked: a database one mode laid out is refused by the
// other, with the setting to change, rather than half migrated.
func TestClusterModeIsChecked(t *testing.T) {
	ctx := context.Background()
	cluster, nodes := clickhousetest.Cluster(t)
	openOn(t, nodes[0], cluster)
	if _, err := clickhouse.Open(ctx, nodes[0]); err == nil || !strings.Contains(err.Error(), "set AGENTMARKET_CLICKHOUSE_CLUSTER") {
		t.Errorf("a cluster's database opened as a single server's: %v", err)
	}

	single := clickhousetest.DSN(t)
	s, err := clickhouse.Open(ctx, single)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := clickhouse.Open(ctx, single, clickhouse.WithCluster("no_such_cluster")); err == nil || !strings.Contains(err.Error(), "holds a single server's table") {
		t.Errorf("a single server's database opened as a cluster's: %v", err)
	}
}

// TestClusterRecoversAStoppedRecreate: a process stopped between the DROP
// and the CREATE of a Distributed table (what an ALTER migration runs on
// a cluster) leaves a local table with no table in front. The migration
// run again makes it from the migrations (there is no table left to read
// its engine from), and a start with no migration left to run makes every
// missing one again: the rows stored before are all there, and inserts go
// on.
func TestClusterRecoversAStoppedRecreate(t *testing.T) {
	ctx := context.Background()
	cluster, nodes := clickhousetest.Cluster(t)
	s := openOn(t, nodes[0], cluster)
	t0 := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	var rows []metering.Usage
	for i := range 50 {
		rows = append(rows, storetest.Row(i, t0.Add(time.Duration(i)*time.Second)))
	}
	if err := s.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	db := nodes[0][strings.LastIndex(nodes[0], "/")+1:]
	conn := nodeConn(t, nodes[0])
	drop := func(table string) {
		t.Helper()
		if err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+db+"."+table+" ON CLUSTER "+cluster); err != nil {
			t.Fatal(err)
		}
	}

	// The migration's rerun: its ALTER is on the local table already.
	drop("usage_rollup")
	start := time.Now()
	if err := s.RecreateDistributed(ctx, "usage_rollup"); err != nil {
		t.Fatalf("the ALTER's rerun after a stop between DROP and CREATE: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the rerun took %v: it waited for a table no one will make", d)
	}

	// A start with nothing left to run.
	drop("usage")
	reopened := openOn(t, nodes[len(nodes)-1], cluster)
	for _, table := range []string{"usage", "usage_rollup"} {
		for i, dsn := range nodes {
			c := nodeConn(t, dsn)
			var engine string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				engine = ""
				err := c.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine)
				if engine == "Distributed" || time.Now().After(deadline) {
					if engine != "Distributed" {
						t.Errorf("node %d: %s is %q (%v), want the Distributed table again", i+1, table, engine, err)
					}
					break
				}
			}
		}
	}
	more := []metering.Usage{storetest.Row(50, t0.Add(time.Minute))}
	if err := reopened.Insert(ctx, more); err != nil {
		t.Fatalf("insert after the repair: %v", err)
	}
	q := metering.Query{GroupBy: metering.ByBuyer}
	got, err := reopened.Totals(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := storetest.Reference(append(rows, more...), q); !reflect.DeepEqual(got, want) {
		t.Errorf("totals after the repair\n got  %+v\n want %+v", got, want)
	}
}

// nodeConn is a connection of the test's own to one node of the cluster,
// closed when the test ends.
func nodeConn(t *testing.T, dsn string) ch.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
