package agentmarket

import "context"

// Change is one control-plane change a domain service made, as the audit
// log records it (contracts/audit): who (the actor, and the request it
// came in from, read from the context), what (an action such as
// "listing.update"), on which object (its type and id, and the org it
// belongs to), and the object before and after (values that marshal to
// JSON; nil for none).
type Change struct {
	// Actor made the change; the zero Actor is the platform itself (a
	// webhook, a scheduler).
	Actor      Actor
	Action     string
	ObjectType string
	ObjectID   string
	// OrgID is the org the object belongs to (a listing's seller, a
	// contract's buyer): its admins see the entry, as the actor's do.
	OrgID  string
	Before any
	After  any
}

// ChangeRecorder records changes (contracts/audit.Log implements it).
// Domain services record every change they make after making it; an error
// is the caller's (the change is made, its record is not).
type ChangeRecorder interface {
	RecordChange(ctx context.Context, c Change) error
}

// RecordChange records c with r, which may be nil (nothing is recorded).
func RecordChange(ctx context.Context, r ChangeRecorder, c Change) error {
	if r == nil {
		return nil
	}
	return r.RecordChange(ctx, c)
}

// Request is what a transport knows of the request a change came in:
// its id and the client's address. Transports put it in the context
// (WithRequest); the audit log reads it.
type Request struct {
	ID string
	IP string
	// Via names a request that acts for no one (the Stripe webhook).
	Via string
}

type requestKey struct{}

// WithRequest returns ctx carrying r.
func WithRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the request ctx carries (zero if none).
func RequestFrom(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey{}).(Request)
	return r
}
