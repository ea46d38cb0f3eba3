package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/audit/audittest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
	"github.com/agentmarket/agentmarket/web/webtest"
)

// buildAuditVerify builds cmd/auditverify and returns the binary's path.
func buildAuditVerify(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "auditverify")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/auditverify")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// auditVerify runs the command on m's database (env: the settings m was
// started with) and returns what it printed.
func auditVerify(bin string, m *started, env map[string]string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"AGENTMARKET_DATA_DIR=" + m.DataDir, "AGENTMARKET_LOG_LEVEL=warn"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// auditEntries reads GET /api/v1/audit with the key and query, oldest
// first.
func auditEntries(t *testing.T, c client, query string) []map[string]any {
	t.Helper()
	r := c.do("GET", "/api/v1/audit"+query, nil)
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/audit%s: %d %s", query, r.Status, r.Body)
	}
	list, _ := r.JSON["entries"].([]any)
	out := make([]map[string]any, len(list))
	for i, e := range list {
		out[len(list)-1-i] = e.(map[string]any)
	}
	return out
}

func actions(es []map[string]any) string {
	var a []string
	for _, e := range es {
		a = append(a, fmt.Sprint(e["action"]))
	}
	return strings.Join(a, " ")
}

// TestAuditLog: real control-plane changes through the REST API (a
// listing created, repriced, refreshed, approved and later suspended by the
// operator; a subscription made, budgeted and canceled; a key made and
// revoked) each leave an entry with the actor, its address, the request
// id, the object and its before and after; an org's admin sees its org's,
// the operator everything, as JSON and CSV; the chain verifies through the
// API and cmd/auditverify, with signed checkpoints. One audit row edited
// in the database is then named by both, on SQLite and PostgreSQL.
func TestAuditLog(t *testing.T) {
	bin := buildAuditVerify(t)
	databases(t, func(t *testing.T, env map[string]string, dsn string) {
		env["AGENTMARKET_AUTO_APPROVE"] = "false"
		env["AGENTMARKET_AUDIT_CHECKPOINT_EVERY"] = "1s"
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		op := api.with(operatorKey(t, m))
		sellerOrg, sellerKey := signup(t, api, "Acme Agents", "owner@acme.example")
		buyerOrg, buyerKey := signup(t, api, "Globex", "it@globex.example")
		seller, buyer := api.with(sellerKey), api.with(buyerKey)

		card := agent(t, testdataCard(t, "translator-v1.0.json"))
		r := seller.do("POST", "/api/v1/listings", map[string]any{"card_url": card.URL, "pricing": pricing})
		if r.Status != 201 || r.str("status") != "pending_review" {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		listing := r.str("id")
		repriced := map[string]any{}
		for k, v := range pricing {
			repriced[k] = v
		}
		repriced["monthly_fee_micros"] = 59_000_000
		// One request with the caller's own request id.
		body, _ := json.Marshal(map[string]any{"pricing": repriced})
		status, answer := raw(t, "PATCH", m.URL+"/api/v1/listings/"+listing, http.Header{"Authorization": {"Bearer " + sellerKey},
			"Content-Type": {"application/json"}, "X-Request-Id": {"reprice-42"}}, body)
		if status != 200 {
			t.Fatalf("reprice: %d %s", status, answer)
		}
		if r := seller.do("POST", "/api/v1/listings/"+listing+"/refresh", nil); r.Status != 200 {
			t.Fatalf("refresh: %d %s", r.Status, r.Body)
		}
		if r := op.do("PATCH", "/api/v1/listings/"+listing, map[string]any{"status": "published"}); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		r = buyer.do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		sub := r.str("id")
		if r := buyer.do("PATCH", "/api/v1/subscriptions/"+sub, map[string]any{"budgets": map[string]any{"task_timeout_ms": 60_000}}); r.Status != 200 {
			t.Fatalf("budgets: %d %s", r.Status, r.Body)
		}
		keyID, _ := mintKey(t, buyer, map[string]any{"name": "ci", "role": "buyer", "monthly_budget_micros": 5_000_000})
		if r := buyer.do("DELETE", "/api/v1/api-keys/"+keyID, nil); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		if r := buyer.do("DELETE", "/api/v1/subscriptions/"+sub, nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		if r := op.do("PATCH", "/api/v1/listings/"+listing, map[string]any{"status": "suspended"}); r.Status != 200 {
			t.Fatalf("suspend: %d %s", r.Status, r.Body)
		}

		all := auditEntries(t, op, "")
		if len(all) < 6 || actions(all[:6]) != "org.create api_key.create org.create api_key.create org.create api_key.create" ||
			get(all[0], "after", "platform") != true || get(all[2], "after", "name") != "Acme Agents" || get(all[2], "actor", "user_id") == nil ||
			get(all[3], "actor", "org_id") != sellerOrg || all[0]["prev_hash"] != "" || all[0]["seq"] != float64(1) {
			t.Fatalf("the first start and the sign-ups: %v", all[:min(len(all), 6)])
		}
		all = all[6:]
		want := "listing.create plan.create listing.update plan.create listing.refresh listing.approve subscription.create policy.grant subscription.budgets " +
			"api_key.create api_key.revoke subscription.cancel policy.revoke listing.suspend"
		if got := actions(all); got != want {
			t.Fatalf("the operator's audit log:\n got %s\nwant %s", got, want)
		}
		byAction := map[string]map[string]any{}
		for _, e := range all {
			byAction[fmt.Sprint(e["action"])] = e
		}
		create := all[0]
		if get(create, "actor", "org_id") != sellerOrg || get(create, "actor", "key_id") == nil || get(create, "actor", "ip") != "127.0.0.1" ||
			get(create, "object", "type") != "listing" || get(create, "object", "id") != listing || create["before"] != nil ||
			get(create, "after", "status") != "pending_review" || create["request_id"] == "" {
			t.Errorf("listing.create: %v", create)
		}
		// The reprice: a new plan version, with the old one before it, under
		// the caller's request id.
		if e := all[2]; get(e, "before", "plan_version") != float64(1) || get(e, "after", "plan_version") != float64(2) || e["request_id"] != "reprice-42" {
			t.Errorf("the reprice's listing entry: %v", e)
		}
		reprice := all[3]
		if reprice["request_id"] != "reprice-42" || get(reprice, "before", "MonthlyFeeMicros") != float64(49_000_000) ||
			get(reprice, "after", "MonthlyFeeMicros") != float64(59_000_000) || get(reprice, "object", "id") != listing+"/v2" {
			t.Errorf("the reprice's plan entry: %v", reprice)
		}
		approve := byAction["listing.approve"]
		if get(approve, "actor", "operator") != true || approve["org_id"] != sellerOrg || get(approve, "before", "status") != "pending_review" ||
			get(approve, "after", "status") != "published" {
			t.Errorf("listing.approve: %v", approve)
		}
		if e := byAction["subscription.budgets"]; get(e, "after", "Budgets", "TaskTimeout") != float64(60*time.Second) {
			t.Errorf("subscription.budgets: %v", e)
		}
		if e := byAction["api_key.create"]; get(e, "after", "monthly_budget_micros") != float64(5_000_000) || get(e, "after", "hash") != nil ||
			strings.Contains(fmt.Sprint(e), "Hash") {
			t.Errorf("api_key.create: %v", e)
		}
		if e := byAction["policy.revoke"]; get(e, "before", "object") != "listing:"+listing || e["org_id"] != buyerOrg {
			t.Errorf("policy.revoke: %v", e)
		}
		for i := 1; i < len(all); i++ {
			if all[i]["prev_hash"] != all[i-1]["hash"] || all[i]["seq"] != all[i-1]["seq"].(float64)+1 {
				t.Errorf("entry %v does not link to the one before", all[i]["seq"])
			}
		}

		// Each org's admin sees its org's: the seller the operator's review
		// of its listing, not the buyer's keys; the buyer not the listing.
		sellers := auditEntries(t, seller, "")
		if got := actions(sellers); got != "org.create api_key.create listing.create plan.create listing.update plan.create listing.refresh listing.approve listing.suspend" {
			t.Errorf("the seller's audit log: %s", got)
		}
		// The operator's review shows as the operator's, not which key or
		// address of the platform made it.
		for _, e := range sellers {
			if e["action"] == "listing.approve" && (get(e, "actor", "operator") != true || get(e, "actor", "key_id") != nil || get(e, "actor", "ip") != nil) {
				t.Errorf("the seller sees the operator's review as %v", e["actor"])
			}
		}
		if got := actions(auditEntries(t, buyer, "")); got != "org.create api_key.create subscription.create policy.grant subscription.budgets api_key.create api_key.revoke subscription.cancel policy.revoke" {
			t.Errorf("the buyer's audit log: %s", got)
		}
		if got := actions(auditEntries(t, op, "?object_type=listing&object_id="+listing+"&action=listing.")); got != "listing.create listing.update listing.refresh listing.approve listing.suspend" {
			t.Errorf("filtered by object and action prefix: %s", got)
		}
		if got := actions(auditEntries(t, op, "?object=plan:"+listing+"/v2")); got != "plan.create" {
			t.Errorf("filtered by object=type:id: %s", got)
		}
		if got := actions(auditEntries(t, op, "?actor="+buyerOrg+"&limit=2")); got != "subscription.cancel policy.revoke" {
			t.Errorf("filtered by actor, a page of 2: %s", got)
		}
		if r := op.do("GET", "/api/v1/audit?from=yesterday", nil); r.Status != 422 || r.code() != "invalid_audit_filter" {
			t.Errorf("a bad from: %d %s", r.Status, r.Body)
		}
		_, buyerOnly := mintKey(t, buyer, map[string]any{"name": "buyer", "role": "buyer"})
		if r := api.with(buyerOnly).do("GET", "/api/v1/audit", nil); r.Status != 403 {
			t.Errorf("a buyer key reads the audit log: %d %s", r.Status, r.Body)
		}
		// A key of the platform's org that is not an admin's reads no
		// tenant's entries; an org's admin reads its own, and may not walk
		// the whole platform's chain.
		_, platformBuyer := mintKey(t, op, map[string]any{"name": "platform buyer", "role": "buyer"})
		if r := api.with(platformBuyer).do("GET", "/api/v1/audit", nil); r.Status != 403 {
			t.Errorf("a buyer key of the platform's org reads the audit log: %d %s", r.Status, r.Body)
		}
		if r := buyer.do("GET", "/api/v1/audit/verify", nil); r.Status != 403 {
			t.Errorf("an org's admin verifies the platform's chain: %d %s", r.Status, r.Body)
		}
		status, text := op.get("/api/v1/audit?action=listing.approve", "text/csv")
		rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
		if status != 200 || err != nil || len(rows) != 2 || rows[0][0] != "seq" || rows[1][9] != "listing.approve" || rows[1][2] == "" {
			t.Errorf("CSV: %d %v %q", status, err, text)
		}

		// The chain verifies, through the API and the command, once a
		// checkpoint is signed.
		var report response
		waitFor(t, "a signed checkpoint", 15*time.Second, func() bool {
			report = op.do("GET", "/api/v1/audit/verify", nil)
			n, _ := report.JSON["checkpoints"].(float64)
			return report.Status == 200 && n >= 1
		})
		if report.JSON["ok"] != true || report.JSON["last_seq"] == nil {
			t.Fatalf("verify: %s", report.Body)
		}
		jwks := api.do("GET", "/api/v1/audit/jwks", nil)
		if jwks.Status != 200 || !strings.Contains(string(jwks.Body), `"kty":"EC"`) {
			t.Errorf("the audit keys: %d %s", jwks.Status, jwks.Body)
		}
		verify := func() (string, error) { return auditVerify(bin, m, env) }
		if out, err := verify(); err != nil || !strings.Contains(out, "audit chain ok: entries 1 to ") {
			t.Fatalf("auditverify: %v\n%s", err, out)
		}
		// An auditor with the published keys and not the secret key (another
		// one here, with which the sealed audit keys do not open) verifies
		// the same.
		jwksFile := filepath.Join(t.TempDir(), "audit-jwks.json")
		if err := os.WriteFile(jwksFile, jwks.Body, 0o600); err != nil {
			t.Fatal(err)
		}
		noSecret := map[string]string{}
		for k, v := range env {
			noSecret[k] = v
		}
		other := make([]byte, 32)
		rand.Read(other)
		noSecret["AGENTMARKET_SECRET_KEY"] = base64.StdEncoding.EncodeToString(other)
		if out, err := auditVerify(bin, m, noSecret); err == nil {
			t.Errorf("auditverify with another secret key and no --jwks verified:\n%s", out)
		}
		verifyPublic := func() (string, error) { return auditVerify(bin, m, noSecret, "--jwks", jwksFile) }
		if out, err := verifyPublic(); err != nil || !strings.Contains(out, "audit chain ok: entries 1 to ") {
			t.Fatalf("auditverify --jwks: %v\n%s", err, out)
		}

		driver, source, ph := "sqlite", filepath.Join(m.DataDir, "agentmarket.db"), func(q string) string { return q }
		if dsn != "" {
			driver, source = "pgx", dsn
			ph = func(q string) string {
				for i := 1; strings.Contains(q, "?"); i++ {
					q = strings.Replace(q, "?", fmt.Sprint("$", i), 1)
				}
				return q
			}
		}
		db, err := sql.Open(driver, source)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.ExecContext(context.Background(), ph(q), args...); err != nil {
				t.Fatal(err)
			}
		}

		// Someone with the database writes a key of their own into the
		// audit keys and signs a checkpoint with it: the key's private
		// half does not open with the secret key, so it is no audit key.
		forger := audittest.NewKey("forged")
		pub, _ := forger.PushKeys(context.Background())
		var head struct {
			seq  int64
			hash string
		}
		if err := db.QueryRow("SELECT seq, hash FROM audit_chain_head").Scan(&head.seq, &head.hash); err != nil {
			t.Fatal(err)
		}
		cp := audit.Checkpoint{Seq: head.seq, Hash: head.hash, At: time.Now().UTC().Truncate(time.Microsecond)}
		payload := audit.CheckpointPayload(&cp)
		protected, sig, _ := forger.SignJWS(context.Background(), payload, "")
		exec("INSERT INTO audit_signing_keys (generation, id, algorithm, public_key, sealed, created_at, active_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
			999, "forged", "ES256", pub[0].Public, []byte("not sealed"), cp.At, cp.At)
		exec("DELETE FROM audit_checkpoints WHERE seq = ?", head.seq)
		exec("INSERT INTO audit_checkpoints (seq, hash, at, prune, key_id, jws) VALUES (?, ?, ?, ?, ?, ?)", head.seq, head.hash, cp.At, false, "forged",
			protected+"."+base64.RawURLEncoding.EncodeToString(payload)+"."+sig)
		r = op.do("GET", "/api/v1/audit/verify", nil)
		if r.JSON["ok"] != false || get(r.JSON, "broken", "kind") != "checkpoint" || get(r.JSON, "broken", "seq") != float64(head.seq) ||
			get(r.JSON, "broken", "reason") != `its signing key "forged" is not an audit key` {
			t.Errorf("verify with a forged key's checkpoint: %s", r.Body)
		}
		if out, err := verify(); err == nil || !strings.Contains(out, fmt.Sprintf("audit chain broken at checkpoint %d: its signing key \"forged\" is not an audit key", head.seq)) {
			t.Errorf("auditverify with a forged key's checkpoint: %v\n%s", err, out)
		}
		exec("DELETE FROM audit_checkpoints WHERE key_id = ?", "forged")

		// Someone with the database edits the approval: both name its row.
		seq := int64(approve["seq"].(float64))
		if res, err := db.ExecContext(context.Background(), ph("UPDATE audit_entries SET after_json = REPLACE(after_json, 'published', 'suspended') WHERE seq = ?"), seq); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("edited %d rows", n)
		}
		r = op.do("GET", "/api/v1/audit/verify", nil)
		if r.Status != 200 || r.JSON["ok"] != false || get(r.JSON, "broken", "seq") != float64(seq) || get(r.JSON, "broken", "kind") != "entry" {
			t.Errorf("verify after the edit of entry %d: %s", seq, r.Body)
		}
		out, err := verify()
		if err == nil || !strings.Contains(out, fmt.Sprintf("audit chain broken at entry %d: its contents do not match its hash", seq)) {
			t.Errorf("auditverify after the edit of entry %d: %v\n%s", seq, err, out)
		}
		out, err = verifyPublic()
		if err == nil || !strings.Contains(out, fmt.Sprintf("audit chain broken at entry %d: its contents do not match its hash", seq)) {
			t.Errorf("auditverify --jwks after the edit of entry %d: %v\n%s", seq, err, out)
		}
	})
}

