package storetest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
)

// Environment of a KillShipper child process.
const (
	killChildEnv = "AGENTMARKET_STORETEST_KILL_SPOOL"
	killWhereEnv = "AGENTMARKET_STORETEST_KILL_WHERE"
)

// killRows is the data KillShipper ships: rows over four days across a
// month end (two ClickHouse partitions), many attributions, and times that
// are not whole seconds.
func killRows(n int) []metering.Usage {
	r := rand.New(rand.NewPCG(17, 4))
	start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	rows := make([]metering.Usage, n)
	for i := range rows {
		u := Row(i, start.Add(time.Duration(r.Int64N(int64(4*24*time.Hour)))).Truncate(time.Millisecond))
		u.ID = fmt.Sprintf("u_kill_%06d", i)
		b := r.IntN(5)
		u.BuyerOrgID, u.APIKeyID = fmt.Sprintf("org_b%d", b), fmt.Sprintf("key_%d_%d", b, r.IntN(3))
		l := r.IntN(9)
		u.ListingID, u.SellerOrgID, u.ContractID = fmt.Sprintf("lst_%d", l), fmt.Sprintf("org_s%d", l%3), fmt.Sprintf("ctr_%d_%d", b, l)
		u.TaskID = fmt.Sprintf("task_%d", r.IntN(n/3+1))
		u.Tasks, u.Estimated = int64(r.IntN(2)), r.IntN(4) == 0
		u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros = r.Int64N(9000), r.Int64N(9000), r.Int64N(60000), r.Int64N(1_000_000)
		rows[i] = u
	}
	return rows
}

// KillShipper proves exactly once across crashes: a spool of rows is
// shipped to a store by a child process (this test binary again) that is
// killed with SIGKILL, several times, in the middle of a batch (while
// Store.Insert runs) or right after a batch was stored and before the
// spool heard of it; a last child ships what is left. Then every row is
// stored once, and Totals answer, for every grouping and for ranges that
// read rollups and rows alike, exactly what the rows sum to.
//
// The calling test must call KillShipper first thing: in the child, it
// runs the shipper and exits. newWhere names a fresh, empty store (a DSN,
// a file) and open opens the store it names, in the parent and the child.
func KillShipper(t *testing.T, newWhere func(t *testing.T) string, open func(ctx context.Context, where string) (metering.Store, error)) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir, os.Getenv(killWhereEnv), open))
	}
	const n, batch, kills = 24_000, 2_000, 8
	ctx := context.Background()
	where := newWhere(t)
	dir := t.TempDir()
	sp, err := spool.Open(dir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := killRows(n)
	for i := 0; i < n; i += 1000 {
		if err := sp.Append(rows[i:min(i+1000, n)]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 5))
	resent := 0
	for k := 0; k <= kills; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Split(t.Name(), "/")[0]+"$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killWhereEnv+"="+where, "AGENTMARKET_STORETEST_KILL_BATCH="+strconv.Itoa(batch))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Odd rounds kill while a batch is being inserted, after a random
		// part of it went; even ones right after a batch was stored, before
		// its acknowledgement. The last round runs to the end.
		after, batches := "insert", 1+r.IntN(3)
		if k%2 == 0 {
			after = "inserted"
		}
		killed := false
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) > 0 && f[0] == "resent" {
				resent++
			}
			if k < kills && !killed && len(f) > 0 && f[0] == after {
				if batches--; batches == 0 {
					if after == "insert" {
						time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond)
					}
					cmd.Process.Kill() // SIGKILL
					killed = true
				}
			}
		}
		err = cmd.Wait()
		if k == kills && err != nil {
			t.Fatalf("the last shipper failed: %v", err)
		}
		if k < kills && !killed {
			t.Fatalf("round %d: the shipper finished before it could be killed (%v)", k, err)
		}
	}
	if resent == 0 {
		t.Fatal("no batch was sent again after a kill: the test did not test anything")
	}
	t.Logf("%d kills; %d batches were sent again after a kill", kills, resent)

	s, err := open(ctx, where)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(interface{ Close() error }); ok {
		defer c.Close()
	}
	got, err := s.Rows(ctx, metering.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d rows stored, want %d", len(got), n)
	}
	day := 24 * time.Hour
	start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, q := range []metering.Query{
		{},
		{From: start, To: start.Add(4 * day)},
		{From: start.Add(day), To: start.Add(3 * day)},
		{From: start.Add(37*time.Hour + 1234*time.Millisecond), To: start.Add(80*time.Hour + 17*time.Minute)},
		{From: start.Add(2*day + 90*time.Minute), BuyerOrgID: "org_b2"},
		{To: start.Add(2*day + 5*time.Second), SellerOrgID: "org_s1", ListingID: "lst_4"},
	} {
		for _, g := range metering.GroupBys {
			q.GroupBy = g
			tot, err := s.Totals(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if want := Reference(rows, q); !equalTotals(tot, want) {
				t.Errorf("Totals(%s) after the kills\n got  %+v\n want %+v", describe(q), tot, want)
			}
		}
	}
}

// killChild ships the spool in dir to the store where names, saying on
// stdout when a batch starts ("insert"), whether it was stored before
// ("resent": its first row is), and when it is stored ("inserted").
func killChild(dir, where string, open func(ctx context.Context, where string) (metering.Store, error)) int {
	ctx := context.Background()
	batch, _ := strconv.Atoi(os.Getenv("AGENTMARKET_STORETEST_KILL_BATCH"))
	s, err := open(ctx, where)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open store:", err)
		return 2
	}
	sp, err := spool.Open(dir, spool.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open spool:", err)
		return 2
	}
	sh := spool.NewShipper(sp, &announcing{Store: s}, spool.ShipperOptions{BatchRows: batch})
	if err := sh.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flush:", err)
		return 1
	}
	if err := sp.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close spool:", err)
		return 1
	}
	return 0
}

type announcing struct{ metering.Store }

func (a *announcing) Insert(ctx context.Context, rows []metering.Usage) error {
	// What a re-sent batch looks like from outside: its rows are stored
	// already (Rows finds them), before this Insert.
	if len(rows) > 0 {
		stored, err := a.Rows(ctx, metering.Query{From: rows[0].Time, To: rows[0].Time.Add(time.Millisecond), ListingID: rows[0].ListingID})
		if err == nil {
			for _, u := range stored {
				if u.ID == rows[0].ID {
					fmt.Println("resent")
					break
				}
			}
		}
	}
	fmt.Println("insert", len(rows))
	err := a.Store.Insert(ctx, rows)
	if err == nil {
		fmt.Println("inserted", len(rows))
	}
	return err
}
