package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings/agentcard/protoschema"
)

// TestSDKMediaType: A2A 1.0.1 prefers application/a2a+json for requests
// and answers (§11.1). An official-SDK client whose requests carry it gets
// every answer that is not an event stream in it, on both bindings, and
// decodes them all; streams stay text/event-stream. The SDK's own
// application/json keeps application/json answers, and so do 0.3 callers
// (0.3 requires it). Errors follow the same rule, checked as bytes: the
// SDK's HTTP+JSON client reads an error body only when it is labelled
// application/json, and it never sends application/a2a+json itself.
func TestSDKMediaType(t *testing.T) {
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyerKey := signup(t, api, "Globex", "it@globex.example")
	_, endpoint := listAndSubscribe(t, api, seller, buyerKey, startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC).URL)

	for _, sent := range []string{wire.ContentTypeA2A, "application/json"} {
		for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
			t.Run(fmt.Sprintf("%s/%s", sent, binding), func(t *testing.T) {
				buyer := newSDKBuyer(buyerKey)
				buyer.http.Transport = sdkRecordingTransport{base: http.DefaultTransport, log: buyer.wire, contentType: sent}
				ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
				defer cancel()
				cl, _, _, err := buyer.connect(ctx, endpoint, "1.0", binding)
				if err != nil {
					t.Fatal(err)
				}
				mark := buyer.wire.mark()
				res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))})
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				task, ok := res.(*a2a.Task)
				if !ok || task.Status.State != a2a.TaskStateCompleted {
					t.Fatalf("send answered %#v, want a completed task", res)
				}
				if got, err := cl.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.ID != task.ID {
					t.Errorf("get: %v, %v", got, err)
				}
				var events int
				for _, err := range cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("stream"))}) {
					if err != nil {
						t.Fatalf("stream: %v", err)
					}
					events++
				}
				if events == 0 {
					t.Error("the stream carried no event")
				}
				if binding == a2a.TransportProtocolJSONRPC {
					// A JSON-RPC error is a 200 answer the SDK decodes whatever its label.
					if _, err := cl.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
						t.Errorf("get of an unknown task: %v, want TaskNotFound", err)
					}
				}
				for _, x := range buyer.wire.since(mark) {
					want := sent
					if x.RPC == "SendStreamingMessage" || strings.HasSuffix(x.Path, ":stream") {
						want = "text/event-stream"
					}
					if x.RespContentType != want {
						t.Errorf("%s %s %s with Content-Type %s: answered %s, want %s", x.Method, x.Path, x.RPC, x.ContentType, x.RespContentType, want)
					}
				}
				if t.Failed() {
					t.Logf("buyer ⇄ meter:%s", buyer.wire.dump(mark))
				}
			})
		}
	}

	t.Run("errors as bytes", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, version, contentType, key, body string
			status                                              int
			wantType, wantIn                                    string
		}{
			{"1.0 HTTP+JSON unknown task", "POST", "/tasks/no-such-task:cancel", "1.0", wire.ContentTypeA2A, buyerKey, `{}`,
				404, wire.ContentTypeA2A, `"TASK_NOT_FOUND"`},
			{"1.0 HTTP+JSON without a key", "POST", "/message:send", "1.0", wire.ContentTypeA2A + "; charset=utf-8", "", `{}`,
				401, wire.ContentTypeA2A, `"UNAUTHENTICATED"`},
			{"1.0 HTTP+JSON asked as application/json", "POST", "/tasks/no-such-task:cancel", "1.0", "application/json", buyerKey, `{}`,
				404, "application/json", `"TASK_NOT_FOUND"`},
			{"1.0 JSON-RPC without a key", "POST", "", "1.0", wire.ContentTypeA2A, "",
				`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"no-such-task"}}`, 401, wire.ContentTypeA2A, `-32040`},
			{"0.3 JSON-RPC stays application/json", "POST", "", "", wire.ContentTypeA2A, buyerKey,
				`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"no-such-task"}}`, 200, "application/json", `-32001`},
		} {
			req, err := http.NewRequest(tc.method, endpoint+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			if tc.version != "" {
				req.Header.Set("A2A-Version", tc.version)
			}
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status || res.Header.Get("Content-Type") != tc.wantType || !strings.Contains(string(body), tc.wantIn) {
				t.Errorf("%s: %d %s %s; want %d %s with %s", tc.name, res.StatusCode, res.Header.Get("Content-Type"), body, tc.status, tc.wantType, tc.wantIn)
			}
		}
	})
}

