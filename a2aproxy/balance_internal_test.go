package a2aproxy

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentmarket/agentmarket/listings"
)

// TestBalancerPick: idle endpoints share new tasks by weight and turns;
// a busy one gets fewer; an ejected one none; a retry never picks the
// endpoint that failed, and finds none when it was the only healthy one.
func TestBalancerPick(t *testing.T) {
	now := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	o := newOutliers(func() time.Time { return now })
	const a, b, c = "http://a.example/rpc", "http://b.example/rpc", "http://c.example/rpc"
	pool := []listings.AgentEndpoint{{URL: a, Weight: 1}, {URL: b, Weight: 3}}
	var bl balancer
	got := map[string]int{}
	for range 400 {
		ep := bl.pick(pool, o, "")
		got[ep]++
		l := bl.load(ep)
		l.Add(1)
		if got[ep]%2 == 0 {
			l.Add(-1) // half the calls end at once: the rest stay in flight
		}
	}
	if got[a] < 70 || got[a] > 130 || got[b] < 270 || got[b] > 330 {
		t.Errorf("picks %v, want about 1:3 by weight", got)
	}

	var idle balancer
	even := map[string]int{}
	for range 10 {
		even[idle.pick([]listings.AgentEndpoint{{URL: a, Weight: 1}, {URL: b, Weight: 1}}, o, "")]++
	}
	if even[a] != 5 || even[b] != 5 {
		t.Errorf("idle endpoints of equal weight picked %v, want turns", even)
	}

	for range EjectAfter {
		p, _ := o.admit(b)
		o.report(b, p, failed)
	}
	for range 10 {
		if ep := bl.pick(pool, o, ""); ep != a {
			t.Fatalf("picked %s while it is ejected", ep)
		}
	}
	if ep := bl.pick(pool, o, a); ep != "" {
		t.Errorf("a retry away from %s picked %q, want none (the other is ejected)", a, ep)
	}
	if ep := bl.pick([]listings.AgentEndpoint{{URL: a}, {URL: c}}, o, a); ep != c {
		t.Errorf("a retry away from %s picked %q, want %s", a, ep, c)
	}
	if ep := bl.pick([]listings.AgentEndpoint{{URL: b}}, o, ""); ep != b {
		t.Errorf("every endpoint ejected: picked %q, want the first", ep)
	}
}

// TestRetrySafety: only failures that show the agent accepted nothing are
// retried.
func TestRetrySafety(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"wrapped dial failure", errors.Join(errors.New("x"), refused), true},
		{"reset after the request was written", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"closed before the answer", fasthttp.ErrConnectionClosed, false},
		{"timeout", fasthttp.ErrTimeout, false},
		// Ejected between the balancer's pick and the call: nothing sent
		// (TestEndpoints caught a call answered ejected while the other
		// endpoint was up).
		{"ejected after the pick", ejectedError{rpcErr(CodeUpstreamUnreachable, 200, "ejected")}, true},
	} {
		if got := notAccepted(c.err); got != c.want {
			t.Errorf("%s: notAccepted = %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		status int
		body   string
		want   bool
	}{
		{502, "<html>Bad Gateway</html>", true},
		{503, `{"error":"overloaded"}`, true},
		{503, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1"}}}`, false},
		{502, `{"taskId":"t1"}`, false},
		{500, "oops", false},
		{504, "", false},
		{200, "", false},
	} {
		if got := refusedWork(c.status, []byte(c.body)); got != c.want {
			t.Errorf("refusedWork(%d, %s) = %v, want %v", c.status, c.body, got, c.want)
		}
	}
}
