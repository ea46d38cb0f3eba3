package demoagent

import "net/http"

type extension struct {
	URI         string `json:"uri"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

type skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes"`
	OutputModes []string `json:"outputModes"`
}

type provider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

type card03 struct {
	ProtocolVersion    string           `json:"protocolVersion"`
	Name               string           `json:"name"`
	Description        string           `json:"description"`
	URL                string           `json:"url"`
	PreferredTransport string           `json:"preferredTransport"`
	Provider           provider         `json:"provider"`
	Version            string           `json:"version"`
	Capabilities       capabilities03   `json:"capabilities"`
	SecuritySchemes    map[string]any   `json:"securitySchemes,omitempty"`
	Security           []map[string]any `json:"security,omitempty"`
	DefaultInputModes  []string         `json:"defaultInputModes"`
	DefaultOutputModes []string         `json:"defaultOutputModes"`
	Skills             []skill          `json:"skills"`
}

type capabilities03 struct {
	Streaming              bool        `json:"streaming"`
	PushNotifications      bool        `json:"pushNotifications"`
	StateTransitionHistory bool        `json:"stateTransitionHistory"`
	Extensions             []extension `json:"extensions,omitempty"`
}

type card10 struct {
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	SupportedInterfaces  []iface10        `json:"supportedInterfaces"`
	Provider             provider         `json:"provider"`
	Version              string           `json:"version"`
	Capabilities         capabilities10   `json:"capabilities"`
	SecuritySchemes      map[string]any   `json:"securitySchemes,omitempty"`
	SecurityRequirements []map[string]any `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string         `json:"defaultInputModes"`
	DefaultOutputModes   []string         `json:"defaultOutputModes"`
	Skills               []skill          `json:"skills"`
}

type iface10 struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

type capabilities10 struct {
	Streaming         bool        `json:"streaming"`
	PushNotifications bool        `json:"pushNotifications"`
	ExtendedAgentCard bool        `json:"extendedAgentCard"`
	Extensions        []extension `json:"extensions,omitempty"`
}

var textOnly = []string{"text/plain"}

const usageDescription = "Reports cumulative token and compute usage per task: task and event metadata carry " +
	"{inputTokens, outputTokens, computeMs, model} under the extension URI."

// card builds the agent card for baseURL in the version the agent speaks.
func (a *Agent) card(baseURL string) any {
	cfg := a.cfg
	var exts []extension
	if cfg.ReportUsage {
		exts = []extension{{URI: UsageExtensionURI, Description: usageDescription, Required: false}}
	}
	skills := []skill{{
		ID:          cfg.SkillID,
		Name:        cfg.SkillName,
		Description: cfg.SkillDescription,
		Tags:        cfg.Tags,
		Examples:    behaviors[cfg.Behavior].examples,
		InputModes:  textOnly,
		OutputModes: textOnly,
	}}
	prov := provider{Organization: "AgentMarket demo", URL: "https://agentmarket.dev"}

	if cfg.Version == "0.3" {
		c := card03{
			ProtocolVersion:    "0.3.0",
			Name:               cfg.Name,
			Description:        cfg.Description,
			URL:                baseURL,
			PreferredTransport: "JSONRPC",
			Provider:           prov,
			Version:            cfg.AgentVersion,
			Capabilities:       capabilities03{Streaming: !cfg.NoStreaming, Extensions: exts},
			DefaultInputModes:  textOnly,
			DefaultOutputModes: textOnly,
			Skills:             skills,
		}
		if cfg.RequireAuth != "" {
			c.SecuritySchemes = map[string]any{"bearer": map[string]string{"type": "http", "scheme": "bearer"}}
			c.Security = []map[string]any{{"bearer": []string{}}}
		}
		return c
	}
	c := card10{
		Name:                cfg.Name,
		Description:         cfg.Description,
		SupportedInterfaces: []iface10{{URL: baseURL, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}},
		Provider:            prov,
		Version:             cfg.AgentVersion,
		Capabilities:        capabilities10{Streaming: !cfg.NoStreaming, Extensions: exts},
		DefaultInputModes:   textOnly,
		DefaultOutputModes:  textOnly,
		Skills:              skills,
	}
	if cfg.RequireAuth != "" {
		c.SecuritySchemes = map[string]any{"bearer": map[string]any{"httpAuthSecurityScheme": map[string]string{"scheme": "Bearer"}}}
		c.SecurityRequirements = []map[string]any{{"schemes": map[string]any{"bearer": map[string][]string{"list": {}}}}}
	}
	return c
}

func (a *Agent) serveCard(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	base := a.baseURL
	a.mu.Unlock()
	if base == "" {
		base = "http://" + r.Host + "/"
	}
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, a.card(base))
}
