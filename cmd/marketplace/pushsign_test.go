package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// verifyDeliveries checks, as a buyer would (docs/examples/pushverify),
// that every delivery a webhook got is signed over the exact bytes it got
// by a key in the marketplace's JWKS, fetched over HTTP, for the right
// org, webhook URL (hookURL and the call's path), delivery, listing,
// config and task (task "": the task the body names); that the same
// signature over a body one byte different is refused; and that another
// org's verifier, or another URL's, refuses it as not theirs.
func verifyDeliveries(t *testing.T, marketURL, org, hookURL string, calls []hookCall, listing, task, config string) {
	t.Helper()
	if len(calls) == 0 {
		t.Error("no deliveries to verify")
		return
	}
	ctx := context.Background()
	verifier := func(org, url string) *pushverify.Verifier {
		return &pushverify.Verifier{JWKSURL: marketURL + "/api/v1/push/jwks", Org: org, URL: url, Config: pushverify.ConfigIDs(config)}
	}
	for i, c := range calls {
		v := verifier(org, hookURL+c.Path)
		d, err := v.Verify(ctx, c.Signature, c.Raw)
		if err != nil {
			t.Errorf("delivery %d (%s, %s): %v\nsignature %q\nbody %s", i, c.DeliveryID, c.Path, err, c.Signature, c.Raw)
			continue
		}
		if d.DeliveryID != c.DeliveryID || d.ListingID != listing || d.ConfigID != config || (task != "" && d.TaskID != task) ||
			!bytes.Contains(c.Raw, []byte(`"`+d.TaskID+`"`)) || d.Org != org || d.Target != pushverify.TargetHash(hookURL+c.Path) {
			t.Errorf("delivery %d (%s, %s) is signed as %+v; want org %s, listing %s, config %s, task %q\nbody %s", i, c.DeliveryID, c.Path, d,
				org, listing, config, task, c.Raw)
		}
		if _, err := v.Verify(ctx, c.Signature, append(bytes.Clone(c.Raw), ' ')); !errors.Is(err, pushverify.ErrBadSig) {
			t.Errorf("delivery %d with a space added to its body: %v, want ErrBadSig", i, err)
		}
		// Genuine, but not theirs: another org at the same URL (one that
		// set a config of the same id there), and the same org elsewhere.
		if _, err := verifier("org_someoneelse", hookURL+c.Path).Verify(ctx, c.Signature, c.Raw); !errors.Is(err, pushverify.ErrNotForYou) {
			t.Errorf("delivery %d at another org's verifier: %v, want ErrNotForYou", i, err)
		}
		if _, err := verifier(org, hookURL+c.Path+"/elsewhere").Verify(ctx, c.Signature, c.Raw); !errors.Is(err, pushverify.ErrNotForYou) {
			t.Errorf("delivery %d at another URL's verifier: %v, want ErrNotForYou", i, err)
		}
	}
}

// signedBy is the kid a delivery's signature names (unverified).
func signedBy(c hookCall) string {
	head, _, _ := strings.Cut(c.Signature, ".")
	var h struct{ Kid string }
	raw, _ := base64.RawURLEncoding.DecodeString(head)
	json.Unmarshal(raw, &h)
	return h.Kid
}

// jwks fetches the marketplace's key set with no key, checks what every
// fetch must get, and returns the published kids.
func jwks(t *testing.T, marketURL string) []string {
	t.Helper()
	res, err := http.Get(marketURL + "/api/v1/push/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/jwk-set+json" || res.Header.Get("Cache-Control") != "public, max-age=300" {
		t.Errorf("GET /api/v1/push/jwks: %d, Content-Type %q, Cache-Control %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"))
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		if _, private := k["d"]; private || k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || k["use"] != "sig" {
			t.Errorf("published key %v, want an ES256 public key", k)
		}
		kid, _ := k["kid"].(string)
		kids = append(kids, kid)
	}
	return kids
}

func newLongMarketWith(t *testing.T, env map[string]string, opts ...serve.Option) *longMarket {
	t.Helper()
	lm := &longMarket{env: env}
	lm.m = startMarketplaceWith(t, env, opts)
	lm.api = client{t: t, base: lm.m.URL}
	_, lm.seller = signup(t, lm.api, "Longrun Labs", "owner@longrun.example")
	lm.buyerOrg, lm.buyer = signup(t, lm.api, "Globex", "it@globex.example")
	return lm
}

