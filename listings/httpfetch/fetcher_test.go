package httpfetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

const card = `{"name":"echo","url":"https://echo.example/a2a"}`

// sized returns a JSON object of exactly n bytes.
func sized(n int) []byte {
	return []byte("{" + strings.Repeat(" ", n-2) + "}")
}

// agentServer serves a card at the given paths and handles a few paths
// that misbehave on purpose.
func agentServer(t *testing.T, cardPaths ...string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case slices.Contains(cardPaths, p):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(card))
		case p == "/plain":
			// Cards are often served with a generic content type.
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("\r\n\t  " + card))
		case p == "/html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<!doctype html><title>Sign in</title>"))
		case p == "/empty":
			w.WriteHeader(http.StatusOK)
		case p == "/array":
			w.Write([]byte(`[{"name":"echo"}]`))
		case p == "/broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		case p == "/exact":
			w.Write(sized(httpfetch.DefaultMaxBytes))
		case p == "/over-chunked":
			// Written in pieces with no Content-Length: the size is only
			// known by reading.
			body := sized(httpfetch.DefaultMaxBytes + 1)
			for len(body) > 0 {
				n := min(len(body), 4096)
				w.Write(body[:n])
				body = body[n:]
			}
		case p == "/over-declared":
			w.Header().Set("Content-Length", strconv.Itoa(httpfetch.DefaultMaxBytes+1))
			w.Write(sized(httpfetch.DefaultMaxBytes + 1))
		case p == "/endless":
			// Never ends: the fetcher must stop reading at the cap, not
			// run into its timeout.
			w.Write([]byte("{"))
			chunk := bytes.Repeat([]byte(" "), 4096)
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case p == "/moved":
			http.Redirect(w, r, "/final/card.json", http.StatusMovedPermanently)
		case p == "/final/card.json":
			w.Write([]byte(card))
		case strings.HasPrefix(p, "/hops/"):
			// /hops/N redirects N times, then serves the card.
			n, _ := strconv.Atoi(strings.TrimPrefix(p, "/hops/"))
			if n == 0 {
				w.Write([]byte(card))
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hops/%d", n-1), http.StatusFound)
		case p == "/loop/a":
			http.Redirect(w, r, "/loop/b", http.StatusFound)
		case p == "/loop/b":
			http.Redirect(w, r, "/loop/a", http.StatusTemporaryRedirect)
		case p == "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
}

