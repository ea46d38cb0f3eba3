package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/web/api"
)

// TestOpenAPICoversRoutes keeps the published document and the mounted
// routes in step: every /api/v1 route is documented, and nothing
// documented is missing.
func TestOpenAPICoversRoutes(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	app := fiber.New()
	(&api.Server{}).Mount(app)
	param := regexp.MustCompile(`:(\w+)`)
	mounted := map[string]bool{}
	for _, r := range app.GetRoutes(true) {
		if !strings.HasPrefix(r.Path, "/api/v1/") || r.Method == "HEAD" || r.Method == "USE" {
			continue
		}
		p := param.ReplaceAllString(r.Path, "{$1}")
		key := strings.ToLower(r.Method) + " " + p
		mounted[key] = true
		if _, ok := doc.Paths[p][strings.ToLower(r.Method)]; !ok {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if !mounted[m+" "+p] {
				t.Errorf("openapi.json documents %s %s, which is not mounted", m, p)
			}
		}
	}
}

// TestErrorsOfTheServer: fasthttp's own refusals keep their meaning on the
// wire. A read timeout (also on a connection that never sent a request)
// is a 408, which HTTP clients take as an idle connection closing, not a
// 500 "internal" the server never had.
func TestErrorsOfTheServer(t *testing.T) {
	app := fiber.New(fiber.Config{ErrorHandler: func(c *fiber.Ctx, err error) error { return api.WriteError(c, nil, err) }})
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{fiber.ErrRequestTimeout, 408, "request_timeout"},
		{fiber.ErrRequestEntityTooLarge, 413, "body_too_large"},
		{fiber.ErrRequestHeaderFieldsTooLarge, 431, "headers_too_large"},
		{fiber.ErrBadRequest, 422, "bad_request"},
	} {
		app.Get("/"+tc.code, func(*fiber.Ctx) error { return tc.err })
		res, err := app.Test(httptest.NewRequest("GET", "/"+tc.code, nil))
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorBody
		json.NewDecoder(res.Body).Decode(&body)
		if res.StatusCode != tc.status || body.Error.Code != tc.code {
			t.Errorf("%v: %d %q, want %d %q", tc.err, res.StatusCode, body.Error.Code, tc.status, tc.code)
		}
	}
}
