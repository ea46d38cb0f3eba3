package a2aproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
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

	client *http.Client
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

func (ps *Push) kick() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// DeliverySigner signs a delivery attempt (pushsign.Keys): a JWS with a
// detached payload over d.Body, naming the delivery, task, listing and
// config, signed now.
type DeliverySigner interface {
	SignDelivery(ctx context.Context, d contracts.Delivery) (string, error)
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

// notification is a push notification as an agent posted it to the
// meter's callback.
type notification struct {
	callbackID  string
	token       string // the secret the agent sent with it
	traceparent string
	body        []byte // Fiber's buffer: copied before it is kept
}

// notification takes a notification from an agent: the callback must be
// known and the secret right; the notification is metered, stored for
// delivery, then acknowledged (200). Any other status is a refusal with
// its reason, for the agent.
func (p *Proxy) notification(ctx context.Context, n notification) (status int, reason string) {
	cfg, err := p.Push.Store.PushCallback(ctx, n.callbackID)
	if err != nil {
		if isNotFound(err) {
			return http.StatusNotFound, "no such callback"
		}
		// The agent is told to try again: its retry is how the
		// notification is not lost.
		p.Logger.ErrorContext(ctx, "push callback lookup failed", "err", err)
		return http.StatusServiceUnavailable, "try again"
	}
	if subtle.ConstantTimeCompare([]byte(secretHash(n.token)), []byte(cfg.SecretHash)) != 1 {
		p.Metrics.pushReceived(cfg.ListingID, "refused")
		p.Logger.WarnContext(ctx, "push notification with a wrong token refused", "listing", cfg.ListingID, "task_id", cfg.TaskID)
		return http.StatusUnauthorized, "wrong notification token"
	}
	body := bytes.Clone(n.body)
	if len(body) > p.Limits.MaxResultBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("a notification may be %d bytes at most", p.Limits.MaxResultBytes)
	}
	agentV := notificationVersion(body)
	ob := wire.Observe(agentV, wire.MethodStream, body)
	if ob.TaskID != cfg.TaskID {
		p.Metrics.pushReceived(cfg.ListingID, "refused")
		return http.StatusBadRequest, "the notification must be a task, message or event of this callback's task"
	}
	out := json.RawMessage(body)
	if v := wire.Version(cfg.Version); v != agentV {
		if out, err = wire.TranslateResult(agentV, v, wire.MethodStream, body); err != nil {
			return http.StatusBadRequest, "the notification is not an A2A task, message or event: " + err.Error()
		}
	}
	if err := p.meterNotification(ctx, n.traceparent, cfg, ob, len(body), len(out)); err != nil {
		p.Logger.ErrorContext(ctx, "push notification not metered", "task_id", cfg.TaskID, "err", err)
		return http.StatusServiceUnavailable, "try again" // the agent's retry brings it again
	}
	sum := sha256.Sum256(append([]byte(cfg.CallbackID+"\x00"), body...))
	d := contracts.Delivery{ID: "dlv_" + hex.EncodeToString(sum[:16]), ListingID: cfg.ListingID, TaskID: cfg.TaskID, ConfigID: cfg.ConfigID,
		OrgID: cfg.OrgID, Body: out, Status: contracts.DeliveryPending, NextAttemptAt: p.Clock.Now(), CreatedAt: p.Clock.Now()}
	if _, err := p.Push.Store.Enqueue(ctx, d); err != nil {
		// Metered already: the agent's retry meters it a second time (one
		// more usage row).
		p.Logger.ErrorContext(ctx, "push notification not stored", "task_id", cfg.TaskID, "err", err)
		return http.StatusServiceUnavailable, "try again" // the agent's retry brings it again
	}
	p.Metrics.pushReceived(cfg.ListingID, "accepted")
	p.Push.kick()
	return http.StatusOK, ""
}

// notificationVersion tells a 1.0 notification (a StreamResponse: one
// member naming the type) from a 0.3 one (a Task or event with kind).
func notificationVersion(body []byte) wire.Version {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		if _, ok := top["kind"]; ok {
			return wire.V03
		}
		for _, k := range []string{"task", "message", "statusUpdate", "artifactUpdate"} {
			if _, ok := top[k]; ok {
				return wire.V10
			}
		}
	}
	return wire.V03
}

// meterNotification records the usage a notification reports, as a call
// of the key that set the config.
func (p *Proxy) meterNotification(ctx context.Context, traceparent string, cfg *contracts.PushConfig, ob wire.Observation, in, out int) error {
	b, err := p.owners.Known(ctx, cfg.ListingID, cfg.TaskID)
	if err != nil {
		return err
	}
	body, err := wire.TaskRequest(wire.V10, wire.MethodGetTask, cfg.TaskID, nil)
	if err != nil {
		return err
	}
	cl, err := p.backgroundCall(ctx, *b, parseTraceparent(traceparent), body)
	if err != nil {
		return err
	}
	cl.actor.KeyID, cl.label, cl.bytesIn, cl.bytesOut = cfg.APIKeyID, "push", in, out
	cl.obs.add(ob)
	p.noteProgress(cl, ob)
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	return nil
}

