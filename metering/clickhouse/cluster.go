package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/migrations"
)

// Cluster mode (Open with WithCluster): the same migrations, run on every
// node of a ClickHouse cluster (ON CLUSTER, through the servers'
// distributed DDL queue in ZooKeeper). Each table T of a migration becomes
//
//   - T_local on every node: the Replicated form of T's engine, one
//     ZooKeeper path per shard ({shard} macro) and one replica name per
//     node ({replica} macro, unique across the cluster), so the replicas of
//     a shard hold the same rows and deduplicate a re-sent block;
//   - T on every node: a Distributed table over T_local, sharded by a hash
//     of T's sorting key, in front of it.
//
// Reads and inserts name T, as on a single server, so the store's SQL is
// the same in both modes. Because the sorting key of a row decides its
// shard, the copies of a row (a batch sent again, equal keys) land on the
// same shard, where the ReplacingMergeTree collapses them and FINAL reads
// them once; inserts go through the Distributed table synchronously
// (insert_distributed_sync), so a batch is acknowledged only once every
// shard has it.

// clusterName is what a cluster name may be: it is written into SQL.
var clusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidCluster reports whether name can name a cluster here.
func ValidCluster(name string) bool { return clusterName.MatchString(name) }

var (
	createTable = regexp.MustCompile(`(?is)^CREATE TABLE IF NOT EXISTS (\w+)\s*\((.*)\)\s*ENGINE\s*=\s*(\w*)MergeTree(?:\(([^()]*)\))?\s*(.*)$`)
	orderBy     = regexp.MustCompile(`(?is)\bORDER BY\s+(\([^()]*\)|\w+)`)
	alterTable  = regexp.MustCompile(`(?is)^ALTER TABLE (\w+)\s+((?:ADD|DROP|MODIFY|COMMENT) COLUMN .*)$`)
	insertInto  = regexp.MustCompile(`(?is)^INSERT INTO (\w+)\s*\(([^()]+)\)\s*(SELECT\s.*)$`)
)

// shardBy overrides the sharding of a table whose sorting key would split
// what one INSERT must keep together: a usage row's rollup marker and its
// cells (rollup.go) share only the buyer, and must land on one shard so
// that a shard holds both or neither.
var shardBy = map[string]string{"usage_rollup": "buyer_org_id"}

// ClusterStatements rewrites one statement of a migration (in the form
// TestMigrationForm allows) for cluster on database db: a CREATE TABLE
// becomes the replicated local table and the Distributed table in front,
// an ALTER of a column alters both. Any other statement is refused: the
// migrations must keep to what both modes can run.
func ClusterStatements(stmt, cluster, db string) ([]string, error) {
	stmt = strings.TrimSpace(stmt)
	if m := createTable.FindStringSubmatch(stmt); m != nil {
		table, cols, variant, params, rest := m[1], m[2], m[3], strings.TrimSpace(m[4]), strings.TrimSpace(m[5])
		key := orderBy.FindStringSubmatch(rest)
		if key == nil {
			return nil, fmt.Errorf("table %s: no plain ORDER BY to shard by", table)
		}
		shard := strings.Trim(key[1], "()")
		if by, ok := shardBy[table]; ok {
			shard = by
		}
		local := table + "_local"
		args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", db, local)
		if params != "" {
			args += ", " + params
		}
		return []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s (%s) ENGINE = Replicated%sMergeTree(%s) %s",
				db, local, cluster, cols, variant, args, rest),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s AS %s.%s ENGINE = Distributed(%s, %s, %s, cityHash64(%s))",
				db, table, cluster, db, local, cluster, db, local, shard),
		}, nil
	}
	if m := alterTable.FindStringSubmatch(stmt); m != nil {
		// The Distributed table in front cannot be altered ON CLUSTER when
		// the shards are replicated (18.16: "Table usage isn't replicated,
		// but shard #1 is replicated"): the store recreates it after
		// (Store.recreateDistributed).
		table, change := m[1], m[2]
		return []string{fmt.Sprintf("ALTER TABLE %s.%s_local ON CLUSTER %s %s", db, table, cluster, change)}, nil
	}
	if m := insertInto.FindStringSubmatch(stmt); m != nil {
		// Data a migration adds goes in once, through the Distributed
		// table (the store runs it with insert_distributed_sync).
		return []string{fmt.Sprintf("INSERT INTO %s.%s (%s) %s", db, m[1], m[2], m[3])}, nil
	}
	return nil, fmt.Errorf("cluster mode cannot run this statement (only CREATE TABLE IF NOT EXISTS … ENGINE = …MergeTree, ALTER TABLE … COLUMN and INSERT INTO … (columns) SELECT …): %.80s", stmt)
}

