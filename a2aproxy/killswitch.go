package a2aproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// Kill switches (contracts/killswitch.go) on the meter. The switches on
// are held as one immutable set behind an atomic pointer, nil while none
// is on: the killswitch stage then costs one load and a nil check a call.
//
// How a switch reaches every meter: each meter polls one row of the
// database (the switches' version, every Switchboard.Interval, 200 ms by
// default) and reads the switches again when it moved; with Redis the
// marketplace also publishes each change and the meters read at once.
// Either way a meter sees a switch within the interval plus one read.
// While the database cannot be read the meter keeps the switches it last
// read (a switch lifted meanwhile stays on until it answers).
//
// When a meter sees a new switch it ends the streams it relays that the
// switch concerns (a last error event, -32048, in the buyer's binding and
// version), cancels their tasks at the agent, and sweeps at once the
// tasks whose cancel the switch requested (every open task of the target
// the database holds; the sweepers lease each to one meter). Later it
// requests them again once (after 2× the request timeout), for tasks
// bound by calls that were in flight when the switch came.

// KillSwitches is what the meter reads of the kill switches
// (contracts.SwitchReader; contracts/gormstore implements it).
type KillSwitches interface {
	SwitchVersion(ctx context.Context) (int64, error)
	ActiveSwitches(ctx context.Context) ([]contracts.Switch, int64, error)
	RequestSwitchCancels(ctx context.Context, s *contracts.Switch, at time.Time) (int64, error)
}

// Switchboard holds the kill switches on, for the meter's call path.
type Switchboard struct {
	Store KillSwitches
	// Interval is how often the switches' version is polled; default
	// 200 ms.
	Interval time.Duration
	// Wake, when set, says the switches changed (a Redis subscription):
	// they are read at once rather than at the next poll.
	Wake <-chan struct{}

	set     atomic.Pointer[switchSet]
	mu      sync.Mutex
	streams map[*liveStream]struct{}
	// read is the state of the switches as this meter reads them
	// (killswitch_read.go); readErr the last read's failure, nil after a
	// good one.
	read    switchRead
	readErr atomic.Pointer[error]
}

// switchSet is the switches on, by what they stop.
type switchSet struct {
	listings, sellers, buyers, keys map[string]*contracts.Switch
	tasks                           map[ownerKey]*contracts.Switch
}

func newSwitchSet(on []contracts.Switch) *switchSet {
	if len(on) == 0 {
		return nil
	}
	s := &switchSet{listings: map[string]*contracts.Switch{}, sellers: map[string]*contracts.Switch{}, buyers: map[string]*contracts.Switch{},
		keys: map[string]*contracts.Switch{}, tasks: map[ownerKey]*contracts.Switch{}}
	for i := range on {
		sw := &on[i]
		switch sw.Scope {
		case contracts.SwitchListing:
			s.listings[sw.TargetID] = sw
		case contracts.SwitchSellerOrg:
			s.sellers[sw.TargetID] = sw
		case contracts.SwitchBuyerOrg:
			s.buyers[sw.TargetID] = sw
		case contracts.SwitchAPIKey:
			s.keys[sw.TargetID] = sw
		case contracts.SwitchTask:
			s.tasks[ownerKey{sw.ListingID, sw.TargetID}] = sw
		}
	}
	return s
}

// match is the switch that stops a call to listing (of seller) by buyer's
// key naming task ("" when none), or nil.
func (s *switchSet) match(listing, seller, buyer, key, task string) *contracts.Switch {
	if sw := s.listings[listing]; sw != nil {
		return sw
	}
	if sw := s.sellers[seller]; sw != nil {
		return sw
	}
	if sw := s.buyers[buyer]; sw != nil {
		return sw
	}
	if key != "" {
		if sw := s.keys[key]; sw != nil {
			return sw
		}
	}
	if task != "" {
		return s.tasks[ownerKey{listing, task}]
	}
	return nil
}

// concerns reports whether sw stops a call to listing (of seller) by
// buyer's key naming task.
func concerns(sw *contracts.Switch, listing, seller, buyer, key, task string) bool {
	switch sw.Scope {
	case contracts.SwitchListing:
		return sw.TargetID == listing
	case contracts.SwitchSellerOrg:
		return sw.TargetID == seller
	case contracts.SwitchBuyerOrg:
		return sw.TargetID == buyer
	case contracts.SwitchAPIKey:
		return key != "" && sw.TargetID == key
	case contracts.SwitchTask:
		return task != "" && sw.ListingID == listing && sw.TargetID == task
	}
	return false
}