// pushWorkers bounds the deliveries one meter has in flight.
const pushWorkers = 32

// RunPushDelivery delivers the outbox until ctx ends: due deliveries are
// claimed (one per config at a time, so each webhook gets its task's
// updates in order) as workers free up, sent, and retried with
// exponential backoff and full jitter, up to MaxAttempts. A slow webhook
// holds one worker, not the others.
func (p *Proxy) RunPushDelivery(ctx context.Context) {
	if p.Push == nil {
		return
	}
	p.Push.init()
	slots := make(chan struct{}, pushWorkers)
	var wg sync.WaitGroup
	defer wg.Wait()
	var pruned time.Time
	for {
		if now := p.Clock.Now(); now.Sub(pruned) >= time.Hour {
			pruned = now
			if n, err := p.Push.Store.PruneDeliveries(ctx, now.Add(-p.Push.Retention)); err != nil && ctx.Err() == nil {
				// The next prune, an hour on, takes them: settled deliveries
				// only take room meanwhile.
				p.Logger.WarnContext(ctx, "old push deliveries not pruned", "err", err)
			} else if n > 0 {
				p.Logger.InfoContext(ctx, "old push deliveries pruned", "deliveries", n)
			}
		}
		free := pushWorkers - len(slots)
		claimed := 0
		if free > 0 {
			now := p.Clock.Now()
			ds, err := p.Push.Store.ClaimDeliveries(ctx, now, now.Add(p.Push.Timeout+30*time.Second), free)
			if err != nil && ctx.Err() == nil {
				// Nothing was leased: the loop reads the outbox again after
				// Poll (or a kick).
				p.Logger.ErrorContext(ctx, "push outbox not read", "err", err)
			}
			for _, d := range ds {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() {
						<-slots
						wg.Done()
						p.Push.kick() // a slot is free, and the config's next may be due
					}()
					p.deliver(ctx, d)
				}()
			}
			claimed = len(ds)
		}
		if claimed > 0 && claimed == free {
			continue // there may be more due
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Push.wake:
		case <-time.After(p.Push.Poll):
		}
	}
}

func (p *Proxy) deliver(ctx context.Context, d contracts.Delivery) {
	attempts := d.Attempts + 1
	record := func(status contracts.DeliveryStatus, next time.Time, httpStatus int, msg string) {
		// Recorded even when the meter is stopping: a delivery that went
		// out must not go out again, and one that did not must not stay
		// leased to a meter that is gone (its lease would hold it back).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.Push.Store.DeliveryAttempted(wctx, d.ID, status, attempts, next, httpStatus, msg, p.Clock.Now()); err != nil {
			// The delivery stays pending and leased: when its lease ends
			// (ClaimDeliveries) it is tried again, under the same delivery
			// id, so a webhook that took it gets it twice and may drop the
			// repeat by X-AgentMarket-Delivery-Id.
			p.Logger.ErrorContext(ctx, "push delivery not recorded", "delivery_id", d.ID, "err", err)
		}
		level, outcome := p.Logger.InfoContext, string(status)
		if status != contracts.DeliveryDelivered {
			level = p.Logger.WarnContext
		}
		if status == contracts.DeliveryPending {
			outcome = "retry"
		}
		p.Metrics.pushAttempt(outcome)
		level(ctx, "push delivery", "delivery_id", d.ID, "task_id", d.TaskID, "status", status, "attempt", attempts, "http_status", httpStatus, "error", msg)
	}
	cfg, err := p.Push.Store.PushConfig(ctx, d.ListingID, d.TaskID, d.ConfigID)
	if err != nil {
		if isNotFound(err) {
			record(contracts.DeliveryFailed, time.Time{}, 0, "the push notification config was deleted")
		}
		return
	}
	bc, err := p.buyerConfig(cfg)
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the config's secrets cannot be opened")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		record(contracts.DeliveryFailed, time.Time{}, 0, "the webhook url is not valid")
		return
	}
	contentType := "application/json"
	if cfg.Version == string(wire.V10) {
		contentType = wire.ContentTypeA2A
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	req.Header.Set("X-AgentMarket-Delivery-Id", d.ID)
	req.Header.Set("X-AgentMarket-Delivery-Attempt", strconv.Itoa(attempts))
	if bc.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", bc.Token)
		req.Header.Set("A2A-Notification-Token", bc.Token)
	}
	if a := bc.Authentication; a != nil && a.Scheme != "" {
		req.Header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	if p.Push.Signer != nil {
		// Each attempt is signed anew (a fresh iat), over the bytes sent:
		// the body in the buyer's version, as stored.
		sig, err := p.Push.Signer.SignDelivery(ctx, d)
		if err != nil && ctx.Err() != nil {
			attempts = d.Attempts
			record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
			return
		}
		if err != nil {
			// Never sent unsigned: a buyer may refuse what is not signed.
			p.retry(d, attempts, 0, "not signed: "+err.Error(), record)
			return
		}
		req.Header.Set(SignatureHeader, sig)
	}
	res, err := p.Push.client.Do(req)
	if err != nil && ctx.Err() != nil {
		// The meter stopped during the attempt: it does not count, and the
		// delivery is due again at once, for whichever meter runs next.
		attempts = d.Attempts
		record(contracts.DeliveryPending, p.Clock.Now(), 0, "interrupted: the meter stopped during the attempt")
		return
	}
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
			record(contracts.DeliveryFailed, time.Time{}, 0, "refused: "+ae.Message) // the guard: no retry helps
			return
		}
		// The URL may carry a secret (chat webhooks do): keep it out of
		// the recorded error and the logs.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		p.retry(d, attempts, 0, err.Error(), record)
		return
	}
	res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		record(contracts.DeliveryDelivered, time.Time{}, res.StatusCode, "")
		return
	}
	p.retry(d, attempts, res.StatusCode, "the webhook answered "+res.Status, record)
}