// checkMode refuses a database laid out for the other mode: on a cluster,
// tables a single server made (their CREATE TABLE IF NOT EXISTS would skip
// the cluster's, and the schema_migrations there would say it is all done);
// on a single server, a cluster's Distributed tables (a migration would
// then change one node's table only). docs/operations.md says how to move
// a single server's usage onto a cluster. It also says whether the
// database has its schema_migrations table already.
func (s *Store) checkMode(ctx context.Context) (tracked bool, err error) {
	rows, err := s.conn.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = ? AND name IN ('usage', 'schema_migrations')", s.db)
	if err != nil {
		return false, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			return false, unavailable(err)
		}
		tracked = tracked || name == "schema_migrations"
		switch {
		case s.cluster != "" && engine != "Distributed":
			return false, agentmarket.Errorf(agentmarket.Invalid, "clickhouse_mode",
				"ClickHouse database %s holds a single server's table %s (%s), not a cluster's: move its rows to the cluster first (docs/operations.md, ClickHouse as a cluster), or leave AGENTMARKET_CLICKHOUSE_CLUSTER empty",
				s.db, name, engine)
		case s.cluster == "" && engine == "Distributed":
			return false, agentmarket.Errorf(agentmarket.Invalid, "clickhouse_mode",
				"ClickHouse database %s is a cluster's (its table %s is Distributed): set AGENTMARKET_CLICKHOUSE_CLUSTER to the cluster's name", s.db, name)
		}
	}
	return tracked, rows.Err()
}

// recreateDistributed makes the Distributed table in front of table_local
// again, on every node, with the columns table_local has on this node once
// an ALTER of it has reached this node (ALTER ON CLUSTER of a replicated
// table runs on one replica of each shard, and replication brings it to
// the others). Between the DROP and the CREATE, inserts fail and the
// shippers retry them from their spools. Its engine comes from the
// migration that created the table, not from the table: a process stopped
// between the DROP and the CREATE left no table to read it from, and the
// migration run again by the next start makes it from there.
func (s *Store) recreateDistributed(ctx context.Context, table string) error {
	engine, err := s.frontEngine(table)
	if err != nil {
		return err
	}
	local := table + "_local"
	var cols []string
	for deadline := time.Now().Add(time.Minute); ; {
		if cols, err = s.describe(ctx, local); err != nil {
			return err
		}
		front, err := s.describe(ctx, table)
		if err != nil {
			return err
		}
		// No front while the local table is here: an earlier run dropped
		// it and stopped before making it again.
		if len(cols) > 0 && !slices.Equal(cols, front) {
			break
		}
		// An empty local table is one this node has not made yet (a DDL
		// of the cluster's queue still on its way here, on a loaded
		// node): wait for it, as for the ALTER.
		if time.Now().After(deadline) {
			if len(cols) == 0 {
				return fmt.Errorf("%s.%s not on this node after a minute: the cluster's DDL queue has not reached it", s.db, local)
			}
			return nil // the ALTER changed nothing the Distributed table shows (a comment)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := s.conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s ON CLUSTER %s", s.db, table, s.cluster)); err != nil {
		return err
	}
	return s.conn.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s (%s) ENGINE = %s",
		s.db, table, s.cluster, strings.Join(cols, ", "), engine))
}

