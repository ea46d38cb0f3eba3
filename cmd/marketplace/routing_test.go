package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// rpcs counts the calls of a JSON-RPC method an agent got from the meter.
func (a *sdkAgent) rpcs(method string) int {
	n := 0
	for _, x := range a.Wire.since(0) {
		if x.RPC == method {
			n++
		}
	}
	return n
}

// setEndpoints sets a listing's agent endpoints through the API.
func setEndpoints(t *testing.T, api client, seller, listing string, eps ...map[string]any) response {
	t.Helper()
	return api.with(seller).do("PATCH", "/api/v1/listings/"+listing, map[string]any{"endpoints": eps})
}

// routedMarket is a marketplace with a seller, a buyer, and a listing of
// an official-SDK agent the buyer subscribes to.
type routedMarket struct {
	m                 *started
	api               client
	seller, buyerKey  string
	a                 *sdkAgent
	listing, endpoint string
}

func startRoutedMarket(t *testing.T, env map[string]string) *routedMarket {
	t.Helper()
	r := &routedMarket{m: startMarketplace(t, env)}
	r.api = client{t: t, base: r.m.URL}
	_, r.seller = signup(t, r.api, "Acme Agents", "owner@acme.example")
	_, r.buyerKey = signup(t, r.api, "Globex", "it@globex.example")
	r.a = startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	r.listing, r.endpoint = listAndSubscribe(t, r.api, r.seller, r.buyerKey, r.a.URL)
	return r
}

// buyerClient is the buyer's official-SDK client of the listing.
func (r *routedMarket) buyerClient(t *testing.T, limit time.Duration) (context.Context, *a2aclient.Client) {
	t.Helper()
	buyer := newSDKBuyer(r.buyerKey)
	ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), limit)
	t.Cleanup(cancel)
	cl, _, _, err := buyer.connect(ctx, r.endpoint, "1.0", a2a.TransportProtocolJSONRPC)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cl
}