// switchedOff is the error of a call a switch stops.
func switchedOff(sw *contracts.Switch) *rpcError {
	who := "its seller or the buyer organisation"
	if sw.ByOperator {
		who = "the platform operator"
	}
	what := map[contracts.SwitchScope]string{contracts.SwitchListing: "this listing", contracts.SwitchSellerOrg: "this listing's seller",
		contracts.SwitchBuyerOrg: "your organisation", contracts.SwitchAPIKey: "this API key", contracts.SwitchTask: "this task"}[sw.Scope]
	return rpcErr(CodeSwitchedOff, http.StatusForbidden, fmt.Sprintf("%s is switched off by %s (kill switch %s): %s", what, who, sw.ID, sw.Reason))
}

// killswitch refuses calls a kill switch stops (the chain's stage, after
// ownership: a task is the caller's before its switch is told).
type killswitch struct {
	board *Switchboard
}

func (k killswitch) serve(cl *call, next handler) error {
	if k.board != nil {
		if set := k.board.set.Load(); set != nil {
			buyer, key := cl.actor.OrgID, cl.actor.KeyID
			if m := cl.req.Method; m == wire.MethodCancelTask || m == wire.MethodGetTask {
				// A switched-off key or org may still stop its work and see
				// it stopped: a key's tasks are not found to be canceled for
				// it (task_owners records no key), and an org's are, but it
				// reads their canceled state. The listing's, seller's and
				// task's switches still refuse them: those cancel the tasks
				// themselves.
				buyer, key = "", ""
			}
			if sw := set.match(cl.target.ListingID, cl.target.SellerOrgID, buyer, key, cl.req.TaskID()); sw != nil {
				return switchedOff(sw)
			}
		}
	}
	return next(cl)
}

// liveStream is a stream the meter relays, which a switch may end.
type liveStream struct {
	listing, seller, buyer, key, task string // task: the one the request named
	body                              io.Closer
	killed                            atomic.Pointer[contracts.Switch]
}

// by is the switch that ended the stream, nil when none did.
func (ls *liveStream) by() *contracts.Switch {
	if ls == nil {
		return nil
	}
	return ls.killed.Load()
}

// track registers a stream being relayed (stream.go); untrack ends that.
func (b *Switchboard) track(cl *call, body io.Closer) *liveStream {
	ls := &liveStream{listing: cl.target.ListingID, seller: cl.target.SellerOrgID, buyer: cl.actor.OrgID, key: cl.actor.KeyID, task: cl.req.TaskID(), body: body}
	b.mu.Lock()
	if b.streams == nil {
		b.streams = map[*liveStream]struct{}{}
	}
	b.streams[ls] = struct{}{}
	b.mu.Unlock()
	// A switch that came while the stream was being set up.
	if set := b.set.Load(); set != nil {
		if sw := set.match(ls.listing, ls.seller, ls.buyer, ls.key, ls.task); sw != nil {
			ls.kill(sw)
		}
	}
	return ls
}

func (b *Switchboard) untrack(ls *liveStream) {
	b.mu.Lock()
	delete(b.streams, ls)
	b.mu.Unlock()
}

// kill ends the stream's relay: the read of the agent's stream fails, and
// relay answers the buyer with the switch's error.
func (ls *liveStream) kill(sw *contracts.Switch) {
	if ls.killed.CompareAndSwap(nil, sw) {
		ls.body.Close()
	}
}

// killStreams ends the streams sw concerns; it returns how many.
func (b *Switchboard) killStreams(sw *contracts.Switch) int {
	b.mu.Lock()
	var hit []*liveStream
	for ls := range b.streams {
		// A stream's task id, when the request named none, is the agent's
		// answer: a switch of that task reaches it through its listing's
		// requested cancel (the agent ends the stream when it cancels).
		if concerns(sw, ls.listing, ls.seller, ls.buyer, ls.key, ls.task) {
			hit = append(hit, ls)
		}
	}
	b.mu.Unlock()
	for _, ls := range hit {
		ls.kill(sw)
	}
	return len(hit)
}

