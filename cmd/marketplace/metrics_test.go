package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
)

// marker is in every path, listing id and method name the load makes up:
// no label value may ever carry it.
const marker = "zzq"

// TestMetricsUnderLoad: /metrics stays a valid, bounded exposition while
// the marketplace and its embedded meter serve concurrent traffic of every
// kind: mixed HTTP methods over the same keep-alive connections, paths
// nobody registered, A2A calls with made-up method names, an agent that
// answers made-up error codes. Every scrape, during the load and after it,
// answers 200, parses, holds no series twice, and takes every label value
// from its closed set; and the counters count what was sent, under the
// status the caller got.
func TestMetricsUnderLoad(t *testing.T) {
	mk := newMarket(t, nil)
	oddID, oddEP := mk.listOddAgent(t)

	const workers, rounds = 8, 25
	tr := &http.Transport{MaxIdleConnsPerHost: workers + 2}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := mk.m.URL
	var seq atomic.Int64

	send := func(method, url, key, body string) error {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, url, rd)
		if err != nil {
			return err
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("traceparent", fmt.Sprintf("00-%032x-00f067aa0ba902b7-01", seq.Add(1)))
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		return res.Body.Close()
	}
	rpcBody := func(method string, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				odd := fmt.Sprintf("%s%d-%d", marker, w, i)
				steps := []struct{ method, url, key, body string }{
					{"GET", base + "/healthz", "", ""},
					{"POST", base + "/healthz", "", ""},
					{"DELETE", base + "/api/v1/listings/" + odd, "", ""},
					{"GET", base + "/api/v1/listings", mk.buyer, ""},
					{"PATCH", base + "/no/such/" + odd, "", ""},
					{"PUT", base + "/api/v1/" + odd, mk.buyer, "{}"},
					{"OPTIONS", base + "/", "", ""},
					{"HEAD", base + "/", "", ""},
					{"GET", base + "/listings/" + odd, "", ""},
					{"GET", base + "/static/" + odd + ".css", "", ""},
					{"GET", base + "/a2a/" + mk.id03 + "/.well-known/agent-card.json", "", ""},
					{"POST", base + "/a2a/" + odd, mk.buyer, rpcBody("tasks/get", `{"id":"t"}`)},
					{"POST", mk.ep03, mk.buyer, rpcBody(odd+"/send", `{}`)},
					{"POST", mk.ep03, mk.buyer, rpcBody("tasks/get", `{"id":"`+odd+`"}`)},
					{"POST", oddEP, mk.buyer, rpcBody("tasks/get", `{"id":"`+odd+`"}`)},
					{"POST", oddEP, mk.buyer, rpcBody("message/send", `{"message":{"kind":"message","messageId":"`+odd+
						`","role":"user","parts":[{"kind":"text","text":"hi"}]}}`)},
				}
				for _, s := range steps {
					if err := send(s.method, s.url, s.key, s.body); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	scrapes, bad := 0, 0
	var last map[string]*dto.MetricFamily
	for loaded := false; !loaded; {
		select {
		case <-done:
			loaded = true // one more scrape, of the whole load
		default:
		}
		fams, err := scrape(hc, base)
		if err == nil {
			err = closedSets(fams)
		}
		scrapes++
		if err != nil {
			if bad++; bad <= 3 {
				t.Errorf("scrape %d: %v", scrapes, err)
			}
			continue
		}
		last = fams
	}
	close(errs)
	for err := range errs {
		t.Fatalf("load: %v", err)
	}
	if bad > 0 {
		t.Fatalf("%d of %d scrapes of /metrics were wrong", bad, scrapes)
	}

	// The counters count what was sent (each round sent one of each),
	// under the status it got.
	for _, w := range []struct {
		family string
		labels map[string]string
	}{
		{"agentmarket_marketplace_http_requests_total", map[string]string{"method": "PATCH", "route": "unmatched", "status": "404"}},
		{"agentmarket_marketplace_http_requests_total", map[string]string{"method": "DELETE", "route": "/api/v1", "status": "401"}},
		// A method that is none of A2A's is refused before it is read.
		{"agentmarket_meter_a2a_requests_total", map[string]string{"listing": mk.id03, "method": "", "code": "-32601"}},
		{"agentmarket_meter_a2a_requests_total", map[string]string{"listing": oddID, "method": "message/send", "code": "other"}},
	} {
		if got := counter(last, w.family, w.labels); got != workers*rounds {
			t.Errorf("%s%v = %v, want %d", w.family, w.labels, got, workers*rounds)
		}
	}
}

// listOddAgent lists an A2A 0.3 agent that answers every call with an
// error code of its own invention (-31000 minus a count), and subscribes
// the buyer to it.
func (mk *market) listOddAgent(t *testing.T) (id, endpoint string) {
	t.Helper()
	card := demoagent.New(demoagent.Config{Version: "0.3", Name: "Oddball"})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			card.ServeHTTP(w, r)
			return
		}
		var in struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"%s"}}`, in.ID, -31000-n.Add(1), marker)
	}))
	t.Cleanup(srv.Close)
	card.SetBaseURL(srv.URL + "/")
	r := mk.api.with(mk.seller).do("POST", "/api/v1/listings", map[string]any{"card_url": srv.URL, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	id = r.str("id")
	if r = mk.api.with(mk.buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": id}); r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	return id, r.str("endpoint")
}

// scrape reads /metrics and parses it with Prometheus' own text parser.
func scrape(hc *http.Client, base string) (map[string]*dto.MetricFamily, error) {
	res, err := hc.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.300s", res.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not Prometheus text: %v", err)
	}
	return fams, nil
}

// httpMethods are the label values of an HTTP method: the methods Fiber
// serves, anything else as OTHER.
var httpMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true, "OTHER": true}

// closedSets checks that no series appears twice and that every label
// value of the request series is one the caller could not choose.
func closedSets(fams map[string]*dto.MetricFamily) error {
	var problems []string
	for name, f := range fams {
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			var sig []string
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				sig = append(sig, l.GetName()+"="+strconv.Quote(v))
				if !utf8.ValidString(v) || strings.Contains(v, marker) {
					problems = append(problems, fmt.Sprintf("%s: %s=%q was chosen by a caller", name, l.GetName(), v))
				}
				if ok, what := labelInSet(name, l.GetName(), v); !ok {
					problems = append(problems, fmt.Sprintf("%s: %s=%q is not %s", name, l.GetName(), v, what))
				}
			}
			sort.Strings(sig)
			key := strings.Join(sig, ",")
			if seen[key] {
				problems = append(problems, fmt.Sprintf("%s{%s} appears twice", name, key))
			}
			seen[key] = true
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("… and %d more", len(problems)-5))
		}
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func labelInSet(family, label, v string) (bool, string) {
	switch {
	case strings.HasSuffix(family, "_http_requests_total") || strings.HasSuffix(family, "_http_request_duration_seconds"):
		switch label {
		case "method":
			return httpMethods[v], "an HTTP method"
		case "route":
			return v == "unmatched" || strings.HasPrefix(v, "/"), "a route pattern"
		case "status":
			n, err := strconv.Atoi(v)
			return err == nil && n >= 100 && n <= 599, "an HTTP status"
		}
	case family == "agentmarket_meter_a2a_requests_total":
		switch label {
		case "method":
			_, _, known := wire.LookupMethod(v)
			return v == "" || known, "an A2A method"
		case "code":
			n, err := strconv.Atoi(v)
			return v == "other" || err == nil && (n == 0 || n >= -32768 && n <= -32000), "a JSON-RPC error code"
		}
	}
	return true, ""
}

// counter is the value of the counter of family with exactly labels.
func counter(fams map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	for _, m := range fams[family].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if match {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