// TestSDKProxiedCard: the proxied card of an official-SDK 1.0 agent is one
// both kinds of 1.0 client read. Fetched as A2A 1.0 asks (A2A-Version 1.0,
// as header or query parameter), it passes the A2A 1.0 JSON schema,
// derived from a2a.proto (protoschema): the security requirement's scopes
// are the proto's StringList. Resolved by the official Go SDK (a2a-go
// v2.3.1, which names no version for a card and reads only bare arrays),
// it parses, and the SDK's auth interceptor finds the meter's scheme in
// it and sends the buyer's key: calls through the meter succeed on both
// bindings.
func TestSDKProxiedCard(t *testing.T) {
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyerKey := signup(t, api, "Globex", "it@globex.example")
	schema, err := protoschema.A2A()
	if err != nil {
		t.Fatal(err)
	}
	bindings := []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}
	for _, agentBinding := range bindings {
		_, endpoint := listAndSubscribe(t, api, seller, buyerKey, startSDKAgent(t, "1.0", agentBinding).URL)
		t.Run("agent="+string(agentBinding), func(t *testing.T) {
			cardURL := endpoint + "/.well-known/agent-card.json"
			for _, ask := range []struct{ query, header string }{{"", "1.0"}, {"?A2A-Version=1.0", ""}} {
				req, _ := http.NewRequest("GET", cardURL+ask.query, nil)
				if ask.header != "" {
					req.Header.Set("A2A-Version", ask.header)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Vary"), "A2A-Version") {
					t.Errorf("GET %s (A2A-Version header %q): %d, Vary %q", req.URL, ask.header, res.StatusCode, res.Header.Get("Vary"))
				}
				if err := schema.Check("AgentCard", body); err != nil {
					t.Errorf("the proxied card asked for as A2A 1.0 (%s%s) fails the A2A 1.0 JSON schema:\n%v\n%s", ask.header, ask.query, err, body)
				}
			}

			buyer := newSDKBuyer(buyerKey)
			for _, clientBinding := range bindings {
				ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
				cl, card, cardErr, err := buyer.connect(ctx, endpoint, "1.0", clientBinding)
				if cardErr != nil {
					t.Errorf("the official SDK cannot parse the proxied card: %v", cardErr)
				}
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				if len(card.SecurityRequirements) != 1 || card.SecurityRequirements[0][a2aproxy.SecuritySchemeName] == nil {
					t.Errorf("the SDK reads the security requirements %v, want the meter's %q", card.SecurityRequirements, a2aproxy.SecuritySchemeName)
				}
				res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))})
				if err != nil {
					t.Errorf("client=%s: send through the meter with the key the card asks for: %v", clientBinding, err)
				} else if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
					t.Errorf("client=%s: send answered %#v", clientBinding, res)
				}
				cancel()
			}
		})
	}
}

// listAndSubscribe lists the agent whose card is at cardURL for the seller
// and subscribes the buyer to it.
func listAndSubscribe(t *testing.T, api client, sellerKey, buyerKey, cardURL string) (listing, endpoint string) {
	t.Helper()
	r := api.with(sellerKey).do("POST", "/api/v1/listings", map[string]any{"card_url": cardURL, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list %s: %d %s", cardURL, r.Status, r.Body)
	}
	listing = r.str("id")
	r = api.with(buyerKey).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
	if r.Status != 201 {
		t.Fatalf("subscribe to %s: %d %s", listing, r.Status, r.Body)
	}
	return listing, r.str("endpoint")
}