// TestPushSignatureRotation: the marketplace's push signing key rotates
// (its clock moved 30 days): the next key is published an hour before it
// signs; deliveries signed before the rotation, in 1.0 and in 0.3, still
// verify with the JWKS after it, and those after it are signed by the new
// key; 7 days after the new key took over the old one is gone from the
// JWKS, and what it signed no longer verifies.
func TestPushSignatureRotation(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Now())
	ag := startLongAgent(t, "Long signed agent")
	hook := startWebhook(t)
	lm := newLongMarketWith(t, map[string]string{}, serve.WithPushKeyClock(clock))
	listing, ep := lm.list(t, ag.URL, nil, nil)
	first := jwks(t, lm.m.URL)
	if len(first) != 1 {
		t.Fatalf("JWKS at start: %v, want one key", first)
	}
	// Public: no key needed, and a key is refused nothing.
	if r := (client{t: t, base: lm.m.URL, key: "amk_not_a_key"}).do("GET", "/api/v1/push/jwks", nil); r.Status != 200 {
		t.Errorf("JWKS with a bad key: %d", r.Status)
	}

	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, rerr := b10.call("SendMessage", map[string]any{"message": msg10("long 3", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	if rerr != nil {
		t.Fatalf("send: %v", rerr)
	}
	task, _ := get(res, "task", "id").(string)
	if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": "rot", "url": hook.URL + "/rot"}); e != nil {
		t.Fatalf("1.0 push config: %v", e)
	}
	b03 := rpc{t: t, url: ep, key: lm.buyer}
	if _, e := b03.call("tasks/pushNotificationConfig/set", map[string]any{"taskId": task,
		"pushNotificationConfig": map[string]any{"id": "rot03", "url": hook.URL + "/rot03"}}); e != nil {
		t.Fatalf("0.3 push config: %v", e)
	}
	has := func(path, text string) bool {
		for _, c := range hook.received(path) {
			if bytes.Contains(c.Raw, []byte(text)) {
				return true
			}
		}
		return false
	}
	ag.Exec.step(task)
	waitFor(t, "part 1 at both webhooks", 10*time.Second, func() bool { return has("/rot", "part 1;") && has("/rot03", "part 1;") })
	verifyDeliveries(t, lm.m.URL, lm.buyerOrg, hook.URL, hook.received("/rot"), listing, task, "rot")
	verifyDeliveries(t, lm.m.URL, lm.buyerOrg, hook.URL, hook.received("/rot03"), listing, task, "rot03")
	before := append(hook.received("/rot"), hook.received("/rot03")...)
	for _, c := range before {
		if signedBy(c) != first[0] {
			t.Errorf("%s delivery %s signed by %q, want %s", c.Path, c.DeliveryID, signedBy(c), first[0])
		}
	}

	clock.Advance(30*24*time.Hour - time.Hour + time.Minute)
	kids := jwks(t, lm.m.URL)
	if len(kids) != 2 || kids[1] != first[0] {
		t.Fatalf("JWKS an hour before the key's 30 days are over: %v, want [next, %s]", kids, first[0])
	}
	next := kids[0]
	clock.Advance(time.Hour + time.Minute)
	ag.Exec.step(task)
	waitFor(t, "part 2 at both webhooks", 10*time.Second, func() bool { return has("/rot", "part 2;") && has("/rot03", "part 2;") })
	var after []hookCall
	for _, c := range append(hook.received("/rot"), hook.received("/rot03")...) {
		if bytes.Contains(c.Raw, []byte("part 2;")) {
			after = append(after, c)
			if signedBy(c) != next {
				t.Errorf("%s delivery after the rotation signed by %q, want the new key %s", c.Path, signedBy(c), next)
			}
		}
	}
	// A buyer verifies both with the JWKS after the rotation.
	verify := func(calls []hookCall) []error {
		var errs []error
		for _, c := range calls {
			v := &pushverify.Verifier{JWKSURL: lm.m.URL + "/api/v1/push/jwks", Org: lm.buyerOrg, URL: hook.URL + c.Path,
				Config: pushverify.ConfigIDs("rot", "rot03"), Now: clock.Now, MaxSkew: -1}
			_, err := v.Verify(context.Background(), c.Signature, c.Raw)
			errs = append(errs, err)
		}
		return errs
	}
	for i, err := range verify(before) {
		if err != nil {
			t.Errorf("%s delivery signed before the rotation, after it: %v", before[i].Path, err)
		}
	}
	for i, err := range verify(after) {
		if err != nil {
			t.Errorf("%s delivery signed after the rotation: %v", after[i].Path, err)
		}
	}

	// 7 days after the new key took over, the old one is gone.
	clock.Advance(7 * 24 * time.Hour)
	if kids := jwks(t, lm.m.URL); len(kids) != 1 || kids[0] != next {
		t.Errorf("JWKS past the retention: %v, want [%s]", kids, next)
	}
	for i, err := range verify(before) {
		if !errors.Is(err, pushverify.ErrUnknownKey) {
			t.Errorf("%s delivery of the key past its retention: %v, want ErrUnknownKey", before[i].Path, err)
		}
	}
	for i, err := range verify(after) {
		if err != nil {
			t.Errorf("%s delivery of the current key: %v", after[i].Path, err)
		}
	}
}

// TestPushSignaturesAcrossProcesses: a marketplace without a meter
// publishes the keys; a meter in another process, on the same PostgreSQL,
// signs with them: the buyer's webhook, verifying each request as it
// comes (pushverify.Handler) against the publishing marketplace's JWKS,
// accepts every delivery, and refuses a replay with another body.
func TestPushSignaturesAcrossProcesses(t *testing.T) {
	env := map[string]string{
		"AGENTMARKET_DATABASE_URL": relationaltest.PostgresDSN(t),
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_AUTO_APPROVE": "true",
	}
	publisher := map[string]string{"AGENTMARKET_EMBEDDED_METER": "false"}
	for k, v := range env {
		publisher[k] = v
	}
	ag := startLongAgent(t, "Long agent, metered apart")
	lm := newLongMarket(t, publisher)
	listing, _ := lm.list(t, ag.URL, nil, nil)
	meter := startMarketplace(t, env)
	ep := meter.URL + "/a2a/" + listing

	var (
		mu       sync.Mutex
		verified []*pushverify.Delivery
		refused  []string
	)
	var front *httptest.Server
	v := &pushverify.Verifier{JWKSURL: lm.m.URL + "/api/v1/push/jwks", Org: lm.buyerOrg, Config: pushverify.ConfigIDs("apart")}
	hook := startWebhook(t) // records what the verifier let through
	guarded := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		mu.Lock()
		verified = append(verified, d)
		mu.Unlock()
		hook.Config.Handler.ServeHTTP(w, r) // record it
	}))
	front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		guarded.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			mu.Lock()
			refused = append(refused, r.Header.Get("X-AgentMarket-Delivery-Id"))
			mu.Unlock()
		}
	}))
	t.Cleanup(front.Close)
	v.URL = front.URL + "/apart"

	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, rerr := b10.call("SendMessage", map[string]any{"message": msg10("long 2", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	if rerr != nil {
		t.Fatalf("send through the meter: %v", rerr)
	}
	task, _ := get(res, "task", "id").(string)
	if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": "apart", "url": front.URL + "/apart"}); e != nil {
		t.Fatalf("push config: %v", e)
	}
	ag.Exec.step(task)
	ag.Exec.step(task)
	waitFor(t, "the task's completion at the webhook", 15*time.Second, func() bool {
		for _, c := range hook.received("/apart") {
			if bytes.Contains(c.Raw, []byte("TASK_STATE_COMPLETED")) {
				return true
			}
		}
		return false
	})
	calls := hook.received("/apart")
	mu.Lock()
	if len(refused) != 0 || len(verified) < 3 {
		t.Errorf("the verifying webhook accepted %d deliveries and refused %v", len(verified), refused)
	}
	mu.Unlock()
	verifyDeliveries(t, lm.m.URL, lm.buyerOrg, front.URL, calls, listing, task, "apart")
	if a, b := jwks(t, lm.m.URL), jwks(t, meter.URL); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("the marketplace publishes %v, the meter's process %v", a, b)
	}

	// A captured delivery replayed with another body is refused.
	c := calls[0]
	req, _ := http.NewRequest("POST", front.URL+"/apart", bytes.NewReader(bytes.Replace(c.Raw, []byte("part 1;"), []byte("part 9;"), 1)))
	req.Header.Set("AgentMarket-Signature", c.Signature)
	req.Header.Set("X-AgentMarket-Delivery-Id", c.DeliveryID)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replay with a changed body: %v %v, want 401", r, err)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