// TestWebAuditLog (Chromium): the operator suspends a listing on the
// operator page; the audit page shows the entry, made through the web UI,
// with the operator and the browser's address, filters by action, and
// verifies the chain; the seller's admin, signed in, sees the operator's
// review of its listing on its own audit page.
func TestWebAuditLog(t *testing.T) {
	chrome := chromeOrSkip(t)
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, sellerKey := signup(t, api, "Acme Agents", "owner@acme.example")
	card := agent(t, testdataCard(t, "translator-v1.0.json"))
	r := api.with(sellerKey).do("POST", "/api/v1/listings", map[string]any{"card_url": card.URL, "pricing": pricing})
	if r.Status != 201 || r.str("status") != "published" {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	listing := r.str("id")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx, stop, err := webtest.Browser(ctx, chrome, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := webtest.Text(ctx, sel)
		must("read "+sel, err)
		return s
	}
	must("operator signs in", webtest.SignInKey(ctx, m.URL, operatorKey(t, m)))
	must("open the operator page", webtest.Open(ctx, m.URL+"/operator?status=published"))
	must("suspend", webtest.Submit(ctx, `form[action="/operator/listings/`+listing+`/status"] button[aria-label^="Suspend"]`, `p.notice[role="status"]`))
	must("open the audit log", webtest.Open(ctx, m.URL+"/audit"))
	if got := text(`nav a[href="/audit"]`); got != "Audit log" {
		t.Errorf("the navigation's link: %q", got)
	}
	must("filter", webtest.Fill(ctx, map[string]string{`input[name="action"]`: "listing.suspend"}))
	must("submit the filter", webtest.Submit(ctx, `form[action="/audit"] button[type=submit]`, "tr[data-audit-entry]"))
	if got := text("tr[data-audit-entry] td[data-action]"); got != "listing.suspend" {
		t.Errorf("the filtered entry's action: %q", got)
	}
	if who := text("tr[data-audit-entry] td:nth-child(3)"); !strings.Contains(who, "(operator)") || !strings.Contains(who, "127.0.0.1") {
		t.Errorf("the entry's actor: %q", who)
	}
	must("verify", webtest.Submit(ctx, "a[data-audit-verify]", "[data-audit-report]"))
	if got := text("[data-audit-report] p"); !strings.HasPrefix(got, "The chain holds: 7 entries") {
		t.Errorf("the verification: %q", got)
	}
	must("sign out", webtest.SignOut(ctx, m.URL))
	must("the seller signs in", webtest.SignIn(ctx, m.URL, "owner@acme.example", "correct horse battery"))
	must("open the seller's audit log", webtest.Open(ctx, m.URL+"/audit"))
	if got := text("tr[data-audit-entry] td[data-action]"); got != "listing.suspend" {
		t.Errorf("the seller's newest entry: %q", got)
	}
}

// TestAuditRetention: with AGENTMARKET_AUDIT_RETENTION, entries older
// than it are pruned behind a signed checkpoint, and what is left still
// verifies, through the API and the command.
func TestAuditRetention(t *testing.T) {
	bin := buildAuditVerify(t)
	clock := agentmarket.NewManualClock(time.Now())
	env := map[string]string{"AGENTMARKET_AUDIT_RETENTION": "1h", "AGENTMARKET_AUDIT_CHECKPOINT_EVERY": "1s"}
	m := startMarketplaceWith(t, env, []serve.Option{serve.WithClock(clock)})
	api := client{t: t, base: m.URL}
	op := api.with(operatorKey(t, m))
	_, admin := signup(t, api, "Globex", "it@globex.example")
	mintKey(t, api.with(admin), map[string]any{"name": "old", "role": "buyer"})
	if n := len(auditEntries(t, op, "")); n != 5 {
		t.Fatalf("%d entries before the prune, want 5", n)
	}
	clock.Advance(2 * time.Hour)
	newKey, _ := mintKey(t, api.with(admin), map[string]any{"name": "new", "role": "buyer"})
	var r response
	waitFor(t, "the old entries pruned", 15*time.Second, func() bool {
		r = op.do("GET", "/api/v1/audit/verify", nil)
		return r.Status == 200 && r.JSON["first_seq"] == float64(6)
	})
	if r.JSON["ok"] != true || r.JSON["entries"] != float64(1) || r.JSON["last_seq"] != float64(6) {
		t.Errorf("verify after the prune: %s", r.Body)
	}
	es := auditEntries(t, op, "")
	if len(es) != 1 || get(es[0], "object", "id") != newKey {
		t.Errorf("entries after the prune: %v", es)
	}
	if out, err := auditVerify(bin, m, env); err != nil || !strings.Contains(out, "audit chain ok: entries 6 to 6 (1)") {
		t.Errorf("auditverify after the prune: %v\n%s", err, out)
	}
}

// TestAuditTwoMarketplaces: two marketplace processes on one PostgreSQL
// database record changes at once; the chain does not fork: one entry
// per change, numbered without gaps, and it verifies.
func TestAuditTwoMarketplaces(t *testing.T) {
	dsn := relationaltest.PostgresDSN(t)
	env := map[string]string{"AGENTMARKET_DATABASE_URL": dsn, "AGENTMARKET_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
	first := startMarketplace(t, env)
	second := startMarketplace(t, env)
	_, admin := signup(t, client{t: t, base: first.URL}, "Globex", "it@globex.example")
	var wg sync.WaitGroup
	for i := range 20 {
		base := first.URL
		if i%2 == 1 {
			base = second.URL
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"name": fmt.Sprint("key ", i), "role": "buyer"})
			if status, answer := raw(t, "POST", base+"/api/v1/api-keys", http.Header{"Authorization": {"Bearer " + admin},
				"Content-Type": {"application/json"}}, body); status != 201 {
				t.Errorf("key %d: %d %s", i, status, answer)
			}
		}()
	}
	wg.Wait()
	op := client{t: t, base: second.URL, key: operatorKey(t, first)}
	es := auditEntries(t, op, "?limit=1000")
	if len(es) != 24 {
		t.Fatalf("%d entries, want 24 (the platform's and Globex's org and first key, 20 keys)", len(es))
	}
	for i, e := range es {
		if e["seq"] != float64(i+1) || i > 0 && e["prev_hash"] != es[i-1]["hash"] {
			t.Fatalf("entry %d: seq %v, prev_hash %v after %v", i+1, e["seq"], e["prev_hash"], es[max(i-1, 0)]["hash"])
		}
	}
	if r := op.do("GET", "/api/v1/audit/verify", nil); r.JSON["ok"] != true || r.JSON["last_seq"] != float64(24) {
		t.Errorf("verify: %s", r.Body)
	}
}
