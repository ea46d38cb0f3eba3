//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"

	"net/http/httptest"
)

// cutter forwards TCP connections to a backend until it is cut: then it
// closes every connection it carries and refuses new ones, as a database
// that went away does, until it is restored.
type cutter struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
}

func startCutter(t *testing.T, backend string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go c.serve()
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		if c.down {
			c.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", c.backend)
		if err != nil {
			c.mu.Unlock()
			in.Close()
			continue
		}
		c.conns[in], c.conns[out] = struct{}{}, struct{}{}
		c.mu.Unlock()
		go func() { io.Copy(out, in); out.Close(); in.Close() }()
		go func() { io.Copy(in, out); in.Close(); out.Close() }()
	}
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for conn := range c.conns {
		conn.Close()
	}
	clear(c.conns)
}

func (c *cutter) restore() {
	c.mu.Lock()
	c.down = false
	c.mu.Unlock()
}

// TestDatabaseOutage: with the database gone, calls through the meter go
// on (keys, listings, contracts, plans and grants as it last read them;
// new tasks bound in memory) and their rows wait in the spool; once the
// database is back, the
// projections and the shipping catch up: every call's row is stored once,
// with the usage the agent reported, every task it bound is in the
// database, and the owner reads a task created during the outage.
func TestDatabaseOutage(t *testing.T) {
	const before, during = 5, 20
	began := time.Now()
	pgDSN := relationaltest.PostgresDSN(t)
	chSrv := startClickHouse(t)
	chSrv.exec("CREATE DATABASE agentmarket_dbfault")
	chDSN := chSrv.dsn("agentmarket_dbfault")

	agent := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 2 * time.Millisecond,
		RequireAuth: "seller-secret", Name: "Outage Summarizer"})
	agentSrv := httptest.NewServer(agent)
	t.Cleanup(agentSrv.Close)
	agent.SetBaseURL(agentSrv.URL + "/")
	mk := setUpMarket(t, pgDSN, agentSrv.URL+"/.well-known/agent-card.json")

	// The meter reaches PostgreSQL through a connection that can be cut.
	u, err := url.Parse(pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	db := startCutter(t, u.Host)
	viaCutter := *u
	viaCutter.Host = db.addr()
	env := map[string]string{
		"AGENTMARKET_DATABASE_URL":      viaCutter.String(),
		"AGENTMARKET_SECRET_KEY":        testSecretKey,
		"AGENTMARKET_CLICKHOUSE_URL":    chDSN,
		"AGENTMARKET_DATA_DIR":          t.TempDir(),
		"AGENTMARKET_LOG_LEVEL":         "info",
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
	}
	meter := startMeter(t, "db outage", env)

	var taskIDs []string
	call := func(i int) {
		t.Helper()
		id, err := mk.send(meter.url, fmt.Sprintf("call %d: the board approved the merger after a long debate", i))
		if err != nil {
			t.Fatalf("call %d (database down: %v): %v", i, i > before, err)
		}
		taskIDs = append(taskIDs, id)
	}
	for i := 1; i <= before; i++ {
		call(i)
	}
	waitDrained(t, meter, before)
	db.cut()
	t.Logf("+%v: %d calls shipped; the database is cut off", since(began), before)
	// Past every cache's TTL: what the meter knows must carry it.
	time.Sleep(3 * time.Second)
	for i := before + 1; i <= before+during; i++ {
		call(i)
	}
	if backlog, err := meter.metric("agentmarket_meter_spool_rows"); err != nil || backlog < during {
		t.Errorf("%v rows wait in the spool (%v), want the %d answered while the database was down", backlog, err, during)
	}
	t.Logf("+%v: %d calls answered with the database down", since(began), during)

	db.restore()
	waitDrained(t, meter, 0)
	ctx := context.Background()
	store, err := clickhouse.Open(ctx, chDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	q := metering.Query{ListingID: mk.listingID, From: began.Add(-time.Minute), To: time.Now().Add(time.Minute)}
	rows := waitRows(t, store, q, before+during)
	checkUsage(t, agent, taskIDs, rows, store, q)

	// A task created during the outage is the owner's.
	last := taskIDs[len(taskIDs)-1]
	if got, err := mk.get(meter.url, last); err != nil || got != last {
		t.Fatalf("tasks/get of a task created while the database was down: %q %v", got, err)
	}

	// Every task is bound in the database, to the buyer.
	pg, err := relational.OpenPostgres(ctx, pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var n int64
	if err := pg.DB.WithContext(ctx).Table("task_owners").Where("listing_id = ? AND task_id IN ?", mk.listingID, taskIDs).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != int64(len(taskIDs)) {
		t.Errorf("%d of %d tasks bound in the database after the outage", n, len(taskIDs))
	}
	t.Logf("+%v: done", since(began))
}
