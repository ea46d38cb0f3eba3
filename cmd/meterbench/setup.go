package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"time"
)

// bench is what a run loads: the canned agents, the peers, the
// marketplace with its meter, and the targets.
type bench struct {
	builtin   *agent
	canned    string // the base URL of the message/send phases' canned agent, ending in /
	agentName string
	store     string // the meter's stores, as the goals name them
	peers     []Peer
	stops     []func() // run in reverse order by stop
	usage     *usageAPI
	targets   []target // the max-throughput targets, in the order of a round
	metered   []meteredListing
	streams   []target // direct, go-proxy and meter for the SSE and held-stream phases
	streamHdr map[string]string
	fleet     *fleetMeter // -fleet: the second meter
	redis     bool        // the meters share a Redis
	sink      *otlpSink   // -otlp-sink: the meter's traces go there
}

// target is one URL loaded with one request.
type target struct {
	name    string
	url     string
	body    []byte
	headers map[string]string
	req     request
	why     string // when set, the target is not measured, for this reason
	pid     int    // the process serving it, when another one we started and read the CPU of; else 0
}

func (b *bench) stop() {
	for i := len(b.stops) - 1; i >= 0; i-- {
		b.stops[i]()
	}
}

func (b *bench) target(name string) *target {
	for i := range b.targets {
		if b.targets[i].name == name {
			return &b.targets[i]
		}
	}
	return nil
}