func (p *Proxy) retry(d contracts.Delivery, attempts, status int, msg string, record func(contracts.DeliveryStatus, time.Time, int, string)) {
	if attempts >= p.Push.MaxAttempts {
		record(contracts.DeliveryFailed, time.Time{}, status, fmt.Sprintf("%s (gave up after %d attempts)", msg, attempts))
		return
	}
	record(contracts.DeliveryPending, p.Clock.Now().Add(p.Push.backoff(attempts)), status, msg)
}

// backoff is the delay before attempt n+1: RetryBase·2^(n-1), at most
// RetryMax, with full jitter over its upper half (so retries of many
// deliveries spread out, and none comes sooner than half the delay).
func (ps *Push) backoff(n int) time.Duration {
	d := ps.RetryBase << min(n-1, 30)
	if d <= 0 || d > ps.RetryMax {
		d = ps.RetryMax
	}
	return d/2 + rand.N(d/2+1)
}

// takeInlinePush takes the push config a send carries off the request the
// agent gets (it would reach the buyer's webhook directly, unmetered and
// unchecked): the webhook is checked now, and the meter registers its own
// callback for it once the agent names the task (registerInlinePush).
func (p *Proxy) takeInlinePush(ctx context.Context, cl *call, body []byte, raw json.RawMessage) error {
	if !p.pushSupported(cl) {
		return wire.PushNotificationNotSupported("this agent does not offer push notifications through the AgentMarket meter")
	}
	var in struct {
		ID             string `json:"id"`
		URL            string `json:"url"`
		Token          string `json:"token"`
		Authentication *struct {
			Scheme      string   `json:"scheme"`
			Schemes     []string `json:"schemes"` // 0.3
			Credentials string   `json:"credentials"`
		} `json:"authentication"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return wire.InvalidParams("params.configuration push notification config: " + err.Error())
	}
	if err := p.Push.checkURL(ctx, in.URL); err != nil {
		return err
	}
	c := &pushConfig{ID: in.ID, URL: in.URL, Token: in.Token}
	if a := in.Authentication; a != nil {
		scheme := a.Scheme
		if scheme == "" && len(a.Schemes) > 0 {
			scheme = a.Schemes[0]
		}
		c.Authentication = &pushAuth{Scheme: scheme, Credentials: a.Credentials}
	}
	if err := checkHeaderValues(*c); err != nil {
		return err
	}
	header := ""
	if cl.req.Version == wire.V10 {
		header = "1.0"
	}
	r, werr := wire.ParseRequest(body, header)
	if werr != nil {
		return werr
	}
	r.Binding, r.Tenant = cl.req.Binding, cl.req.Tenant
	cl.req, cl.inlinePush = r, c
	return nil
}

// registerInlinePush registers the meter's callback for a send's inline
// push config once the task is known (and still running).
func (p *Proxy) registerInlinePush(cl *call) {
	c := cl.inlinePush
	cl.inlinePush = nil
	if c == nil || cl.obs.terminal {
		return
	}
	c.TaskID = cl.obs.taskID
	ctx, cancel := context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	defer cancel()
	if _, err := p.pushSet(ctx, cl, *c); err != nil {
		// Not returned: the agent has the task, and withholding the answer
		// that names it would leave the buyer a task it cannot reach. The
		// buyer is not told either: its webhook gets nothing of the task
		// unless it sets the config again with the push-config method.
		p.Logger.ErrorContext(ctx, "inline push config not registered", "trace_id", cl.trace.traceID, "task_id", c.TaskID, "err", err)
	}
}

// checkHeaderValues refuses a token or credentials that could not be sent
// as header values (every delivery would fail).
func checkHeaderValues(c pushConfig) error {
	bad := func(v string) bool { return strings.ContainsAny(v, "\r\n\x00") }
	if bad(c.Token) {
		return wire.InvalidParams("the push notification token must not contain line breaks")
	}
	if a := c.Authentication; a != nil && (bad(a.Scheme) || bad(a.Credentials) || strings.ContainsAny(a.Scheme, " \t")) {
		return wire.InvalidParams("the push notification authentication must be a scheme name and credentials without line breaks")
	}
	return nil
}
