package api_test

import (
	"encoding/json"
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
