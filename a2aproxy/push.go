package a2aproxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// Push relays push notifications. A buyer's push config never reaches the
// agent: the meter checks the buyer's webhook (https, or an allowed
// address; never loopback, private, link-local or metadata addresses),
// keeps it, and registers its own callback with the agent instead, with a
// secret per task config that every notification must present. What
// arrives is metered, stored in a durable outbox, and delivered to the
// buyer's webhook with the buyer's authentication and token, in the
// buyer's A2A version, signed with the marketplace's published keys
// (Signer), retried with backoff and jitter, in order per config, under a
// delivery id that stays the same across retries.
type Push struct {
	Store  contracts.PushStore
	Sealer Sealer
	Guard  AddressGuard
	// Signer signs every attempt of a delivery, over the exact body sent;
	// the signature goes in the SignatureHeader. Nil: deliveries go
	// unsigned.
	Signer DeliverySigner
	// Allow lists the ranges where a webhook may use plain http (and be
	// reached despite the SSRF rules: the Guard's own allow list).
	Allow []netip.Prefix

	MaxAttempts int           // attempts before a delivery fails; default 8
	RetryBase   time.Duration // first retry delay; doubled each attempt; default 1s
	RetryMax    time.Duration // longest delay between attempts; default 5m
	Timeout     time.Duration // one attempt; default 10s
	Poll        time.Duration // how often the outbox is read when idle; default 500ms
	// Retention is how long delivered and failed deliveries are kept (the
	// API shows them); default 30 days. Pending ones stay until settled.
	Retention time.Duration
	// Caps bound what each destination (a webhook's scheme, host and
	// port) receives from this meter: deliveries in flight, and started
	// per second (pushqueue.DefaultCaps where zero). DestinationCaps are
	// the operator's own for the destinations named
	// (contracts.Destination), a zero field taking Caps'.
	Caps            pushqueue.Caps
	DestinationCaps map[string]pushqueue.Caps
	// A destination whose every attempt failed for PauseAfter (default
	// 10 minutes; 5 attempts at least) is paused for PauseFor (default 5
	// minutes) between probes, and the orgs concerned are told through
	// their alert webhooks (contracts.PushPausedAlert).
	PauseAfter time.Duration
	PauseFor   time.Duration
	// Gate is the state the meters share (contracts/redis): with it, the
	// caps hold across meters and a Retry-After or pause one meter saw
	// holds all. Without it, or while it fails, each meter keeps its
	// share of the caps: 1/Meters (default 1) of them.
	Gate   contracts.PushGate
	Meters int
	// OwnCaps are the buyer orgs' own caps for their deliveries to a
	// destination (contracts.PushCaps), lower than the destination's, and
	// for the deliveries of one push config (contracts.PushConfigCaps, a
	// rate); read again after ownCapsFresh. Nil: none.
	OwnCaps contracts.PushCapsStore

	client *http.Client
	owned  sync.Mutex
	owns   map[string]ownCapsRead // by org
	wake   chan struct{}
	once   sync.Once
}

