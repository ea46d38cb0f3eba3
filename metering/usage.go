// Package metering is the usage pipeline: every call through the meter
// becomes one Usage row, appended to a local spool before the buyer's
// response completes, then shipped in batches to a usage store (ClickHouse
// in production, an embedded store by default) where finance queries it.
// It owns the row, the store and query interfaces, prices and the ledger;
// the spool and the shipper live in metering/spool, the stores' adapters
// in their own subpackages.
package metering

import (
	"context"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Usage is one metered call (or one settled stream, or one push
// notification). Token and compute counts are the increase this row bills
// over what earlier rows already billed for the same task, so summing rows
// never double counts. ID is unique per row and makes every write
// idempotent: a row stored twice counts once.
type Usage struct {
	ID   string
	Time time.Time // when the call completed, millisecond precision

	TraceID      string // W3C trace id (32 hex)
	TaskID       string
	ContextID    string
	ParentTaskID string

	ListingID   string
	SellerOrgID string
	BuyerOrgID  string
	APIKeyID    string
	ContractID  string

	Method          string // the A2A method as the buyer called it, e.g. "message/send", "SendMessage"
	ProtocolVersion string // the buyer's version, "0.3" or "1.0"
	State           string // the task state after the call, in 0.3 spelling ("completed"), empty if none
	ErrorCode       int    // JSON-RPC error code answered to the buyer, 0 for success

	BytesIn   int64
	BytesOut  int64
	LatencyMs int64

	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
	Tasks        int64 // 1 on the row that first bills a task, else 0
	CostMicros   int64
	Currency     string
	Estimated    bool // tokens estimated from text, not reported by the agent

	CardHash string // the card version in force
	Model    string // the model the agent reported, if any

	// Tags are the cost allocation tags of the call's contract and API key
	// at call time (the key's win on a shared key).
	Tags agentmarket.Tags

	// Pending, when set, is usage the meter could not bill when it
	// recorded the row; Settle bills it before the row is stored. Stores
	// never see a row with Pending set.
	Pending *PendingBill

	// Binds, when set, says this call is the one that first saw TaskID:
	// the meter bound the task to BuyerOrgID (and ContractID, ContextID,
	// ParentTaskID) when it answered, and the row, once spooled, is that
	// binding's durable record; the shipper projects it into the task
	// owners' store. Stores never see it.
	Binds *Binding

	// Sent, when set, says this call forwarded a message under its
	// messageId (idempotent sends): the row, once spooled, is the durable
	// record of how the send ended (its task is TaskID, its state State; a
	// call that failed frees the messageId), and the shipper projects it
	// into the sent messages' store. Stores never see it.
	Sent *Sent

	// Billed, when set, says the meter decided this row's bill when it
	// recorded it (its own ledger, kept in memory: a2aproxy's bill book):
	// the row's counters, Tasks and CostMicros are final, and Billed is
	// what TaskID has been billed in all after this row. The shipper raises
	// the task's stored counters to it (contracts.TaskBilled), which is
	// idempotent; the row itself is billed once by its ID, like any other.
	// Stores never see it.
	Billed *Counters

	// Lost says the agent answered this call TaskNotFound for TaskID,
	// a task the meter had bound to BuyerOrgID: the agent forgot it. The
	// shipper projects it (the task is recorded lost and its listing counts
	// it). Stores never see it.
	Lost bool
}

// Sent is what a row records of the message its call forwarded, beyond
// the row's own fields (listing, buyer org, contract, task, context,
// state, error code).
type Sent struct {
	MessageID string
	Digest    string // hex SHA-256 of the message's canonical form
	ClaimID   string
	ClaimedAt time.Time
	HeldUntil time.Time
	ExpiresAt time.Time
	// Done says the agent took the message (it answered with a task or a
	// message, or a stream named its task before it failed); a call that
	// ended without that frees the messageId.
	Done bool
	// Result is the agent's answer when it was a message (no task), in
	// ResultVersion, the agent's A2A version.
	Result        []byte
	ResultVersion string
}

// Binding is what a row adds to its task's binding beyond the row's own
// fields.
type Binding struct {
	// ParentListingID is the listing of ParentTaskID when the meter knew
	// the parent ("" when it did not, or there is none).
	ParentListingID string
	// DeadlineAt is when the task's end-to-end budget runs out; zero when
	// none applies.
	DeadlineAt time.Time
	// Stored says the meter wrote the binding to the database itself when
	// the call made it (a task whose life is recorded at once, a stream):
	// the row then only confirms it.
	Stored bool
	// Endpoint is the agent endpoint that created the task, when its
	// listing has several ("" otherwise): the binding keeps it.
	Endpoint string
}

// GroupBy is a dimension usage is summed over.
type GroupBy string

const (
	ByListing GroupBy = "listing"
	BySeller  GroupBy = "seller"
	ByBuyer   GroupBy = "buyer"
	ByAPIKey  GroupBy = "api_key"
	ByTask    GroupBy = "task"
	ByDay     GroupBy = "day"
)

// GroupBys lists the dimensions in documentation order. A tag key is one
// more: ByTag("team") groups by the value of the rows' tag team, rows
// without it under "" (untagged).
var GroupBys = []GroupBy{ByListing, BySeller, ByBuyer, ByAPIKey, ByTask, ByDay}

// FallbackTag is the tag the meter puts on the usage row of a call a
// fallback listing served: its value is the listing the buyer called (the
// row's own listing is the fallback's). ByTag(FallbackTag) groups the
// calls fallbacks served by the listing they stood in for.
const FallbackTag = "fallback_for"

// tagPrefix starts a GroupBy of a tag key.
const tagPrefix = "tag:"

// ByTag is the grouping by a tag key's value.
func ByTag(key string) GroupBy { return GroupBy(tagPrefix + key) }

// TagKey is the tag key g groups by, and whether g is such a grouping.
func (g GroupBy) TagKey() (string, bool) {
	k, ok := strings.CutPrefix(string(g), tagPrefix)
	return k, ok && agentmarket.ValidTagKey(k)
}

// Query selects usage rows to sum. Empty filters match everything; From is
// inclusive, To exclusive.
type Query struct {
	GroupBy     GroupBy
	From, To    time.Time
	BuyerOrgID  string
	SellerOrgID string
	ListingID   string
	APIKeyID    string
	ContractID  string
}

// Total is the sum of usage for one key of the grouping. For ByDay the key
// is the UTC date ("2026-11-30"); for ByTask it is "<listing id>/<task id>",
// since task ids are the agents' own and only unique per listing.
type Total struct {
	Key          string
	Calls        int64
	Tasks        int64
	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
	CostMicros   int64
	Estimated    int64 // how many of the calls carry estimated tokens
	// Task names the task of a ByTask total; zero for other groupings.
	Task TaskRef
}

// TaskRef is a task as the usage rows name it: its listing, its id (the
// agent's own, unique per listing; "" for calls without a task) and its
// context (the largest context id among its rows: one, unless the agent
// changed it).
type TaskRef struct {
	ListingID, TaskID, ContextID string
}

// Add returns t with u's counters added (Key stays t's). Sums saturate at
// the largest int64 instead of wrapping (agentmarket.AddSat), as every
// store's Totals do: the one way totals are added up in Go.
func (t Total) Add(u Total) Total {
	t.Calls = agentmarket.AddSat(t.Calls, u.Calls)
	t.Tasks = agentmarket.AddSat(t.Tasks, u.Tasks)
	t.InputTokens = agentmarket.AddSat(t.InputTokens, u.InputTokens)
	t.OutputTokens = agentmarket.AddSat(t.OutputTokens, u.OutputTokens)
	t.ComputeMs = agentmarket.AddSat(t.ComputeMs, u.ComputeMs)
	t.CostMicros = agentmarket.AddSat(t.CostMicros, u.CostMicros)
	t.Estimated = agentmarket.AddSat(t.Estimated, u.Estimated)
	return t
}

// Sum adds up totals (Total.Add) into one, with an empty key.
func Sum(totals []Total) Total {
	var s Total
	for _, t := range totals {
		s = s.Add(t)
	}
	s.Key = ""
	return s
}

// Store keeps usage rows and answers aggregate queries. Implementations:
// metering/clickhouse (production) and metering/embedded (the embedded
// default); every implementation passes metering/storetest.
//
// Totals never fail for the size of a sum: a sum past the int64 range
// saturates at its largest value (9223372036854775807), exactly like
// Total.Add, on every store.
type Store interface {
	// Insert stores rows. Rows whose ID is already stored have no further
	// effect, however often they are inserted.
	Insert(ctx context.Context, rows []Usage) error
	// Totals sums usage per key of q.GroupBy, ordered by key.
	Totals(ctx context.Context, q Query) ([]Total, error)
	// Rows returns the stored rows matching q (GroupBy ignored), ordered by
	// time then id, each row once: for tests, audits and exports.
	Rows(ctx context.Context, q Query) ([]Usage, error)
}

// BatchSizer is a Store that knows how many rows one Insert should carry:
// ClickHouse, say, wants few large inserts (each is a new part on disk).
// A Shipper whose options leave BatchRows zero uses it.
type BatchSizer interface {
	PreferredBatchRows() int
}

// TotalRows is the result of a store's aggregate query (database/sql's
// and clickhouse-go's rows both fit): the key, the seven sums in Total's
// order, and for ByTask the task's context id.
type TotalRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadTotals reads the rows of an aggregate query whose columns are the
// key (a UTC day number for ByDay), calls, tasks, input and output
// tokens, compute, cost and estimated calls: the one reading of totals
// every store shares. Errors are the driver's, for the store to wrap.
func ReadTotals(rows TotalRows, g GroupBy) ([]Total, error) {
	out := []Total{}
	for rows.Next() {
		var t Total
		var day int64
		key := any(&t.Key)
		if g == ByDay {
			key = &day
		}
		dest := []any{key, &t.Calls, &t.Tasks, &t.InputTokens, &t.OutputTokens, &t.ComputeMs, &t.CostMicros, &t.Estimated}
		if g == ByTask {
			dest = append(dest, &t.Task.ContextID)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		switch g {
		case ByDay:
			t.Key = DayKey(day)
		case ByTask:
			t.Task.ListingID, t.Task.TaskID, _ = strings.Cut(t.Key, "/")
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
