package listings

import (
	"time"

	"github.com/agentmarket/agentmarket"
)

// Limits are a listing's own meter limits; a zero field means the
// platform's default (AGENTMARKET_METER_*).
type Limits struct {
	RequestTimeout    time.Duration
	StreamIdleTimeout time.Duration
	MaxRequestBytes   int
	MaxResultBytes    int
	// TaskTimeout is the end-to-end budget of a task: the meter cancels a
	// task at the agent this long after it began. Zero: no budget.
	TaskTimeout time.Duration
	// MaxPause is the longest a task may wait in input-required or
	// auth-required before the meter cancels it. Zero: the meter's default.
	MaxPause time.Duration
	// IdempotencyWindow is how long the meter answers a send whose
	// messageId the same buyer org sent to this listing before with what
	// the first send created, instead of forwarding it again. Zero: the
	// meter's default (24 h).
	IdempotencyWindow time.Duration
	// StallAfter is how long a task may show no progress (no status
	// change, artifact or message) before the meter marks it stalled.
	// Zero: the meter's default (10 min).
	StallAfter time.Duration
	// Rate is the listing's rate limits over all its buyers together,
	// which its seller sets to protect the agent (zero: none).
	Rate agentmarket.RateLimits
}

// LimitsInput is how the API carries limits.
type LimitsInput struct {
	RequestTimeoutMs    *int64 `json:"request_timeout_ms"`
	StreamIdleTimeoutMs *int64 `json:"stream_idle_timeout_ms"`
	MaxRequestBytes     *int64 `json:"max_request_bytes"`
	MaxResultBytes      *int64 `json:"max_result_bytes"`
	TaskTimeoutMs       *int64 `json:"task_timeout_ms"`
	MaxPauseMs          *int64 `json:"max_pause_ms"`
	IdempotencyWindowMs *int64 `json:"idempotency_window_ms"`
	StallAfterMs        *int64 `json:"stall_after_ms"`
	// The listing's rate limits over all its buyers (0: none).
	RequestsPerSecond *int64 `json:"requests_per_second"`
	RequestsPerMinute *int64 `json:"requests_per_minute"`
	TokensPerMinute   *int64 `json:"tokens_per_minute"`
	MaxInFlight       *int64 `json:"max_in_flight"`
}

// Bounds of per-listing limits: a seller may tighten or loosen the
// defaults, within what one meter can afford per call.
const (
	MaxRequestTimeout    = 10 * time.Minute
	MaxStreamIdleTimeout = time.Hour
	MaxBodyBytes         = 16 << 20
	// Long-running tasks: up to a week end to end, a day in one pause.
	MaxTaskTimeout = 7 * 24 * time.Hour
	MaxMaxPause    = 24 * time.Hour
	// Idempotent sends: from a second (tests, agents whose buyers reuse
	// ids on purpose) to a week of records.
	MaxIdempotencyWindow = 7 * 24 * time.Hour
	// Stalled tasks: from a second to a day without progress.
	MaxStallAfter = 24 * time.Hour
)

// ParseLimits checks limits, reporting every problem; nil fields (and 0)
// keep the default.
func ParseLimits(in *LimitsInput) (Limits, error) {
	var l Limits
	if in == nil {
		return l, nil
	}
	var fe agentmarket.Fields
	ms := func(field string, v *int64, min, max time.Duration, dst *time.Duration) {
		fe.Millis("limits."+field, "the default", v, min, max, dst)
	}
	bytes := func(field string, v *int64, min, max int, dst *int) {
		if v == nil || *v == 0 {
			return
		}
		if *v < int64(min) || *v > int64(max) {
			fe.Add("limits."+field, "range", "limits.%s must be 0 (the default) or between %d and %d", field, min, max)
			return
		}
		*dst = int(*v)
	}
	ms("request_timeout_ms", in.RequestTimeoutMs, 100*time.Millisecond, MaxRequestTimeout, &l.RequestTimeout)
	ms("stream_idle_timeout_ms", in.StreamIdleTimeoutMs, 100*time.Millisecond, MaxStreamIdleTimeout, &l.StreamIdleTimeout)
	bytes("max_request_bytes", in.MaxRequestBytes, 1024, MaxBodyBytes, &l.MaxRequestBytes)
	bytes("max_result_bytes", in.MaxResultBytes, 1024, MaxBodyBytes, &l.MaxResultBytes)
	ms("task_timeout_ms", in.TaskTimeoutMs, time.Second, MaxTaskTimeout, &l.TaskTimeout)
	ms("max_pause_ms", in.MaxPauseMs, time.Second, MaxMaxPause, &l.MaxPause)
	ms("idempotency_window_ms", in.IdempotencyWindowMs, time.Second, MaxIdempotencyWindow, &l.IdempotencyWindow)
	ms("stall_after_ms", in.StallAfterMs, time.Second, MaxStallAfter, &l.StallAfter)
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	l.Rate = agentmarket.RateLimits{RequestsPerSecond: v(in.RequestsPerSecond), RequestsPerMinute: v(in.RequestsPerMinute),
		TokensPerMinute: v(in.TokensPerMinute), MaxInFlight: v(in.MaxInFlight)}
	l.Rate.Check(&fe, "limits.")
	return l, fe.Err("invalid_listing", "the listing is not valid")
}

// Input is the API form of l (zero fields as 0).
func (l Limits) Input() LimitsInput {
	i := func(v int64) *int64 { return &v }
	return LimitsInput{
		RequestTimeoutMs:    i(l.RequestTimeout.Milliseconds()),
		StreamIdleTimeoutMs: i(l.StreamIdleTimeout.Milliseconds()),
		MaxRequestBytes:     i(int64(l.MaxRequestBytes)),
		MaxResultBytes:      i(int64(l.MaxResultBytes)),
		TaskTimeoutMs:       i(l.TaskTimeout.Milliseconds()),
		MaxPauseMs:          i(l.MaxPause.Milliseconds()),
		IdempotencyWindowMs: i(l.IdempotencyWindow.Milliseconds()),
		StallAfterMs:        i(l.StallAfter.Milliseconds()),
		RequestsPerSecond:   i(l.Rate.RequestsPerSecond),
		RequestsPerMinute:   i(l.Rate.RequestsPerMinute),
		TokensPerMinute:     i(l.Rate.TokensPerMinute),
		MaxInFlight:         i(l.Rate.MaxInFlight),
	}
}