func TestFetchCard(t *testing.T) {
	tests := []struct {
		name         string
		cardPaths    []string // where the server serves the card
		path         string   // appended to the server's URL
		maxRedirects int
		wantPath     string // path of FetchedCard.URL
		wantBody     []byte
		wantHits     []string // requests the server saw, when it matters
		wantCode     string
		wantMsg      []string
	}{
		{name: "base URL uses the well-known path", cardPaths: []string{"/.well-known/agent-card.json"}, path: "",
			wantPath: "/.well-known/agent-card.json", wantBody: []byte(card), wantHits: []string{"/.well-known/agent-card.json"}},
		{name: "base URL with slash", cardPaths: []string{"/.well-known/agent-card.json"}, path: "/",
			wantPath: "/.well-known/agent-card.json", wantBody: []byte(card)},
		{name: "fallback to agent.json", cardPaths: []string{"/.well-known/agent.json"}, path: "",
			wantPath: "/.well-known/agent.json", wantBody: []byte(card),
			wantHits: []string{"/.well-known/agent-card.json", "/.well-known/agent.json"}},
		{name: "no card at either well-known path", path: "",
			wantCode: "card_fetch_status", wantMsg: []string{"/.well-known/agent.json", "404 Not Found"}},
		{name: "full URL is fetched as given", cardPaths: []string{"/cards/echo.json"}, path: "/cards/echo.json",
			wantPath: "/cards/echo.json", wantBody: []byte(card), wantHits: []string{"/cards/echo.json"}},
		{name: "full URL is not rewritten on 404", cardPaths: []string{"/.well-known/agent-card.json"}, path: "/cards/missing.json",
			wantCode: "card_fetch_status", wantMsg: []string{"404"}, wantHits: []string{"/cards/missing.json"}},
		{name: "any content type, leading whitespace", path: "/plain", wantPath: "/plain", wantBody: []byte("\r\n\t  " + card)},
		{name: "html refused", path: "/html", wantCode: "card_not_json", wantMsg: []string{"content type text/html"}},
		{name: "empty body refused", path: "/empty", wantCode: "card_not_json"},
		{name: "JSON array refused", path: "/array", wantCode: "card_not_json"},
		{name: "server error refused", path: "/broken", wantCode: "card_fetch_status", wantMsg: []string{"500 Internal Server Error"}},
		{name: "exactly 64 KiB", path: "/exact", wantPath: "/exact", wantBody: sized(65536)},
		{name: "64 KiB + 1, chunked", path: "/over-chunked", wantCode: "card_too_large", wantMsg: []string{"65536 bytes"}},
		{name: "64 KiB + 1, declared", path: "/over-declared", wantCode: "card_too_large"},
		{name: "endless body", path: "/endless", wantCode: "card_too_large"},
		{name: "redirect followed", path: "/moved", wantPath: "/final/card.json", wantBody: []byte(card)},
		{name: "exactly MaxRedirects", path: "/hops/3", maxRedirects: 3, wantPath: "/hops/0", wantBody: []byte(card)},
		{name: "default MaxRedirects is 5", path: "/hops/5", wantPath: "/hops/0", wantBody: []byte(card)},
		{name: "too many redirects", path: "/hops/4", maxRedirects: 3,
			wantCode: "card_fetch_redirects", wantMsg: []string{"after 3 redirects", "at most 3"},
			wantHits: []string{"/hops/4", "/hops/3", "/hops/2", "/hops/1"}},
		{name: "more than the default 5", path: "/hops/6", wantCode: "card_fetch_redirects", wantMsg: []string{"after 5 redirects"}},
		{name: "negative MaxRedirects follows none", path: "/moved", maxRedirects: -1, wantCode: "card_fetch_redirects"},
		{name: "redirect loop", path: "/loop/a", wantCode: "card_fetch_redirects", wantMsg: []string{"redirect loop", "/loop/a"},
			wantHits: []string{"/loop/a", "/loop/b"}},
		{name: "redirect to a non-HTTP scheme", path: "/to-file", wantCode: "card_url_invalid", wantMsg: []string{"file:///etc/passwd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := agentServer(t, tt.cardPaths...)
			clock := agentmarket.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			// The default transport: dials through the guard, which allows
			// only loopback here.
			f := &httpfetch.Fetcher{Guard: loopback(t), MaxRedirects: tt.maxRedirects, Clock: clock}

			got, err := f.FetchCard(context.Background(), srv.URL+tt.path, "")

			if tt.wantHits != nil && !slices.Equal(srv.requests(), tt.wantHits) {
				t.Errorf("server saw %v, want %v", srv.requests(), tt.wantHits)
			}
			if tt.wantCode != "" {
				if got != nil {
					t.Errorf("got a card %+v along with the error", got)
				}
				wantFetchError(t, err, tt.wantCode, tt.wantMsg...)
				return
			}
			if err != nil {
				t.Fatalf("FetchCard: %v", err)
			}
			if want := srv.URL + tt.wantPath; got.URL != want {
				t.Errorf("URL = %q, want %q", got.URL, want)
			}
			if !bytes.Equal(got.Body, tt.wantBody) {
				t.Errorf("Body = %.80q (%d bytes), want %.80q (%d bytes)", got.Body, len(got.Body), tt.wantBody, len(tt.wantBody))
			}
			if got.NotModified || !got.FetchedAt.Equal(clock.Now()) {
				t.Errorf("NotModified = %v, FetchedAt = %v, want false, %v", got.NotModified, got.FetchedAt, clock.Now())
			}
		})
	}
}