func (ps *Push) init() {
	ps.once.Do(func() {
		def := func(d *time.Duration, v time.Duration) {
			if *d == 0 {
				*d = v
			}
		}
		def(&ps.RetryBase, time.Second)
		def(&ps.RetryMax, 5*time.Minute)
		def(&ps.Timeout, 10*time.Second)
		def(&ps.Poll, 500*time.Millisecond)
		def(&ps.Retention, 30*24*time.Hour)
		if ps.MaxAttempts == 0 {
			ps.MaxAttempts = 8
		}
		ps.wake = make(chan struct{}, 1)
		ps.client = &http.Client{
			Timeout: ps.Timeout,
			Transport: &http.Transport{
				Proxy:               nil, // a proxy would hide the address the guard must judge
				DialContext:         ps.Guard.DialContext(&net.Dialer{Timeout: 5 * time.Second}),
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     30 * time.Second,
			},
			// A redirect could lead anywhere: a webhook answers, or fails.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
}

// capsOf is a destination's caps.
func (ps *Push) capsOf(dest string) pushqueue.Caps {
	c := ps.Caps
	if o, ok := ps.DestinationCaps[dest]; ok {
		if o.Concurrency > 0 {
			c.Concurrency = o.Concurrency
		}
		if o.PerSecond > 0 {
			c.PerSecond = o.PerSecond
		}
		if o.Burst > 0 {
			c.Burst = o.Burst
		}
	}
	return c
}

// ownCapsFresh is how long a meter goes by an org's own caps before it
// reads them again: a change takes effect within it.
const ownCapsFresh = 5 * time.Second

type ownCapsRead struct {
	caps    []contracts.PushCaps
	configs map[[3]string]float64 // by listing, task and config id
	at      time.Time
}

// within are the caps of org's delivery d besides its destination's
// (dest): the org's own there, and its config's own rate (zero: none). A
// store that fails leaves the caps last read in force (none if never).
func (ps *Push) within(ctx context.Context, log *slog.Logger, d contracts.Delivery, dest string, now time.Time) pushqueue.Within {
	if ps.OwnCaps == nil {
		return pushqueue.Within{}
	}
	ps.owned.Lock()
	r, ok := ps.owns[d.OrgID]
	ps.owned.Unlock()
	if !ok || now.Sub(r.at) >= ownCapsFresh || now.Before(r.at) {
		if read, err := ps.readOwnCaps(ctx, d.OrgID, now); err != nil {
			log.WarnContext(ctx, "push caps of an org not read; the last read stay in force", "org", d.OrgID, "err", err)
		} else {
			r = read
			ps.owned.Lock()
			if ps.owns == nil || len(ps.owns) > 10000 {
				ps.owns = map[string]ownCapsRead{}
			}
			ps.owns[d.OrgID] = r
			ps.owned.Unlock()
		}
	}
	var w pushqueue.Within
	for _, c := range r.caps {
		if c.Destination == dest {
			w.Own = pushqueue.Caps{Concurrency: c.MaxInFlight, PerSecond: c.PerSecond}
		}
	}
	if rate := r.configs[[3]string{d.ListingID, d.TaskID, d.ConfigID}]; rate > 0 {
		w.Config, w.ConfigRate = pushConfigName(d), rate
	}
	return w
}

func (ps *Push) readOwnCaps(ctx context.Context, org string, now time.Time) (ownCapsRead, error) {
	cs, err := ps.OwnCaps.PushCaps(ctx, org)
	if err != nil {
		return ownCapsRead{}, err
	}
	cfgs, err := ps.OwnCaps.PushConfigCaps(ctx, org)
	if err != nil {
		return ownCapsRead{}, err
	}
	r := ownCapsRead{caps: cs, at: now}
	if len(cfgs) > 0 {
		r.configs = make(map[[3]string]float64, len(cfgs))
		for _, c := range cfgs {
			r.configs[[3]string{c.ListingID, c.TaskID, c.ConfigID}] = c.PerSecond
		}
	}
	return r, nil
}

// pushConfigName names a delivery's push config in the meter's queue and
// the meters' shared state: a digest, whatever the ids hold.
func pushConfigName(d contracts.Delivery) string {
	h := sha256.Sum256([]byte(d.ListingID + "\x00" + d.TaskID + "\x00" + d.ConfigID))
	return hex.EncodeToString(h[:16])
}

// EffectiveCaps are a destination's caps, defaults filled in: what an
// org's own caps there are clamped to.
func (ps *Push) EffectiveCaps(dest string) contracts.PushLimit {
	return pushqueue.WithDefaults(ps.capsOf(dest))
}

func (ps *Push) kick() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// DeliverySigner signs a delivery attempt (pushsign.Keys): a JWS with a
// detached payload over d.Body, naming the delivery, task, listing and
// config, and whom it is for (d.OrgID and targetURL, the URL it is
// POSTed to), signed now.
type DeliverySigner interface {
	SignDelivery(ctx context.Context, d contracts.Delivery, targetURL string) (string, error)
}

// SignatureHeader carries a delivery's signature (pushsign.Header).
const SignatureHeader = "AgentMarket-Signature"

// MaxPushConfigsPerTask bounds a task's push configs: each costs the
// agent a callback and every notification a delivery.
const MaxPushConfigsPerTask = 10

// CallbackPath is where agents post notifications for the meter's
// callback id.
const CallbackPath = "/a2a-callbacks/"

// pushConfig is a push config in its 1.0 form (TaskPushNotificationConfig).
type pushConfig struct {
	TaskID         string    `json:"taskId,omitempty"`
	ID             string    `json:"id,omitempty"`
	URL            string    `json:"url,omitempty"`
	Token          string    `json:"token,omitempty"`
	Authentication *pushAuth `json:"authentication,omitempty"`
}

type pushAuth struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// pushSecrets is what is sealed of a buyer's config.
type pushSecrets struct {
	Token       string `json:"token,omitempty"`
	Credentials string `json:"credentials,omitempty"`
}

func sealContext(listingID, taskID, configID string) []byte {
	return []byte("push|" + listingID + "|" + taskID + "|" + configID)
}

func secretHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// pushSupported reports whether push-config methods may go through for
// this call's listing: the meter relays them, and the agent offers them.
func (p *Proxy) pushSupported(cl *call) bool {
	return p.Push != nil && cl.target.Card.Capabilities.PushNotifications
}

// pushMethod serves the push-config methods from the meter's own store,
// registering and removing the meter's callback at the agent.
func (p *Proxy) pushMethod(c exchange, cl *call) error {
	ctx, cancel := context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	defer cancel()
	r := cl.req
	if r.Version != wire.V10 {
		body, err := wire.TranslateRequest(r, wire.V10)
		if err != nil {
			return p.fail(c, cl, err)
		}
		tr, werr := wire.ParseRequest(body, "1.0")
		if werr != nil {
			return p.fail(c, cl, werr)
		}
		r = tr
	}
	var prm pushConfig
	if err := json.Unmarshal(r.Params, &prm); err != nil {
		return p.fail(c, cl, wire.InvalidParams("params: "+err.Error()))
	}
	prm.TaskID = cl.req.TaskID()
	var result json.RawMessage
	var err error
	switch r.Method {
	case wire.MethodPushSet:
		result, err = p.pushSet(ctx, cl, prm)
	case wire.MethodPushGet:
		result, err = p.pushGet(ctx, cl, prm)
	case wire.MethodPushList:
		result, err = p.pushList(ctx, cl)
	case wire.MethodPushDelete:
		result, err = p.pushDelete(ctx, cl, prm)
	}
	if err != nil {
		return p.fail(c, cl, err) // which renders it in the buyer's version
	}
	if cl.req.Version != wire.V10 {
		if result, err = wire.TranslateResult(wire.V10, cl.req.Version, cl.req.Method, result); err != nil {
			return p.fail(c, cl, err)
		}
	}
	return p.answer(ctx, c, cl, result)
}

// pushSet checks the buyer's webhook, registers the meter's callback with
// the agent under the buyer's config id, and keeps the buyer's config.
func (p *Proxy) pushSet(ctx context.Context, cl *call, prm pushConfig) (json.RawMessage, error) {
	if err := p.Push.checkURL(ctx, prm.URL); err != nil {
		return nil, err
	}
	if err := checkHeaderValues(prm); err != nil {
		return nil, err
	}
	if prm.ID == "" {
		// 0.3 clients name a task's config by the task (get with no config
		// id); 1.0 servers assign an id.
		prm.ID = agentmarket.NewID("pnc")
		if cl.req.Version == wire.V03 {
			prm.ID = prm.TaskID
		}
	}
	existing, err := p.Push.Store.PushConfigs(ctx, cl.target.ListingID, prm.TaskID)
	if err != nil {
		return nil, err
	}
	if len(existing) >= MaxPushConfigsPerTask && !slices.ContainsFunc(existing, func(c contracts.PushConfig) bool { return c.ConfigID == prm.ID }) {
		return nil, wire.InvalidParams(fmt.Sprintf("task %s has %d push notification configs already, the most a task may have; delete one first", prm.TaskID, MaxPushConfigsPerTask))
	}
	secret := agentmarket.RandomToken(32)
	callbackID := agentmarket.NewID("pcb")
	mine := pushConfig{TaskID: prm.TaskID, ID: prm.ID, URL: strings.TrimRight(p.PublicURL, "/") + CallbackPath + callbackID,
		Token: secret, Authentication: &pushAuth{Scheme: "Bearer", Credentials: secret}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "agentmarket-push-set",
		"method": wire.MethodName(wire.MethodPushSet, wire.V10), "params": mine})
	up, werr := wire.ParseRequest(body, "1.0")
	if werr != nil {
		return nil, werr
	}
	if _, agentErr, err := p.callAgent(ctx, cl, up); err != nil {
		return nil, err
	} else if agentErr != nil {
		return nil, agentErr
	}
	sec := pushSecrets{Token: prm.Token}
	scheme := ""
	if prm.Authentication != nil {
		scheme, sec.Credentials = prm.Authentication.Scheme, prm.Authentication.Credentials
	}
	plain, _ := json.Marshal(sec)
	sealed, err := p.Push.Sealer.Seal(plain, sealContext(cl.target.ListingID, prm.TaskID, prm.ID))
	if err != nil {
		return nil, err
	}
	err = p.Push.Store.SavePushConfig(ctx, contracts.PushConfig{ListingID: cl.target.ListingID, TaskID: prm.TaskID, ConfigID: prm.ID,
		OrgID: cl.actor.OrgID, APIKeyID: cl.actor.KeyID, Version: string(cl.req.Version), URL: prm.URL, Sealed: sealed,
		AuthScheme: scheme, CallbackID: callbackID, SecretHash: secretHash(secret), CreatedAt: p.Clock.Now()})
	if err != nil {
		return nil, err
	}
	return json.Marshal(prm)
}

func (p *Proxy) buyerConfig(c *contracts.PushConfig) (pushConfig, error) {
	out := pushConfig{TaskID: c.TaskID, ID: c.ConfigID, URL: c.URL}
	plain, err := p.Push.Sealer.Open(c.Sealed, sealContext(c.ListingID, c.TaskID, c.ConfigID))
	if err != nil {
		return out, err
	}
	var sec pushSecrets
	_ = json.Unmarshal(plain, &sec)
	out.Token = sec.Token
	if c.AuthScheme != "" {
		out.Authentication = &pushAuth{Scheme: c.AuthScheme, Credentials: sec.Credentials}
	}
	return out, nil
}

func (p *Proxy) pushGet(ctx context.Context, cl *call, prm pushConfig) (json.RawMessage, error) {
	if prm.ID == "" && cl.req.Version == wire.V03 {
		prm.ID = prm.TaskID // 0.3: the task's config
	}
	c, err := p.Push.Store.PushConfig(ctx, cl.target.ListingID, prm.TaskID, prm.ID)
	if err != nil {
		if isNotFound(err) {
			return nil, wire.InvalidParams(fmt.Sprintf("task %s has no push notification config %q", prm.TaskID, prm.ID))
		}
		return nil, err
	}
	out, err := p.buyerConfig(c)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func (p *Proxy) pushList(ctx context.Context, cl *call) (json.RawMessage, error) {
	cs, err := p.Push.Store.PushConfigs(ctx, cl.target.ListingID, cl.req.TaskID())
	if err != nil {
		return nil, err
	}
	out := []pushConfig{}
	for i := range cs {
		bc, err := p.buyerConfig(&cs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, bc)
	}
	return json.Marshal(map[string]any{"configs": out})
}

// pushDelete removes the meter's callback at the agent, then the buyer's
// config (and its undelivered notifications). A config deleted before is
// deleted already: the delete succeeds again (1.0 §3.1.10: it MUST be
// idempotent). A config id the task never had succeeds in 1.0, whose only
// error for the delete is an unknown task (checked before), and is
// TaskNotFound in 0.3, whose delete names no other outcome.
func (p *Proxy) pushDelete(ctx context.Context, cl *call, prm pushConfig) (json.RawMessage, error) {
	_, err := p.Push.Store.PushConfig(ctx, cl.target.ListingID, prm.TaskID, prm.ID)
	switch {
	case err == nil:
		p.removeCallback(ctx, cl, prm)
	case !isNotFound(err):
		return nil, err
	}
	if err := p.Push.Store.DeletePushConfig(ctx, cl.target.ListingID, prm.TaskID, prm.ID); err != nil {
		if !isNotFound(err) {
			return nil, err
		}
		if cl.req.Version == wire.V03 {
			e := wire.TaskNotFound(prm.TaskID)
			e.Message = fmt.Sprintf("task %s has no push notification config %q", prm.TaskID, prm.ID)
			return nil, e
		}
	}
	return json.RawMessage("{}"), nil
}

// removeCallback asks the agent to forget the meter's callback for a
// buyer's config. The buyer's config goes whatever the agent answers:
// without it nothing the agent still sends is delivered.
func (p *Proxy) removeCallback(ctx context.Context, cl *call, prm pushConfig) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "agentmarket-push-delete",
		"method": wire.MethodName(wire.MethodPushDelete, wire.V10), "params": map[string]string{"taskId": prm.TaskID, "id": prm.ID}})
	up, werr := wire.ParseRequest(body, "1.0")
	if werr != nil {
		return
	}
	if _, agentErr, err := p.callAgent(ctx, cl, up); err != nil || agentErr != nil {
		// Not returned: the buyer's delete succeeds all the same. Nothing
		// asks the agent again; a notification it still sends finds no
		// config (404) and is neither metered nor delivered.
		p.Logger.WarnContext(ctx, "agent did not remove the meter's push callback", "trace_id", cl.trace.traceID,
			"task_id", prm.TaskID, "err", err, "agent_error", agentErr)
	}
}

