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

// TestLostTasksSDK: an official-SDK agent with an in-memory task store is
// restarted and forgets the tasks it was working on. A buyer asking the
// meter about one of them (GetTask, CancelTask, SubscribeToTask) gets the
// agent's TaskNotFound unchanged; the task's record shows it lost (a lost
// event, ended) and the seller's listing counts its lost tasks (the API
// and the listing's page). A2A 1.0
// and 0.3, JSON-RPC and HTTP+JSON, on both storage set-ups.
func TestLostTasksSDK(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		m := startMarketplace(t, e.env)
		api := client{t: t, base: m.URL}
		_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
		_, buyerKey := signup(t, api, "Globex", "it@globex.example")
		buyer := newSDKBuyer(buyerKey)
		lm := &longMarket{api: api, buyer: buyerKey}
		for _, version := range []string{"1.0", "0.3"} {
			for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
				t.Run(fmt.Sprintf("%s %s", version, binding), func(t *testing.T) {
					ag := startSDKAgent(t, version, binding)
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
					asks := []string{"get", "cancel", "subscribe"}
					tasks := map[string]a2a.TaskID{}
					for _, ask := range asks {
						res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{
							Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please wait until canceled ("+ask+")")),
							Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
						})
						task, ok := res.(*a2a.Task)
						if err != nil || !ok || task.Status.State.Terminal() {
							t.Fatalf("send: %v %+v, want a running task", err, res)
						}
						tasks[ask] = task.ID
					}
					ag.Restart()

					for _, ask := range asks {
						id := tasks[ask]
						var err error
						switch ask {
						case "get":
							_, err = cl.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
						case "cancel":
							_, err = cl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
						case "subscribe":
							for _, serr := range cl.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
								if serr != nil {
									err = serr
									break
								}
							}
						}
						if !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Errorf("%s of a task the restarted agent forgot: %v, want the agent's a2a.ErrTaskNotFound", ask, err)
						}
						rec := lm.endedRecord(t, buyerKey, listing, string(id))
						kinds, evs := events(rec)
						if len(evs) == 0 || evs[len(evs)-1]["kind"] != "lost" || !strings.Contains(fmt.Sprint(evs[len(evs)-1]["reason"]), "TaskNotFound") {
							t.Errorf("%s: task record events %v %v, want the last one lost, saying the agent answered TaskNotFound", ask, kinds, evs)
						}
					}
					var got response
					waitFor(t, "the listing to count its lost tasks", 5*time.Second, func() bool {
						got = api.with(seller).do("GET", "/api/v1/listings/"+listing, nil)
						return get(got.JSON, "lost_tasks", "count") == float64(len(asks))
					})
					if got.str("health") != "healthy" || get(got.JSON, "lost_tasks", "last_at") == nil {
						t.Errorf("listing after %d lost tasks: %s", len(asks), got.Body)
					}
					// The listing's page says so under Health.
					page := api.do("GET", "/listings/"+listing, nil)
					if want := fmt.Sprintf(`data-lost-tasks="%d">The agent lost %d tasks`, len(asks), len(asks)); page.Status != 200 || !strings.Contains(string(page.Body), want) {
						t.Errorf("listing page: %d, want it to say %q", page.Status, want)
					}
				})
			}
		}
	})
}
