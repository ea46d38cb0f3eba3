package a2aproxy

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// CheckPushURL exposes the webhook check to the tests.
func (ps *Push) CheckPushURL(ctx context.Context, raw string) error { return ps.checkURL(ctx, raw) }

// Backoff exposes the retry delay to the tests.
func (ps *Push) Backoff(n int) time.Duration { ps.init(); return ps.backoff(n) }

var NotificationVersion = notificationVersion

// FinishSend meters a finished send of task taskID as finish does, with
// the agent's cumulative report rep (nil: nothing reported).
func (p *Proxy) FinishSend(ctx context.Context, listingID, taskID string, plan *listings.Plan, rep *wire.Reported) error {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`)
	req, werr := wire.ParseRequest(body, "1.0")
	if werr != nil {
		return werr
	}
	cl := &call{start: p.Clock.Now(), trace: parseTraceparent(""), actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b"},
		target: &Target{ListingID: listingID, SellerOrgID: "org_s"}, contract: &contracts.Contract{ID: "ctr_1"}, plan: plan, req: req}
	cl.obs.taskID, cl.obs.state, cl.obs.terminal, cl.obs.reported = taskID, "completed", true, rep
	p.finish(ctx, cl, 250*time.Millisecond)
	return nil
}

// CheckBudgets runs the reserve stage's admission of a call by actor under
// contract that reserves nothing, and settles it at no cost.
func (p *Proxy) CheckBudgets(ctx context.Context, actor agentmarket.Actor, contract *contracts.Contract) error {
	cl := &call{trace: parseTraceparent(""), actor: actor, contract: contract}
	if err := p.book.reserve(ctx, cl, 0); err != nil {
		return err
	}
	p.book.settle(cl, 0)
	return nil
}

// RPCCode is the JSON-RPC error code the buyer gets for err.
func RPCCode(err error) int { return toRPC(err).Code }

// OwnerIndex is the meter's in-memory index of task owners, for tests.
type OwnerIndex = ownerIndex

// NewOwnerIndex is newOwnerIndex, for tests.
func NewOwnerIndex(store contracts.TaskOwners, capacity int, missWait time.Duration) *OwnerIndex {
	return newOwnerIndex(store, capacity, missWait)
}

// NoteProgress notes what a call on listingID saw of taskID, as a call
// under a stall time of after would.
func (p *Proxy) NoteProgress(listingID, taskID string, after time.Duration, ob wire.Observation) {
	cl := &call{actor: agentmarket.Actor{OrgID: "org_b"}, target: &Target{ListingID: listingID}}
	cl.lim.StallAfter = after
	cl.obs.taskID = taskID
	cl.obs.add(ob)
	p.noteProgress(cl, ob)
}

// RetryReuseMarks runs the task sweeper's retry of reuse marks.
func (p *Proxy) RetryReuseMarks(ctx context.Context) { p.writeLater(ctx) }

// RetryLife runs the task sweeper's retry of life events.
func (p *Proxy) RetryLife(ctx context.Context) { p.writeLater(ctx) }

// WriteLater runs the task sweeper's retry of refused writes.
func (p *Proxy) WriteLater(ctx context.Context) { p.writeLater(ctx) }

// RequestChildCancels requests the cancels of a task's delegated tasks, as
// a buyer's cancel of it does.
func (p *Proxy) RequestChildCancels(ctx context.Context, listingID, taskID string) {
	p.requestChildCancels(ctx, listingID, taskID, parseTraceparent(""))
}

// TraceparentCases are the headers the W3C rules keep or refuse, by
// header and whether kept.
func TraceparentCases() (hs []string, kept []bool) {
	for _, c := range traceparentCases {
		hs, kept = append(hs, c.h), append(kept, c.kept)
	}
	return hs, kept
}
