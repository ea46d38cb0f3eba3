package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/storetest"
	"github.com/agentmarket/agentmarket/metering"
)

// The benchmarks render pages over a large embedded store: 10,000 listings
// and 1,000,000 usage rows (AGENTMARKET_WEB_BENCH_ROWS overrides the rows).
// Seeding takes a while, so the store is built once per process and, when
// AGENTMARKET_WEB_BENCH_DIR names a directory, kept there and reused by
// later runs.
//
//	go test ./web -run '^$' -bench 'CatalogPage|FinancePage' -benchtime 50x

const (
	benchListings = 10_000
	benchBuyers   = 20
	benchKeys     = 5 // per buyer
	benchUsed     = 200
	benchDays     = 30
)

type benchFixture struct {
	s        *site
	memo     *site  // the same data, with usage totals memoized
	buyer    string // session token of buyer 0's admin
	operator string // session token of the operator
	err      error
}

var (
	fixtureOnce sync.Once
	fixture     benchFixture
	fixtureDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" && os.Getenv("AGENTMARKET_WEB_BENCH_DIR") == "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTMARKET_WEB_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

func loadFixture(b *testing.B) *benchFixture {
	b.Helper()
	fixtureOnce.Do(func() {
		dir := os.Getenv("AGENTMARKET_WEB_BENCH_DIR")
		if dir == "" {
			d, err := os.MkdirTemp("", "agentmarket-web-bench-")
			if err != nil {
				fixture.err = err
				return
			}
			dir, fixtureDir = d, d
		}
		fixture.err = seedFixture(b, dir)
	})
	if fixture.err != nil {
		b.Fatal(fixture.err)
	}
	return &fixture
}

func seedFixture(b *testing.B, dir string) error {
	ctx := context.Background()
	s, _, err := openSite(siteOptions{dir: dir, autoApprove: true})
	if err != nil {
		return err
	}
	fixture.s = s
	if fixture.memo, _, err = openSite(siteOptions{dir: dir, autoApprove: true, reports: func(st metering.Store) metering.Store {
		return &memoStore{Store: st, totals: map[string][]metering.Total{}}
	}, search: func(st listings.Store) listings.Store {
		return &memoSearch{Store: st, pages: map[string]memoPage{}}
	}}); err != nil {
		return err
	}
	sessions := &contracts.Sessions{Store: s.store, Accounts: s.accounts, Clock: s.clock}
	signup := func(org, email string) (agentmarket.Actor, error) {
		if _, err := s.accounts.Signup(ctx, contracts.SignupInput{OrgName: org, Email: email, Password: "correct horse battery"}); err != nil &&
			agentmarket.CodeOf(err) != "email_taken" {
			return agentmarket.Actor{}, err
		}
		return s.accounts.Login(ctx, email, "correct horse battery")
	}
	buyer0, err := signup("Buyer 0", "buyer0@bench.example")
	if err != nil {
		return err
	}
	if fixture.buyer, _, err = sessions.Start(ctx, buyer0); err != nil {
		return err
	}
	platform, err := s.store.PlatformOrg(ctx)
	if err != nil {
		return err
	}
	fixture.operator, _, err = sessions.Start(ctx, agentmarket.Actor{OrgID: platform.ID, Role: agentmarket.RoleAdmin, Operator: true})
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "seeded")); err == nil {
		fmt.Fprintf(os.Stderr, "reusing the seeded store in %s\n", dir)
		return nil
	}

	t0 := time.Now()
	var sellers []agentmarket.Actor
	for i := range 10 {
		a, err := signup(fmt.Sprintf("Seller %d", i), fmt.Sprintf("seller%d@bench.example", i))
		if err != nil {
			return err
		}
		sellers = append(sellers, a)
	}
	cards := []string{"summarizer-v0.3.json", "translator-v1.0.json", "extractor-v1.0.json"}
	var raw [][]byte
	for _, c := range cards {
		raw = append(raw, storetest.Card(b, c))
	}
	var used []*listings.Listing
	for i := range benchListings {
		var card map[string]any
		json.Unmarshal(raw[i%len(raw)], &card)
		card["name"] = fmt.Sprintf("%s %05d", card["name"], i)
		cb, _ := json.Marshal(card)
		pricing := fmt.Sprintf(`{"currency":"usd","monthly_fee_micros":%d,"input_tokens_per_million_micros":3000000,"per_task_micros":2000}`, (i%100)*1_000_000)
		l, err := s.catalog.Create(ctx, sellers[i%len(sellers)], listings.CreateInput{Card: cb, Pricing: json.RawMessage(pricing)})
		if err != nil {
			return err
		}
		if i < benchUsed {
			used = append(used, l)
		}
	}
	fmt.Fprintf(os.Stderr, "seeded %d listings in %s\n", benchListings, time.Since(t0).Round(time.Millisecond))

	buyers := []string{buyer0.OrgID}
	for i := 1; i < benchBuyers; i++ {
		a, err := signup(fmt.Sprintf("Buyer %d", i), fmt.Sprintf("buyer%d@bench.example", i))
		if err != nil {
			return err
		}
		buyers = append(buyers, a.OrgID)
	}
	t1 := time.Now()
	rows := benchRows()
	start := now.AddDate(0, 0, -benchDays+1).Truncate(24 * time.Hour)
	span := now.Sub(start)
	const batch = 10_000
	buf := make([]metering.Usage, 0, batch)
	for i := range rows {
		// A quarter of the usage is buyer 0's: its finance page sums 250,000 rows.
		bi := 0
		if i%4 != 0 {
			bi = 1 + i%(benchBuyers-1)
		}
		l := used[(i*7)%len(used)]
		at := start.Add(time.Duration(int64(span) / int64(rows) * int64(i)))
		u := usageRow(fmtID("r", i), at, l, buyers[bi], fmt.Sprintf("key_%02d_%d", bi, i%benchKeys), fmt.Sprintf("ctr_%02d_%03d", bi, (i*7)%len(used)), int64(1000+i%5000))
		u.Estimated = i%10 == 0
		buf = append(buf, u)
		if len(buf) == batch || i == rows-1 {
			if err := s.usage.Insert(ctx, buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	fmt.Fprintf(os.Stderr, "seeded %d usage rows in %s (embedded store, batches of %d)\n", rows, time.Since(t1).Round(time.Millisecond), batch)
	return os.WriteFile(filepath.Join(dir, "seeded"), nil, 0o644)
}

// memoStore answers each distinct Totals query once, so that a benchmark
// can tell the page's own cost from the usage store's.
type memoStore struct {
	metering.Store
	mu     sync.Mutex
	totals map[string][]metering.Total
}

func (m *memoStore) Totals(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	k := fmt.Sprintf("%+v", q)
	m.mu.Lock()
	t, ok := m.totals[k]
	m.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := m.Store.Totals(ctx, q)
	if err == nil {
		m.mu.Lock()
		m.totals[k] = t
		m.mu.Unlock()
	}
	return t, err
}

// memoSearch likewise answers each distinct catalog search once.
type memoSearch struct {
	listings.Store
	mu    sync.Mutex
	pages map[string]memoPage
}

type memoPage struct {
	items []*listings.Listing
	total int
}

func (m *memoSearch) Search(ctx context.Context, q listings.Query) ([]*listings.Listing, int, error) {
	kb, _ := json.Marshal(q) // the values behind the pointers, not their addresses
	k := string(kb)
	m.mu.Lock()
	p, ok := m.pages[k]
	m.mu.Unlock()
	if ok {
		return p.items, p.total, nil
	}
	items, total, err := m.Store.Search(ctx, q)
	if err == nil {
		m.mu.Lock()
		m.pages[k] = memoPage{items, total}
		m.mu.Unlock()
	}
	return items, total, err
}

// render GETs path as the holder of session token (none when empty) and
// checks that the page rendered.
func render(b *testing.B, s *site, token, path string) int {
	req := httptest.NewRequest("GET", "http://market.test"+path, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "am_session", Value: token})
	}
	res, err := s.app.Test(req, 120_000)
	if err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		b.Fatalf("GET %s = %d: %s", path, res.StatusCode, excerpt(body.String()))
	}
	return body.Len()
}