// checkURL accepts a buyer's webhook: an absolute http(s) URL without
// credentials, whose host resolves only to addresses the guard allows;
// plain http only inside the allowed ranges. The guard checks the address
// again at every delivery, when it is dialled.
func (ps *Push) checkURL(ctx context.Context, raw string) error {
	refuse := func(format string, args ...any) error {
		return wire.InvalidParams("push notification url refused: " + fmt.Sprintf(format, args...))
	}
	if raw == "" {
		return wire.InvalidParams("the push notification config needs a url")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return refuse("%q is not an absolute URL", raw)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return refuse("%q: the scheme must be https", raw)
	}
	if u.User != nil {
		return refuse("%q carries credentials in the URL; put them in authentication", raw)
	}
	host := u.Hostname()
	var ips []netip.Addr
	ip, err := netip.ParseAddr(host)
	literal := err == nil
	if literal {
		ips = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ips, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host); err != nil || len(ips) == 0 {
			return refuse("%q is not a reachable public host", host)
		}
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		if err := ps.Guard.Check(ip); err != nil {
			if literal {
				var ae *agentmarket.Error
				if errors.As(err, &ae) {
					return refuse("%s", ae.Message)
				}
			}
			// A name is refused without saying what it resolves to: the
			// answer would map the marketplace's own network.
			return refuse("%q is not a reachable public host", host)
		}
		if u.Scheme == "http" && !ps.allowed(ip) {
			return refuse("%q: the scheme must be https (plain http only for addresses in AGENTMARKET_FETCH_ALLOW_CIDRS)", raw)
		}
	}
	return nil
}

func (ps *Push) allowed(ip netip.Addr) bool {
	for _, p := range ps.Allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