// A conditional fetch sends If-None-Match and reports a 304 as NotModified;
// every fetch identifies itself and asks for JSON.
func TestFetchCardETag(t *testing.T) {
	type seen struct{ accept, userAgent, ifNoneMatch string }
	var (
		mu   sync.Mutex
		reqs []seen
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.Header.Get("Accept"), r.Header.Get("User-Agent"), r.Header.Get("If-None-Match")})
		mu.Unlock()
		if r.URL.Path != "/.well-known/agent-card.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte(card))
	})
	f := &httpfetch.Fetcher{Guard: loopback(t)}

	first, err := f.FetchCard(context.Background(), srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if first.ETag != `"v1"` || first.NotModified || string(first.Body) != card {
		t.Errorf("first fetch = %+v, want the card with ETag \"v1\"", first)
	}
	if first.FetchedAt.IsZero() || first.FetchedAt.Location() != time.UTC {
		t.Errorf("FetchedAt = %v, want now in UTC", first.FetchedAt)
	}

	again, err := f.FetchCard(context.Background(), srv.URL, first.ETag)
	if err != nil {
		t.Fatal(err)
	}
	want := srv.URL + "/.well-known/agent-card.json"
	if !again.NotModified || again.Body != nil || again.ETag != `"v1"` || again.URL != want {
		t.Errorf("conditional fetch = %+v, want NotModified with ETag \"v1\" at %s", again, want)
	}

	wantReqs := []seen{
		{"application/json", "AgentMarket-CardFetcher/1", ""},
		{"application/json", "AgentMarket-CardFetcher/1", `"v1"`},
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reqs, wantReqs) {
		t.Errorf("requests = %+v, want %+v", reqs, wantReqs)
	}
}

// A 304 is only an answer to a conditional fetch.
func TestFetchCardUnexpected304(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
	f := &httpfetch.Fetcher{Guard: loopback(t)}
	_, err := f.FetchCard(context.Background(), srv.URL+"/card.json", "")
	wantFetchError(t, err, "card_fetch_status", "304")
}

func TestFetchCardTimeout(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}},
		{"body stalls", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"name":`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			f := &httpfetch.Fetcher{Guard: loopback(t), Timeout: 300 * time.Millisecond}
			start := time.Now()
			_, err := f.FetchCard(context.Background(), srv.URL+"/card.json", "")
			wantFetchError(t, err, "card_fetch_timeout", "no answer from "+srv.Listener.Addr().String()+" within 300ms")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v despite a 300ms timeout", d)
			}
		})
	}
}

// A caller's deadline shorter than Timeout is reported as the limit; a
// caller's cancellation is the caller's, not the card URL's, fault.
func TestFetchCardCallerContext(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	f := &httpfetch.Fetcher{Guard: loopback(t)}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := f.FetchCard(ctx, srv.URL+"/card.json", "")
	wantFetchError(t, err, "card_fetch_timeout", "within 200ms")
	<-started

	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err = f.FetchCard(ctx, srv.URL+"/card.json", "")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// Malformed URLs are refused before anything is resolved or dialled.
func TestFetchCardInvalidURL(t *testing.T) {
	tests := []struct{ url, wantMsg string }{
		{"", `"" is not an absolute http or https URL`},
		{"agent.example/card.json", "not an absolute http or https URL"},
		{"/.well-known/agent-card.json", "not an absolute http or https URL"},
		{"ftp://agent.example/card.json", "not an absolute http or https URL"},
		{"file:///etc/passwd", "not an absolute http or https URL"},
		{"gopher://127.0.0.1:6379/_FLUSHALL", "not an absolute http or https URL"},
		{"http://", "has no host"},
		{"https://:443/card.json", "has no host"},
		{"http:agent.example", "has no host"},
		{"http://user:secret@agent.example/", "contains user credentials"},
		{"http://agent.example@10.0.0.1/", "contains user credentials"},
		{"http://agent.example:port/", "not a valid URL"},
		{"http://[::1/", "not a valid URL"},
	}
	for _, tt := range tests {
		f := &httpfetch.Fetcher{Transport: noDialTransport(t)}
		_, err := f.FetchCard(context.Background(), tt.url, "")
		wantFetchError(t, err, "card_url_invalid", tt.wantMsg)
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q leaks the URL's password", err)
		}
	}
}
