package agentmarket

// RateLimits are the rates at which calls through the meter are admitted
// under one holder: an API key, a subscription, a buyer org (set by its
// admin) or a listing (set by its seller, over all its buyers, to protect
// the agent). A zero field is no limit; the zero value limits nothing
// (docs/limits.md says what each means and how meters share them).
type RateLimits struct {
	// RequestsPerSecond and RequestsPerMinute bound calls over a sliding
	// second and a sliding minute.
	RequestsPerSecond int64 `json:"requests_per_second"`
	RequestsPerMinute int64 `json:"requests_per_minute"`
	// TokensPerMinute is a bucket of tokens refilled over a minute: a call
	// is admitted while it is not empty and, once it ends, takes out the
	// tokens (input and output) its usage row says it used.
	TokensPerMinute int64 `json:"tokens_per_minute"`
	// MaxInFlight bounds the calls under way at once.
	MaxInFlight int64 `json:"max_in_flight"`
}

// Bounds of a rate limit: past them a limit protects nothing a meter could
// serve anyway.
const (
	MaxRequestsPerSecond = 1_000_000
	MaxRequestsPerMinute = 60_000_000
	MaxTokensPerMinute   = 1_000_000_000_000
	MaxInFlight          = 1_000_000
)

// IsZero reports whether l limits nothing.
func (l RateLimits) IsZero() bool { return l == RateLimits{} }

// Check records every field of l out of its bounds, under prefix
// ("rate_limits.").
func (l RateLimits) Check(fe *Fields, prefix string) {
	check := func(name string, v, max int64) {
		if v < 0 || v > max {
			fe.Add(prefix+name, "range", "%s%s must be 0 (no limit) or between 1 and %d", prefix, name, max)
		}
	}
	check("requests_per_second", l.RequestsPerSecond, MaxRequestsPerSecond)
	check("requests_per_minute", l.RequestsPerMinute, MaxRequestsPerMinute)
	check("tokens_per_minute", l.TokensPerMinute, MaxTokensPerMinute)
	check("max_in_flight", l.MaxInFlight, MaxInFlight)
}
