// Package a2aproxy is the metering A2A proxy: buyers' orchestrators call
// the agents they hired through it. For every request it authenticates the
// bearer key, resolves the listing and the buyer's contract, enforces the
// entitlement, forwards to the seller's preferred interface with the
// seller's credentials in the version the seller speaks, relays the answer
// (SSE event by event, never buffered) and records usage.
//
// It declares the interfaces it needs; cmd/ wires the implementations.
package a2aproxy

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/metering"
)

// Authenticator turns a bearer key into the actor it stands for
// (contracts.Accounts).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (agentmarket.Actor, error)
}

// Target is what the meter needs of a listing to forward to its agent.
type Target struct {
	ListingID    string
	SellerOrgID  string
	Published    bool
	Card         *agentcard.Card
	CardJSON     []byte
	CardHash     string
	UpstreamAuth *listings.UpstreamAuth
	Limits       listings.Limits // the listing's own limits; zero fields take the meter's
	// Endpoints are the seller's agent endpoints beside the card's
	// (balance.go); nil: the chosen interface alone.
	Endpoints []listings.AgentEndpoint
}

// Resolver finds a listing's target.
type Resolver interface {
	Resolve(ctx context.Context, listingID string) (*Target, error)
}

// Plans returns a plan version (contracts freeze one).
type Plans interface {
	Plan(ctx context.Context, listingID string, version int) (*listings.Plan, error)
}

// Contracts finds the buyer's open contract for a listing.
type Contracts interface {
	OpenContract(ctx context.Context, buyerOrgID, listingID string) (*contracts.Contract, error)
}

// Incidents records the meter's health marks on listings
// (listings.Service).
type Incidents interface {
	RecordIncident(ctx context.Context, listingID, detail string) error
	// RecordLostTask counts a task the listing's agent no longer knew.
	RecordLostTask(ctx context.Context, listingID string) error
}

// Entitlements is the casbin check of an org's right to invoke a listing.
type Entitlements interface {
	Allowed(subject, domain, obj, act string) (bool, error)
}

// Recorder takes one usage row; it must have made the row durable (the
// local spool) when it returns.
type Recorder interface {
	Record(ctx context.Context, u metering.Usage) error
	// Err is why the recorder cannot take rows now (a spool whose fsync
	// failed, a full disk), nil when it can.
	Err() error
}

// Spend tells what has been spent this month, for budgets: the list price
// of the usage of one API key or one contract since from.
type Spend interface {
	Spent(ctx context.Context, apiKeyID, contractID string, from time.Time) (int64, error)
}

// OrgSpend tells what a buyer org has spent this month, for its monthly
// budget: the list price of the usage of all its keys and contracts since
// from.
type OrgSpend interface {
	OrgSpent(ctx context.Context, orgID string, from time.Time) (int64, error)
}

// SharedBudgets holds budgets' spend and reservations for every meter of
// a deployment (contracts/redis): a call's reservation is taken under all
// its budgets at once, atomically across meters. A budget is named with
// its month ("k:key_1|2026-12").
type SharedBudgets interface {
	// ReserveBudgets holds amount under every budget of ids, whose limits
	// and floors (the usage store's figure) it is given, or under none:
	// refused is -1 when it reserved, else the index of the first budget
	// that cannot take it, with what it spent and what calls in flight
	// hold there.
	ReserveBudgets(ctx context.Context, ids []string, limits, floors []int64, amount int64) (refused int, spent, held int64, err error)
	// SettleBudgets ends a reservation of amount under every budget of
	// ids, adding cost to what each spent.
	SettleBudgets(ctx context.Context, ids []string, amount, cost int64) error
}

// AddressGuard is the SSRF policy of every connection the meter makes,
// to agents and to buyers' webhooks (httpfetch.Guard): the dialer
// DialContext returns judges the resolved address of each connection
// before it is made, and refuses with an *agentmarket.Error of kind
// Invalid; Check judges a webhook's address when its config is set.
type AddressGuard interface {
	Check(ip netip.Addr) error
	DialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Sealer encrypts the buyer's webhook token and credentials at rest
// (listings.Sealer).
type Sealer interface {
	Seal(plaintext, context []byte) ([]byte, error)
	Open(sealed, context []byte) ([]byte, error)
}

// SharedOwners is the state of task owners that the meters of one
// deployment share (contracts/redis): a binding one meter makes is found by
// every other at once. Its bindings are atomic: the first owner stays.
type SharedOwners interface {
	contracts.TaskOwners
	BindTasks(ctx context.Context, bindings []contracts.TaskBinding) (owners []string, errs []error)
}

// SharedBills is the bill of every task that the meters of one deployment
// share (contracts/redis): each call's bill is decided there, on the call
// path, atomically across meters.
type SharedBills interface {
	// RaiseBill raises the task's bill (metering.Counters.Raise) and
	// returns it before and after, and whether this is its first bill;
	// found is false, and nothing changes, when it holds no bill of the
	// task and create is false.
	RaiseBill(ctx context.Context, listingID, taskID string, create bool, cum, add metering.Counters, at time.Time) (old, total metering.Counters, first, found bool, err error)
}