// TestEndpoints (issue 26, items 1 and 3): a listing runs its official-SDK
// agent at two endpoints (the card's and a replica the seller adds through
// the API; a private address is refused). New tasks are shared between
// them; every task's GetTask reaches the endpoint that holds it (each
// agent knows only its own tasks); one of the two killed mid-load (its
// port refuses connections) fails no call: each call it refused goes once
// to the other, /metrics counts the retries, and each call is one usage
// row. On both storage set-ups.
func TestEndpoints(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, _ string) {
		if env["AGENTMARKET_DATABASE_URL"] == "" {
			env["AGENTMARKET_DATA_DIR"] = t.TempDir() // kept for the restart
		}
		env["AGENTMARKET_HEALTH_CHECK_INTERVAL"] = "0" // the agents count the meter's GetTasks alone
		rm := startRoutedMarket(t, env)
		m, api, seller, buyerKey, a, listing := rm.m, rm.api, rm.seller, rm.buyerKey, rm.a, rm.listing
		b := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
		// Every call dials: a killed agent then refuses the connection, the
		// failure the meter retries. (A call on a kept-alive connection the
		// agent closed is not retried: the meter cannot tell whether it got
		// the request; docs/operations.md.)
		a.srv.Config.SetKeepAlivesEnabled(false)
		b.srv.Config.SetKeepAlivesEnabled(false)

		if r := setEndpoints(t, api, seller, listing, map[string]any{"url": "http://10.0.0.1:8080/a2a"}); r.Status != 422 ||
			!strings.Contains(string(r.Body), "endpoints[0].url") {
			t.Fatalf("a private endpoint: %d %s, want 422 naming endpoints[0].url", r.Status, r.Body)
		}
		if r := setEndpoints(t, api, seller, listing, map[string]any{"url": a.URL, "weight": 1}, map[string]any{"url": b.URL, "weight": 1}); r.Status != 200 {
			t.Fatalf("set endpoints: %d %s", r.Status, r.Body)
		}
		r := api.with(seller).do("GET", "/api/v1/listings/"+listing, nil)
		eps, _ := r.JSON["endpoints"].([]any)
		if len(eps) != 2 || get(eps[1].(map[string]any), "url") != b.URL || get(eps[1].(map[string]any), "binding") != "JSONRPC" ||
			get(eps[1].(map[string]any), "protocol_version") != "1.0" || get(eps[1].(map[string]any), "weight") != float64(1) {
			t.Fatalf("the seller's view of the endpoints: %s", r.Body)
		}
		if r := api.with(buyerKey).do("GET", "/api/v1/listings/"+listing, nil); r.JSON["endpoints"] != nil {
			t.Errorf("a buyer sees the seller's endpoints: %s", r.Body)
		}
		web := webSession(t, m.URL, "/signin", url.Values{"email": {"owner@acme.example"}, "password": {"correct horse battery"}})
		if web == nil {
			t.Fatal("the seller could not sign in")
		}
		res, err := web.Get(m.URL + "/listings/" + listing)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(page), `data-endpoint="`+b.URL+`"`) || !strings.Contains(string(page), "weight 1") {
			t.Errorf("the seller's listing page does not show the endpoints:\n%s", page)
		}

		ctx, cl := rm.buyerClient(t, 60*time.Second)
		var calls atomic.Int64 // every call the buyer makes through the meter
		send := func(text string) (a2a.TaskID, error) {
			calls.Add(1)
			res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)),
				Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			if err != nil {
				return "", err
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				return "", fmt.Errorf("answer %T, want a task", res)
			}
			return task.ID, nil
		}
		// The meter reads the listing again within its cache TTL.
		waitFor(t, "a call to the replica", 10*time.Second, func() bool {
			_, err := send("until the replica answers")
			return err == nil && b.sends(0) > 0
		})

		// Under load, new tasks go to both; each task's GetTask finds it.
		var (
			mu    sync.Mutex
			tasks []a2a.TaskID
			fails []string
		)
		load := func(n int, during func(i int)) {
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1))
						if i > n {
							return
						}
						if during != nil {
							during(i)
						}
						id, err := send(fmt.Sprintf("call %d", i))
						mu.Lock()
						if err != nil {
							fails = append(fails, err.Error())
						} else {
							tasks = append(tasks, id)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		}
		sentA, sentB := a.sends(0), b.sends(0)
		load(40, nil)
		if len(fails) > 0 {
			t.Fatalf("calls failed with both endpoints up: %v", fails)
		}
		dA, dB := a.sends(0)-sentA, b.sends(0)-sentB
		t.Logf("40 sends: %d to the card's endpoint, %d to the replica", dA, dB)
		if dA < 8 || dB < 8 || dA+dB != 40 {
			t.Errorf("40 sends went %d and %d to the two endpoints, want each a fair share and 40 in all", dA, dB)
		}
		phase1 := slices.Clone(tasks)
		for _, id := range tasks {
			if got, err := cl.GetTask(ctx, &a2a.GetTaskRequest{ID: id}); err != nil || got.ID != id {
				t.Fatalf("GetTask %s: %v, want the task from the endpoint that holds it", id, err)
			}
			calls.Add(1)
		}
		if ga, gb := a.rpcs("GetTask"), b.rpcs("GetTask"); ga < 8 || gb < 8 || ga+gb != len(tasks) {
			t.Errorf("GetTask calls reached the endpoints %d and %d times, want %d in all, each its own tasks'", ga, gb, len(tasks))
		}

		// A cancel reaches the endpoint running the task, whichever it is.
		for i := range 4 {
			id, err := send(fmt.Sprintf("please wait until canceled (%d)", i))
			if err != nil {
				t.Fatal(err)
			}
			got, err := cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
			calls.Add(1)
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("cancel %s: %v %+v, want it canceled by the endpoint that runs it", id, err, got)
			}
		}

		// One endpoint killed mid-load: no call fails; the refused ones go
		// to the other, once each.
		var once sync.Once
		load(40, func(i int) {
			if i == 10 {
				once.Do(b.kill)
			}
		})
		if len(fails) > 0 {
			t.Fatalf("calls failed while one of two endpoints was killed: %v", fails)
		}
		metrics := string(api.do("GET", "/metrics", nil).Body)
		retries := metricValue(metrics, "agentmarket_meter_endpoint_retries_total")
		if retries < 1 {
			t.Errorf("/metrics counts %v retries, want at least 1:\n%s", retries, grepLines(metrics, "endpoint"))
		}
		t.Logf("after the kill: %v retries", retries)
		// A retried call is one call: the agents answered each call once,
		// and the usage has one row each.
		if seen := a.sends(0) + a.rpcs("GetTask") + a.rpcs("CancelTask") + b.sends(0) + b.rpcs("GetTask") + b.rpcs("CancelTask"); int64(seen) != calls.Load() {
			t.Errorf("the agents answered %d calls, the buyer made %d", seen, calls.Load())
		}
		var got float64
		waitFor(t, "the usage of every call", 15*time.Second, func() bool {
			r := api.with(buyerKey).do("GET", "/api/v1/usage?group_by=listing", nil)
			items, _ := r.JSON["items"].([]any)
			if len(items) == 1 {
				got, _ = get(items[0].(map[string]any), "calls").(float64)
			}
			return got >= float64(calls.Load())
		})
		time.Sleep(300 * time.Millisecond)
		r = api.with(buyerKey).do("GET", "/api/v1/usage?group_by=listing", nil)
		items, _ := r.JSON["items"].([]any)
		if got = get(items[0].(map[string]any), "calls").(float64); got != float64(calls.Load()) {
			t.Errorf("usage counts %v calls, the buyer made %d: a retried call must be one row", got, calls.Load())
		}

		// After a restart the tasks' endpoints come back from the spool
		// and the database: the tasks made at the killed endpoint are not
		// asked of the other (which would answer TaskNotFound).
		m.stop(t)
		again := startMarketplace(t, env)
		rm.endpoint = again.URL + "/a2a/" + listing
		ctx2, cl2 := rm.buyerClient(t, 30*time.Second)
		getsA := a.rpcs("GetTask")
		var found, unreachable int
		for _, id := range phase1 {
			_, err := cl2.GetTask(ctx2, &a2a.GetTaskRequest{ID: id})
			switch {
			case err == nil:
				found++
			case errors.Is(err, a2a.ErrTaskNotFound):
				t.Errorf("GetTask %s after the restart: %v: it was asked of the wrong endpoint", id, err)
			default:
				unreachable++
			}
		}
		if found != dA || unreachable != dB || a.rpcs("GetTask")-getsA != dA {
			t.Errorf("after the restart: %d tasks found, %d unreachable, %d GetTasks reached the live endpoint; want %d, %d, %d",
				found, unreachable, a.rpcs("GetTask")-getsA, dA, dB, dA)
		}
	})
}