// endKilledStream answers a stream a switch ended and cancels its task at
// the agent (relay calls it on the stream's goroutine, so cl is its own).
func (p *Proxy) endKilledStream(ctx context.Context, cl *call, sw *contracts.Switch, write func(*wire.Error)) {
	e := switchedOff(sw)
	cl.errCode = e.Code
	write(&wire.Error{Code: e.Code, Message: e.Message})
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	if cl.obs.taskID == "" || cl.obs.terminal || p.Tasks == nil {
		return
	}
	b := contracts.TaskBinding{ListingID: cl.target.ListingID, TaskID: cl.obs.taskID, OrgID: cl.actor.OrgID, ContextID: cl.obs.contextID, KeyID: cl.actor.KeyID}
	if cl.contract != nil {
		b.ContractID = cl.contract.ID
	}
	trace := cl.trace
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		ctx, cancel := context.WithTimeout(p.Base, 2*p.Limits.RequestTimeout)
		defer cancel()
		// Recorded first, due once this attempt has had its time: a failed
		// attempt is the sweeper's to retry. Not found: the task's binding
		// is not projected yet; the attempt below is all there is.
		_ = p.Tasks.RequestCancel(ctx, b.ListingID, b.TaskID, contracts.CanceledByKillSwitch, sw.CancelReason(), trace.traceID,
			p.Clock.Now().Add(2*p.Limits.RequestTimeout+time.Second))
		if err := p.cancelAtAgent(ctx, b, contracts.CanceledByKillSwitch, sw.CancelReason(), trace); err != nil {
			p.Logger.WarnContext(ctx, "task of a stream a kill switch ended not canceled yet; the sweeper retries", "trace_id", trace.traceID,
				"task_id", b.TaskID, "kill_switch", sw.ID, "err", err)
			return
		}
		p.Metrics.taskCanceled(contracts.CanceledByKillSwitch)
	}()
}

// pollInterval is how often every meter reads the switches' version.
func (b *Switchboard) pollInterval() time.Duration {
	if b.Interval <= 0 {
		return 200 * time.Millisecond
	}
	return b.Interval
}

// RunKillSwitches keeps the meter's switches current until ctx ends (the
// version poll, and Wake), and acts on each new one.
func (p *Proxy) RunKillSwitches(ctx context.Context) {
	b := p.Switches
	if b == nil {
		return
	}
	t := time.NewTicker(b.pollInterval())
	defer t.Stop()
	for {
		p.readSwitches(ctx, &b.read)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.Wake:
		}
	}
}

// readSwitches reads the switches when their version moved, and acts on
// those not acted on yet.
func (p *Proxy) readSwitches(ctx context.Context, r *switchRead) error {
	b := p.Switches
	v, err := b.Store.SwitchVersion(ctx)
	if err != nil {
		return p.switchesUnread(ctx, err)
	}
	if r.loaded && v == r.version {
		b.readErr.Store(nil)
		return nil
	}
	on, v, err := b.Store.ActiveSwitches(ctx)
	if err != nil {
		return p.switchesUnread(ctx, err)
	}
	b.readErr.Store(nil)
	b.set.Store(newSwitchSet(on))
	first := !r.loaded
	r.version, r.loaded = v, true
	if r.acted == nil {
		r.acted = map[string]bool{}
	}
	acted := r.acted
	still := map[string]bool{}
	for i := range on {
		sw := &on[i]
		still[sw.ID] = true
		if acted[sw.ID] {
			continue
		}
		acted[sw.ID] = true
		if first && p.Clock.Now().Sub(sw.SetAt) > 2*p.Limits.RequestTimeout+time.Second {
			// On the meter's start, a switch older than both rounds of its
			// cancels was handled: by the API that set it and the meters
			// up then (and the sweepers carry out what is still due). This
			// meter has no stream of it to end.
			continue
		}
		n := b.killStreams(sw)
		p.Logger.InfoContext(ctx, "kill switch on", "kill_switch", sw.ID, "scope", sw.Scope, "target", sw.TargetID, "streams_ended", n)
		// The first round waits two polls: every meter relaying a stream
		// the switch ends has read it by then and ended that stream with
		// the switch's error (and cancelled its task itself). Cancelled at
		// once, the agent would end those streams first with a plain
		// CANCELED, and their buyers would not learn why.
		p.cancelSwitched(ctx, sw, 2*b.pollInterval())
		p.cancelSwitched(ctx, sw, 2*p.Limits.RequestTimeout)
	}
	for id := range acted {
		if !still[id] {
			delete(acted, id)
		}
	}
	return nil
}

// cancelSwitched requests, after a delay, the cancel of every open task
// sw concerns, and sweeps them at once; not once ctx (RunKillSwitches')
// ended: a meter stopping leaves them to the other meters' sweepers.
func (p *Proxy) cancelSwitched(ctx context.Context, sw *contracts.Switch, after time.Duration) {
	if p.Tasks == nil {
		return
	}
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		if after > 0 {
			t := time.NewTimer(after)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		if _, err := p.Switches.Store.RequestSwitchCancels(ctx, sw, p.Clock.Now()); err != nil && ctx.Err() == nil {
			p.Logger.WarnContext(ctx, "kill switch's cancels not requested", "kill_switch", sw.ID, "err", err)
		}
		// Each sweep cancels up to a batch; go on while it finds some.
		for range 100 {
			if p.Sweep(ctx) == 0 {
				return
			}
		}
	}()
}