// frontEngine is the engine of the Distributed table in front of
// table_local, as the migration that created table makes it.
func (s *Store) frontEngine(table string) (string, error) {
	fronts, err := s.fronts()
	if err != nil {
		return "", err
	}
	create, ok := fronts[table]
	if !ok {
		return "", fmt.Errorf("no migration creates the table %s", table)
	}
	_, engine, _ := strings.Cut(create, " ENGINE = ")
	return engine, nil
}

// fronts are the statements that create each table's Distributed table
// on the cluster, by table: the second of ClusterStatements' answer for
// each CREATE TABLE of the migrations.
func (s *Store) fronts() (map[string]string, error) {
	ms, err := migrations.List(migrations.ClickHouse)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range ms {
		for _, stmt := range Statements(m.SQL) {
			c := createTable.FindStringSubmatch(strings.TrimSpace(stmt))
			if c == nil {
				continue
			}
			st, err := ClusterStatements(stmt, s.cluster, s.db)
			if err != nil {
				return nil, fmt.Errorf("migration %s: %w", m.Version, err)
			}
			out[c[1]] = st[1]
		}
	}
	return out, nil
}

// repairFronts makes again, on every node, the Distributed table in front
// of a local table that has none on this node: what a process stopped
// between recreateDistributed's DROP and CREATE leaves when no migration
// is left to run (inserts would fail until then, and the rows wait in the
// meters' spools). One query when nothing is missing. A front the
// cluster's DDL queue has yet to bring here (a node behind) gets
// frontWait to arrive first, and the repair only creates what is missing
// (IF NOT EXISTS, no DROP): a node behind costs the others nothing.
func (s *Store) repairFronts(ctx context.Context) error {
	rows, err := s.conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ?", s.db)
	if err != nil {
		return unavailable(err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return unavailable(err)
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return unavailable(err)
	}
	fronts, err := s.fronts()
	if err != nil {
		return err
	}
	for _, table := range slices.Sorted(maps.Keys(fronts)) {
		if have[table] || !have[table+"_local"] {
			continue
		}
		if err := s.makeFront(ctx, table, fronts[table]); err != nil {
			return fmt.Errorf("clickhouse: make the Distributed table %s again: %w", table, err)
		}
	}
	return nil
}

// frontWait is how long a missing front may take to arrive through the
// cluster's DDL queue before repairFronts makes it.
const frontWait = 10 * time.Second

// makeFront makes the missing Distributed table in front of table_local,
// with the local table's columns on this node and create's engine, on
// every node that lacks it, unless it arrives within frontWait.
func (s *Store) makeFront(ctx context.Context, table, create string) error {
	for deadline := time.Now().Add(frontWait); ; {
		front, err := s.describe(ctx, table)
		if err != nil || len(front) > 0 {
			return err
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	cols, err := s.describe(ctx, table+"_local")
	if err != nil {
		return err
	}
	_, engine, _ := strings.Cut(create, " ENGINE = ")
	return s.conn.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s (%s) ENGINE = %s",
		s.db, table, s.cluster, strings.Join(cols, ", "), engine))
}

// describe lists table's columns on this node as a CREATE TABLE writes
// them: name, type and default.
func (s *Store) describe(ctx context.Context, table string) ([]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT name, type, default_kind, default_expression FROM system.columns WHERE database = ? AND table = ?", s.db, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, typ, kind, expr string
		if err := rows.Scan(&name, &typ, &kind, &expr); err != nil {
			return nil, err
		}
		col := "`" + name + "` " + typ
		if kind != "" {
			col += " " + kind + " " + expr
		}
		out = append(out, col)
	}
	return out, rows.Err()
}
