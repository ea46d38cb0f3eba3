package a2aproxy

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

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
		// task sweeper registers it later (writeLater); until then the
		// webhook gets nothing of the task.
		cfg, timeout := *c, cl.lim.RequestTimeout
		p.later.add("inline push config", ownerKey{}, maxLaterAttempts, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			_, err := p.pushSet(ctx, cl, cfg)
			return err
		})
		p.Logger.ErrorContext(ctx, "inline push config not registered; the task sweeper retries", "trace_id", cl.trace.traceID, "task_id", c.TaskID, "err", err)
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