func BenchmarkCatalogPage(b *testing.B) {
	f := loadFixture(b)
	for _, c := range []struct{ name, path string }{
		{"first-page", "/"},
		{"text-search", "/?q=summarizer+brief"},
		{"filtered", "/?tag=writing&streaming=true&max_fee=50&sort=-price"},
		{"page-200", "/?page=200"},
	} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			b.ReportAllocs()
			for b.Loop() {
				size = render(b, f.s, "", c.path)
			}
			b.ReportMetric(float64(size), "html-bytes")
		})
		b.Run(c.name+"/page-only", func(b *testing.B) {
			render(b, f.memo, "", c.path)
			b.ReportAllocs()
			for b.Loop() {
				render(b, f.memo, "", c.path)
			}
		})
	}
}

func BenchmarkFinancePage(b *testing.B) {
	f := loadFixture(b)
	period := "from=" + now.AddDate(0, 0, -benchDays+1).Format("2006-01-02") + "&to=" + now.Format("2006-01-02")
	for _, c := range []struct{ name, token, path string }{
		{"buyer-250k-rows", f.buyer, "/finance?" + period},
		{"buyer-by-key", f.buyer, "/finance?group=api_key&" + period},
		{"platform-1M-rows", f.operator, "/finance?scope=platform&" + period},
	} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			b.ReportAllocs()
			for b.Loop() {
				size = render(b, f.s, c.token, c.path)
			}
			b.ReportMetric(float64(size), "html-bytes")
		})
		// The same page with the store's answers memoized: what the page
		// itself costs (labels, charts, templates) on top of the queries.
		b.Run(c.name+"/page-only", func(b *testing.B) {
			render(b, f.memo, c.token, c.path)
			b.ReportAllocs()
			for b.Loop() {
				render(b, f.memo, c.token, c.path)
			}
		})
	}
}
