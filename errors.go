// Package agentmarket holds what every AgentMarket domain shares: the one
// application error model, the clock, and the bounds of amounts with the
// one saturating sum (money.go). Domain packages (listings,
// contracts, billing, metering) build on it; transports map its kinds to
// their own status codes in exactly one place each.
package agentmarket

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is the small, closed set of error kinds. Transports map each kind to
// a status (HTTP) or code (JSON-RPC) in one function.
type Kind string

const (
	Invalid         Kind = "invalid"
	NotFound        Kind = "not_found"
	Conflict        Kind = "conflict"
	Unauthorized    Kind = "unauthorized"
	Forbidden       Kind = "forbidden"
	PaymentRequired Kind = "payment_required"
	TooLarge        Kind = "too_large"
	HeadersTooLarge Kind = "headers_too_large" // the request's line and headers, not its body
	// TimedOut: the client sent its request too slowly (or opened a
	// connection and sent nothing).
	TimedOut    Kind = "timed_out"
	Unavailable Kind = "unavailable"
	// TooManyRequests: the caller must wait (Error.RetryAfter) before
	// trying again (sign-in attempts, say).
	TooManyRequests Kind = "too_many_requests"
	Internal        Kind = "internal"
)

// FieldError names one field of the input and the rule it broke.
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// Error is the application error. Code is a stable machine code (for example
// "card_too_large"); Message is for humans and safe to show to callers.
// Err, when set, is the internal cause: logged, never shown.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Fields  []FieldError
	Err     error
	// RetryAfter, with TooManyRequests, is how long the caller must wait
	// (the transports send it as Retry-After).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of the given kind and stable code.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds an Internal (or other kind) error around a cause that callers
// must not see.
func Wrap(kind Kind, code string, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// KindOf returns the kind of err, Internal for errors that are not *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// CodeOf returns the stable code of err, "internal" for unknown errors.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "internal"
}

// Fields collects field errors, for Validate methods that report every
// broken rule at once.
type Fields []FieldError

// Add records that field broke rule.
func (f *Fields) Add(field, rule, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// Millis reads an optional duration in milliseconds into dst: nil or 0
// leaves dst alone (zeroMeans says what 0 stands for, for the message);
// anything else must lie within [min, max], or the field breaks the rule
// "range".
func (f *Fields) Millis(field, zeroMeans string, v *int64, min, max time.Duration, dst *time.Duration) {
	if v == nil || *v == 0 {
		return
	}
	d := time.Duration(*v) * time.Millisecond
	if *v < 0 || d < min || d > max {
		f.Add(field, "range", "%s must be 0 (%s) or between %d and %d", field, zeroMeans, min.Milliseconds(), max.Milliseconds())
		return
	}
	*dst = d
}

// Err returns nil when no field broke a rule, else an Invalid error with
// the given code listing them all.
func (f Fields) Err(code, message string) error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Kind: Invalid, Code: code, Message: message, Fields: f}
}