// setUp starts the built-in agent, the peers that are installed, the
// reverse proxies and the marketplace, lists the canned agents and
// subscribes a buyer to them. Only a failure of what the tool runs itself
// is an error; a peer that cannot run is reported in b.peers.
func setUp(ctx context.Context, o *options, getenv func(string) string, dataDir string, meterLog, progress io.Writer) (_ *bench, err error) {
	meterLogName := filepath.Join(dataDir, meterLogFile)
	b := &bench{store: storeOf(getenv)}
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	if b.builtin, err = startAgent(ctx, streamSpec{events: o.sseEvents, interval: o.sseInterval}); err != nil {
		return nil, fmt.Errorf("canned agent: %w", err)
	}

	var ngx *nginxPeer
	var nginxWhy string
	if bin, status, why := findProgram(o.nginx); bin == "" {
		b.peers = append(b.peers, Peer{Name: "nginx", Status: status, Detail: why})
		nginxWhy = "nginx " + status + ": " + why
	} else if ngx, err = startNginx(ctx, bin, dataDir); err != nil {
		b.peers = append(b.peers, Peer{Name: "nginx", Status: "failed", Detail: err.Error()})
		nginxWhy, ngx = "nginx failed to start", nil
	} else {
		b.stops = append(b.stops, ngx.proc.stop)
		b.peers = append(b.peers, Peer{Name: "nginx", Status: "running", Detail: fmt.Sprintf("%s: canned agent at %s, proxy_pass at %s", bin, ngx.agent, ngx.proxy)})
	}
	switch {
	case o.agent == "nginx" && ngx == nil:
		return nil, fmt.Errorf("-agent nginx: nginx is not running (%s)", b.peers[len(b.peers)-1].Detail)
	case ngx != nil && o.agent != "builtin":
		b.canned, b.agentName = ngx.agent, "nginx return 200"
	default:
		b.canned, b.agentName = b.builtin.base, "built-in"
	}
	cannedURL := func(v protocol) string { return under(b.canned, v) }

	var sdk *sdkProxy
	var sdkWhy string
	if bin, status, why := findA2A(ctx, o.a2a, o.a2aBuild, o.a2aBuildTimeout, progress); bin == "" {
		b.peers = append(b.peers, Peer{Name: "sdk-proxy", Status: status, Detail: why})
		sdkWhy = "a2a CLI " + status + ": " + why
	} else if sdk, err = startSDKProxy(ctx, bin, cannedURL(v10), dataDir); err != nil {
		b.peers = append(b.peers, Peer{Name: "sdk-proxy", Status: "failed", Detail: err.Error()})
		sdkWhy, sdk = "a2a serve --proxy failed to start", nil
	} else {
		b.stops = append(b.stops, sdk.proc.stop)
		b.peers = append(b.peers, Peer{Name: "sdk-proxy", Status: "running", Detail: fmt.Sprintf("%s serve --proxy %s --transport jsonrpc --quiet, at %s", bin, cannedURL(v10), sdk.url)})
	}

	var lean *leanPeer
	var leanWhy string
	if bin, src, status, why := findLean(ctx, o.lean, progress); bin == "" {
		b.peers = append(b.peers, Peer{Name: "lean-peer", Status: status, Detail: why})
		leanWhy = "lean peer " + status + ": " + why
	} else if lean, err = startLean(ctx, bin, cannedURL(v10), dataDir, o.leanSync); err != nil {
		b.peers = append(b.peers, Peer{Name: "lean-peer", Status: "failed", Detail: err.Error()})
		leanWhy, lean = "the lean peer failed to start", nil
	} else {
		b.stops = append(b.stops, lean.proc.stop)
		from := ""
		if src != "" {
			from = " (built from " + src + ")"
		}
		b.peers = append(b.peers, Peer{Name: "lean-peer", Status: "running", Detail: fmt.Sprintf("%s%s -sync %s, forwarding to %s, at %s", bin, from, o.leanSync, cannedURL(v10), lean.url)})
	}

	goProxy, err := startReverseProxy(ctx, b.canned)
	if err != nil {
		return nil, fmt.Errorf("reverse proxy: %w", err)
	}
	streamAgent, streamProxy := b.builtin.url(v03), under(goProxy, v03)
	if b.canned != b.builtin.base {
		p, err := startReverseProxy(ctx, b.builtin.base)
		if err != nil {
			return nil, fmt.Errorf("reverse proxy: %w", err)
		}
		streamProxy = under(p, v03)
	}

	if o.otlpSink {
		sink, err := startOTLPSink(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP sink: %w", err)
		}
		b.stops = append(b.stops, sink.stop)
		b.sink = sink
		outer := getenv
		getenv = func(k string) string {
			if k == "AGENTMARKET_OTEL_ENDPOINT" {
				return sink.url
			}
			return outer(k)
		}
	}

	var m *market
	if o.meterProcess {
		m, err = startMarketProcess(ctx, marketEnv(getenv, dataDir, o.logLevel, o.leanSync), dataDir, meterLog, meterLogName)
	} else {
		m, err = startMarket(ctx, marketEnv(getenv, dataDir, o.logLevel, o.leanSync), meterLog)
	}
	if err != nil {
		return nil, fmt.Errorf("marketplace: %w", err)
	}
	b.stops = append(b.stops, m.stop)
	agents := []string{cannedURL(v10), cannedURL(v03)}
	if streamAgent != cannedURL(v03) {
		agents = append(agents, streamAgent)
	}
	cards := make([]string, len(agents))
	for i, a := range agents {
		cards[i] = a + ".well-known/agent-card.json"
	}
	sub, err := subscribe(ctx, m.URL, cards, o.endpoints, o.limits)
	if err != nil {
		return nil, err
	}
	l10, l03, lStream := sub.Listings[0], sub.Listings[1], sub.Listings[len(sub.Listings)-1]
	b.usage = &usageAPI{base: m.URL, key: sub.Key, since: time.Now().Add(-time.Minute)}

	auth := map[string]string{"Authorization": "Bearer " + sub.Key}
	v10h := map[string]string{"A2A-Version": "1.0"}
	leanHeaders := map[string]string{"Authorization": "Bearer " + leanBuyerKey, "A2A-Version": "1.0"}
	both := maps.Clone(auth)
	maps.Copy(both, v10h)
	calls10, calls03 := &callCount{}, &callCount{}
	body10, body03 := sendBody(v10), sendBody(v03)
	var nginx10URL, nginx03URL, sdkURL, leanURL string // empty with a why when the peer does not run
	var sdkPid, leanPid int
	if ngx != nil {
		nginx10URL, nginx03URL = under(ngx.proxy, v10), under(ngx.proxy, v03)
	}
	if sdk != nil {
		sdkURL, sdkPid = sdk.url, sdk.proc.pid()
	}
	if lean != nil {
		leanURL, leanPid = lean.url, lean.proc.pid()
	}
	type spec struct {
		name, url, why string
		body           []byte
		headers        map[string]string
		rest           bool
		calls          *callCount
		pid            int
	}
	specs := []spec{
		{name: direct10, url: cannedURL(v10), body: body10, headers: v10h},
		{name: nginx10, url: nginx10URL, why: nginxWhy, body: body10, headers: v10h},
		{name: sdkProxy10, url: sdkURL, why: sdkWhy, body: body10, headers: v10h, pid: sdkPid},
		{name: direct03, url: cannedURL(v03), body: body03},
		{name: nginx03, url: nginx03URL, why: nginxWhy, body: body03},
		{name: goProxy03, url: under(goProxy, v03), body: body03},
	}
	for _, t := range o.extra {
		specs = append(specs, spec{name: t.name, url: t.url, body: body03})
	}
	// The lean peer right before the meter, its yardstick; the meter's
	// last: the projections are checked as soon as its last phase ends.
	specs = append(specs,
		spec{name: lean10, url: leanURL, why: leanWhy, body: body10, headers: leanHeaders, pid: leanPid},
		spec{name: meter10, url: l10.Endpoint, body: body10, headers: both, calls: calls10, pid: m.pid},
		spec{name: meter03, url: l03.Endpoint, body: body03, headers: auth, calls: calls03, pid: m.pid},
		spec{name: meterREST, url: l10.Endpoint + "/message:send", body: sendParams10(), headers: both, rest: true, calls: calls10, pid: m.pid},
		spec{name: meterBridged, url: l10.Endpoint, body: body03, headers: auth, calls: calls10, pid: m.pid},
	)
	for _, s := range specs {
		t := target{name: s.name, url: s.url, why: s.why, body: s.body, headers: s.headers, pid: s.pid}
		if t.why == "" {
			if t.req, err = newRequest(t.url, t.body, t.headers); err != nil {
				return nil, err
			}
			t.req.rest, t.req.calls = s.rest, s.calls
		}
		b.targets = append(b.targets, t)
	}
	b.metered = []meteredListing{
		{id: l10.ID, targets: []string{meter10, meterREST, meterBridged}, calls: calls10},
		{id: l03.ID, targets: []string{meter03}, calls: calls03},
	}
	b.streams = []target{{name: "direct", url: streamAgent}, {name: "go-proxy", url: streamProxy}, {name: "meter", url: lStream.Endpoint}}
	b.streamHdr = auth

	if o.fleet {
		if getenv("AGENTMARKET_DATABASE_URL") == "" {
			return nil, fmt.Errorf("-fleet: the meters share a database: set AGENTMARKET_DATABASE_URL (scripts/meterbench-fleet.sh does)")
		}
		if b.fleet, err = startFleetMeter(ctx, o, getenv, dataDir, meterLog, m, l10.Endpoint); err != nil {
			return nil, err
		}
		b.stops = append(b.stops, b.fleet.m.stop)
		b.redis = getenv("AGENTMARKET_REDIS_URL") != ""
	}
	for _, name := range []string{direct10, direct03, meter10, meter03} {
		t := b.target(name)
		if why := probe(t.req, o.timeout); why != "" {
			return nil, fmt.Errorf("%s target %s %s", name, t.url, why)
		}
	}
	return b, nil
}

// storeOf names the stores the marketplace will open with the caller's
// settings: the goal for the meter against nginx depends on them.
func storeOf(getenv func(string) string) string {
	switch {
	case getenv("AGENTMARKET_DATABASE_URL") == "":
		return storeEmbedded
	case getenv("AGENTMARKET_CLICKHOUSE_URL") == "":
		return "PostgreSQL"
	}
	return "PostgreSQL + ClickHouse"
}

const storeEmbedded = "embedded"

// under is the URL of the version v agent (or of a proxy to it) at base,
// which ends in /.
func under(base string, v protocol) string { return base + strings.TrimPrefix(v.path(), "/") }
