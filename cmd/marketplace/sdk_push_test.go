package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestSDKPush: the official SDK's client sets, reads, lists and deletes a
// push config through the meter, in every pairing of client binding,
// agent binding and version (the 0.3 HTTP+JSON dialect included), and an
// official SDK agent's notification reaches the buyer's webhook through
// the meter, with the buyer's authentication.
func TestSDKPush(t *testing.T) {
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	buyerOrg, buyerKey := signup(t, api, "Globex", "it@globex.example")
	buyer := newSDKBuyer(buyerKey)
	hook := startWebhook(t)
	bindings := []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}
	for _, version := range []string{"1.0", "0.3"} {
		for _, agentBinding := range bindings {
			ag := startSDKAgent(t, version, agentBinding, sdkWithPush)
			r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": ag.URL, "pricing": pricing})
			if r.Status != 201 {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			listing := r.str("id")
			r = api.with(buyerKey).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
			if r.Status != 201 {
				t.Fatalf("subscribe: %d %s", r.Status, r.Body)
			}
			endpoint := r.str("endpoint")
			for _, clientBinding := range bindings {
				c := &sdkCombo{version: version, agent: agentBinding, client: clientBinding, ag: ag, listing: listing, endpoint: endpoint}
				t.Run(c.name(), func(t *testing.T) {
					runSDKPush(t, c, buyer, hook)
					// Signed over the bytes sent, in either version.
					path := "/sdk/" + strings.NewReplacer("/", "-", "=", "-").Replace(c.name())
					verifyDeliveries(t, m.URL, buyerOrg, hook.URL, hook.received(path), listing, "", "hook-1")
				})
			}
		}
	}
}

func runSDKPush(t *testing.T, c *sdkCombo, buyer *sdkBuyer, hook *webhook) {
	ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
	defer cancel()
	start, agentStart := buyer.wire.mark(), c.ag.Wire.mark()
	defer func() {
		if t.Failed() {
			t.Logf("buyer ⇄ meter:%s", buyer.wire.dump(start))
			t.Logf("meter ⇄ agent:%s", c.ag.Wire.dump(agentStart))
		}
	}()
	cl, card, _, err := buyer.connect(ctx, c.endpoint, c.version, c.client)
	if err != nil {
		t.Fatal(err)
	}
	if !card.Capabilities.PushNotifications {
		t.Errorf("the proxied card of a push agent says pushNotifications: false")
	}
	res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please wait until canceled")),
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T", res)
	}
	path := "/sdk/" + strings.NewReplacer("/", "-", "=", "-").Replace(c.name())
	cfg, err := cl.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "hook-1", URL: hook.URL + path, Token: "tok-1",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-1"}})
	if err != nil {
		t.Fatalf("create push config: %v", err)
	}
	if cfg.URL != hook.URL+path || cfg.ID != "hook-1" || cfg.TaskID != task.ID {
		t.Errorf("create push config answered %+v", cfg)
	}
	got, err := cl.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook-1"})
	if err != nil || got.URL != hook.URL+path {
		t.Errorf("get push config: %+v, %v", got, err)
	}
	list, err := cl.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].URL != hook.URL+path {
		t.Errorf("list push configs: %v, %v", list, err)
	}
	for _, x := range c.ag.Wire.since(agentStart) {
		if strings.Contains(x.ReqBody, hook.URL) {
			t.Errorf("the agent was given the buyer's webhook: %s", x)
		}
	}

	// The cancel's status update reaches the webhook through the meter.
	if _, err := cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitFor(t, "the cancel's notification at the webhook", 10*time.Second, func() bool {
		for _, h := range hook.received(path) {
			if strings.Contains(fmt.Sprint(h.Body), "CANCELED") || strings.Contains(fmt.Sprint(h.Body), "canceled") {
				return true
			}
		}
		return false
	})
	for _, h := range hook.received(path) {
		if h.Auth != "Bearer cred-1" || (h.Token != "tok-1" && h.Token03 != "tok-1") {
			t.Errorf("delivery with Authorization %q, token %q/%q", h.Auth, h.Token, h.Token03)
		}
	}

	if err := cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "hook-1"}); err != nil {
		t.Errorf("delete push config: %v", err)
	}
	if list, err := cl.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 0 {
		t.Errorf("list after delete: %v, %v", list, err)
	}
	// A delete is idempotent (1.0 §3.1.10 MUST): the same delete again
	// succeeds, as it does at the agent itself. 0.3 says nothing of a
	// repeat, and a config that existed is treated alike.
	if err := cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "hook-1"}); err != nil {
		t.Errorf("delete push config a second time: %v", err)
	}
	// A config the task never had: 1.0 names only an unknown task as the
	// delete's error; 0.3 clients get TaskNotFound.
	err = cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "never-set"})
	switch {
	case c.version == "1.0" && err != nil:
		t.Errorf("1.0 delete of a config the task never had: %v, want success", err)
	case c.version == "0.3" && !errors.Is(err, a2a.ErrTaskNotFound):
		t.Errorf("0.3 delete of a config the task never had: %v, want TaskNotFound", err)
	}
}
