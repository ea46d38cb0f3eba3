package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestStalledTasksSDK: a task of an official-SDK agent that works without
// a sign of progress for longer than stall_after (the meter's setting, 1s
// here) is marked stalled: its record shows it (stalled_since, a stalled
// event by the meter), the buyer's webhook gets a status update whose
// metadata names the stall, and agentmarket_meter_tasks_stalled_total
// counts it. Progress after that (the agent's artifact, seen by the
// buyer's GetTask through the meter) clears it with a progressed event.
// A2A 1.0 and 0.3, JSON-RPC and HTTP+JSON, on both storage set-ups.
func TestStalledTasksSDK(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		env := map[string]string{"AGENTMARKET_METER_STALL_AFTER": "1s", "AGENTMARKET_METER_TASK_SWEEP": "100ms"}
		for k, v := range e.env {
			env[k] = v
		}
		m := startMarketplace(t, env)
		api := client{t: t, base: m.URL}
		_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
		_, buyerKey := signup(t, api, "Globex", "it@globex.example")
		buyer := newSDKBuyer(buyerKey)
		hook := startWebhook(t)
		lm := &longMarket{api: api, buyer: buyerKey}
		for _, version := range []string{"1.0", "0.3"} {
			for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
				name := fmt.Sprintf("%s %s", version, binding)
				t.Run(name, func(t *testing.T) {
					ag := startSDKAgent(t, version, binding, sdkWithPush)
					listing, endpoint := listAndSubscribe(t, api, seller, buyerKey, ag.URL)
					ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
					defer cancel()
					start, agentStart := buyer.wire.mark(), ag.Wire.mark()
					defer func() {
						if t.Failed() {
							t.Logf("buyer ⇄ meter:%s", buyer.wire.dump(start))
							t.Logf("meter ⇄ agent:%s", ag.Wire.dump(agentStart))
						}
					}()
					cl, _, _, err := buyer.connect(ctx, endpoint, version, binding)
					if err != nil {
						t.Fatal(err)
					}
					res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{
						Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please hold")),
						Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
					})
					task, ok := res.(*a2a.Task)
					if err != nil || !ok || task.Status.State.Terminal() {
						t.Fatalf("send: %v %+v, want a running task", err, res)
					}
					defer func() { _, _ = cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}) }()
					path := "/stall/" + strings.NewReplacer("/", "-", "+", "-").Replace(name)
					if _, err := cl.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "hook-1", URL: hook.URL + path, Token: "tok-1"}); err != nil {
						t.Fatalf("create push config: %v", err)
					}

					// No progress for longer than 1s: stalled.
					var rec response
					waitFor(t, "the task to be marked stalled", 15*time.Second, func() bool {
						rec = lm.taskRecord(t, buyerKey, listing, string(task.ID))
						return rec.JSON["stalled_since"] != nil
					})
					kinds, evs := events(rec)
					if len(evs) == 0 || kinds[len(kinds)-1] != "stalled:meter" || !strings.Contains(fmt.Sprint(evs[len(evs)-1]["reason"]), "no progress") ||
						rec.JSON["ended_at"] != nil {
						t.Errorf("stalled task record: events %v %v, ended_at %v", kinds, evs, rec.JSON["ended_at"])
					}
					var note hookCall
					waitFor(t, "the stall at the buyer's webhook", 10*time.Second, func() bool {
						for _, h := range hook.received(path) {
							if strings.Contains(string(h.Raw), "agentmarket/stalled") && strings.Contains(string(h.Raw), string(task.ID)) {
								note = h
								return true
							}
						}
						return false
					})
					// A status update in the buyer's version: the last state the
					// meter saw (the send's answer said submitted; the agent's
					// working may have come by push), the stall in its metadata.
					update, _ := get(note.Body, "statusUpdate").(map[string]any)
					states := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
					if version == "0.3" {
						update, states = note.Body, []string{"submitted", "working"}
					}
					if !slices.Contains(states, fmt.Sprint(get(update, "status", "state"))) || get(update, "metadata", "agentmarket/stalled", "stallAfterMs") != float64(1000) ||
						get(update, "metadata", "agentmarket/stalled", "lastProgressAt") == nil || note.Token != "tok-1" && note.Token03 != "tok-1" {
						t.Errorf("stall notification: %s (token %q/%q)", note.Raw, note.Token, note.Token03)
					}
					fams, err := scrape(http.DefaultClient, m.URL)
					if err != nil {
						t.Fatal(err)
					}
					stalled := 0.0
					for _, mt := range fams["agentmarket_meter_tasks_stalled_total"].GetMetric() {
						for _, l := range mt.GetLabel() {
							if l.GetName() == "listing" && l.GetValue() == listing {
								stalled = mt.GetCounter().GetValue()
							}
						}
					}
					if stalled != 1 {
						t.Errorf("agentmarket_meter_tasks_stalled_total{listing=%q} = %v, want 1", listing, stalled)
					}

					// The agent goes on: an artifact, seen through the meter,
					// clears the stall.
					ag.Exec.Release(task.ID)
					waitFor(t, "the stall to be cleared by progress", 15*time.Second, func() bool {
						if got, err := cl.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || len(got.Artifacts) == 0 {
							return false
						}
						rec = lm.taskRecord(t, buyerKey, listing, string(task.ID))
						return rec.JSON["stalled_since"] == nil
					})
					kinds, _ = events(rec)
					if len(kinds) < 2 || kinds[len(kinds)-2] != "stalled:meter" || kinds[len(kinds)-1] != "progressed:meter" {
						t.Errorf("task record after progress: events %v, want stalled then progressed", kinds)
					}
				})
			}
		}
	})
}
