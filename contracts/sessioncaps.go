package contracts

import "github.com/agentmarket/agentmarket"

// SessionCaps cap one conversation of a subscription: the sends under one
// contextId, and what they cost. A conversation past a cap is refused
// (the meter's -32046); the subscription's other conversations go on
// (docs/limits.md).
type SessionCaps struct {
	// MaxCalls is the most sends in one context; 0: no cap.
	MaxCalls int64 `json:"max_calls"`
	// MaxMicros is the most one context may cost, in micros of the
	// plan's currency; 0: no cap.
	MaxMicros int64 `json:"max_micros"`
}

// IsZero reports whether c caps nothing.
func (c SessionCaps) IsZero() bool { return c == SessionCaps{} }

// MaxSessionCalls bounds a session's call cap.
const MaxSessionCalls = 1_000_000_000

func (c SessionCaps) check(fe *agentmarket.Fields) {
	if c.MaxCalls < 0 || c.MaxCalls > MaxSessionCalls {
		fe.Add("session_caps.max_calls", "range", "session_caps.max_calls must be 0 (no cap) or between 1 and %d", MaxSessionCalls)
	}
	if c.MaxMicros < 0 || c.MaxMicros > agentmarket.MaxBudgetMicros {
		fe.Add("session_caps.max_micros", "range", "session_caps.max_micros must be 0 (no cap) or between 1 and %d", agentmarket.MaxBudgetMicros)
	}
}