// metricValue is the value of an unlabelled metric in a Prometheus page.
func metricValue(page, name string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

func grepLines(page, word string) string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// dropper is an agent that takes a call and breaks the connection
// without a whole answer: a send is read and dropped unanswered (the
// agent may have started work), a stream gets one event naming a task
// and is cut.
type dropper struct {
	URL      string
	requests atomic.Int64
}

func startDropper(t *testing.T) *dropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := &dropper{URL: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				d.requests.Add(1)
				body := make([]byte, req.ContentLength)
				_, _ = req.Body.Read(body)
				if !strings.Contains(string(body), "SendStreamingMessage") {
					return // read, then dropped unanswered
				}
				var rpc struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal(body, &rpc)
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
					`data: {"jsonrpc":"2.0","id":`+string(rpc.ID)+`,"result":{"task":{"id":"dropped-task","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
				time.Sleep(50 * time.Millisecond)
			}()
		}
	}()
	return d
}

// TestNoRetryAfterWork (issue 26, item 3): an agent endpoint that took a
// send and dropped the connection unanswered, or began a stream naming a
// task and cut it, is never retried on the listing's other endpoint: the
// buyer gets the error, the agent got one request each time, and the other
// endpoint none.
func TestNoRetryAfterWork(t *testing.T) {
	rm := startRoutedMarket(t, map[string]string{})
	api, seller, a, listing := rm.api, rm.seller, rm.a, rm.listing
	d := startDropper(t)
	// The dropper weighs 100 to the card's 1: idle, it takes every new task.
	if r := setEndpoints(t, api, seller, listing, map[string]any{"url": a.URL, "weight": 1}, map[string]any{"url": d.URL, "weight": 100}); r.Status != 200 {
		t.Fatalf("set endpoints: %d %s", r.Status, r.Body)
	}
	ctx, cl := rm.buyerClient(t, 30*time.Second)
	waitFor(t, "the meter to route to the dropper", 10*time.Second, func() bool {
		before := d.requests.Load()
		_, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))})
		if d.requests.Load() == before {
			return false
		}
		if err == nil {
			t.Fatalf("a send the agent dropped answered without an error")
		}
		return true
	})
	if n := a.sends(0); n != 0 {
		t.Fatalf("a send the dropper took and dropped was retried: the other endpoint got %d sends", n)
	}
	if n := d.requests.Load(); n != 1 {
		t.Fatalf("the dropper got %d requests, want 1", n)
	}

	var events int
	var streamErr error
	for ev, err := range cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("stream"))}) {
		if err != nil {
			streamErr = err
			break
		}
		events++
		_ = ev
	}
	t.Logf("stream: %d events, then %v", events, streamErr)
	if events < 1 {
		t.Errorf("the stream relayed no event before the cut (err %v)", streamErr)
	}
	if n := d.requests.Load(); n != 2 {
		t.Errorf("the dropper got %d requests, want 2", n)
	}
	if n := a.sends(0); n != 0 {
		t.Errorf("a stream that named a task was retried: the other endpoint got %d sends", n)
	}
	if v := metricValue(string(api.do("GET", "/metrics", nil).Body), "agentmarket_meter_endpoint_retries_total"); v != 0 {
		t.Errorf("/metrics counts %v retries, want 0", v)
	}
}

// TestRetryOn503 (issue 26, item 3): an endpoint (or the gateway before
// it) that answers HTTP 503 naming no task accepted nothing: the send goes
// once to the listing's other endpoint, which answers it; the buyer sees
// one successful call and /metrics counts one retry.
func TestRetryOn503(t *testing.T) {
	rm := startRoutedMarket(t, map[string]string{"AGENTMARKET_HEALTH_CHECK_INTERVAL": "0"})
	var busy atomic.Int64
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busy.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(gw.Close)
	// The busy endpoint weighs 100 to the card's 1: idle, it is picked first.
	if r := setEndpoints(t, rm.api, rm.seller, rm.listing, map[string]any{"url": rm.a.URL, "weight": 1}, map[string]any{"url": gw.URL, "weight": 100}); r.Status != 200 {
		t.Fatalf("set endpoints: %d %s", r.Status, r.Body)
	}
	ctx, cl := rm.buyerClient(t, 30*time.Second)
	waitFor(t, "the meter to route to the busy endpoint", 10*time.Second, func() bool {
		res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("answer with a message"))})
		if err != nil {
			t.Fatalf("a send the busy endpoint refused failed: %v", err)
		}
		if _, ok := res.(*a2a.Message); !ok {
			t.Fatalf("answer %T, want the agent's message", res)
		}
		return busy.Load() > 0
	})
	if n := busy.Load(); n != 1 {
		t.Errorf("the busy endpoint got %d requests, want 1", n)
	}
	if v := metricValue(string(rm.api.do("GET", "/metrics", nil).Body), "agentmarket_meter_endpoint_retries_total"); v != 1 {
		t.Errorf("/metrics counts %v retries, want 1", v)
	}
	if sent := rm.a.sends(0); sent < 1 {
		t.Errorf("the card's endpoint got %d sends, want the retried one", sent)
	}
}
