package a2aproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// Idempotent sends (docs/a2a-usage-extension.md, "Idempotent sends").
//
// A send (message/send, message/stream, SendMessage,
// SendStreamingMessage) whose messageId the same buyer org already sent to
// the same listing within the window is not forwarded again: the meter
// answers with what the first send created (its task in its current
// state, or the message the agent answered), waiting for the first copy
// when it is still running, and bills nothing more. The same messageId
// with another message is a new send, forwarded and billed (reusedSep);
// its usage row's method is reused-id:<method>.
//
// The meter decides on its own sends from memory (sentIndex): a send it
// forwards is claimed there first, so a retry through the same meter
// waits for it or replays it without SQL. A messageId it does not hold
// (sent through another meter, or before a restart) is looked up in the
// sent messages' store: one indexed read by the primary key, batched with
// the lookups of concurrent calls; that read is the one database round
// trip this adds to a send. The durable record is written off the call
// path: the claim sentClaimDelay after the meter took it, when the send
// still runs then (so another meter's retry finds the first copy while
// it runs), the task once a stream names it, and how the send ended with
// the call's usage row, from the spool (Usage.Sent, projected by
// Project).
//
// Two copies of one message sent through two meters less than about
// sentClaimDelay apart may both be forwarded: the guarantee is for a
// retry, which comes after its first copy timed out or failed.

const (
	// sentShards divides the index (by key hash) so calls rarely share a
	// lock.
	sentShards = 16
	// keptResultBytes: a message answer up to this size stays in the
	// index; a larger one is read back from the store when replayed.
	keptResultBytes = 2 << 10
	// sentPoll is how often a send waits for another meter's copy of it
	// (claimed there, its task not known yet) by reading the store again.
	sentPoll = 50 * time.Millisecond
	// sentLookupTimeout bounds the store lookup of a messageId: a store
	// that does not answer in time does not hold the call up (it is
	// forwarded, and the lookup counted as unchecked).
	sentLookupTimeout = 2 * time.Second
	// maxMessageIDKey is the longest messageId kept as it is; a longer
	// one is keyed by its SHA-256.
	maxMessageIDKey = 200
	// sentWriteQueue bounds the records waiting for the writer.
	sentWriteQueue = 8192
	// sentClaimDelay is how long after a send was claimed its claim goes
	// to the store, unless the send ended first (its usage row then
	// records it): most sends end within it, and their claims cost no
	// write. It is how far apart two copies sent through two meters must
	// be for the second to be recognised while the first runs.
	sentClaimDelay = 100 * time.Millisecond
	// sentLinger is how long a lookup may wait for others to share its
	// statement while sends arrive fast (batcher.linger).
	sentLinger = 500 * time.Microsecond
)

// A messageId sent again with another message is a new send (A2A makes
// duplicate detection an agent's MAY, and clients reuse ids: the
// conformance suite keeps one per session). The first message sent under a
// messageId is recorded under the id's key; each other message under it is
// recorded under the id's key followed by reusedSep and the message's
// digest, so an identical retry of any of them finds its own first send.
const reusedSep = "#"

// sentMessageKey is the key a messageId is recorded under.
func sentMessageKey(id string) string {
	if len(id) <= maxMessageIDKey {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sentEntry is the meter's knowledge of one sent message: a send it
// forwards or forwarded itself (local), or one whose end it read from the
// store.
type sentEntry struct {
	key       contracts.SentKey
	digest    string
	claimID   string
	contract  string
	claimedAt time.Time
	heldUntil time.Time
	expires   time.Time
	// local entries are this meter's own sends: done closes when the call
	// ends, known once the task (or the answer) is known or the call ends.
	local bool
	done  chan struct{}
	known chan struct{}

	mu    sync.Mutex
	stage contracts.SentStage
	sentView
	knownClosed bool
}

// sentView is what a replay needs of a sent message.
type sentView struct {
	stage         contracts.SentStage
	taskID        string
	contextID     string
	state         string
	result        []byte // a message answer, in resultVersion
	resultVersion wire.Version
	hasResult     bool // the answer was a message (result may be left in the store)
}

func (e *sentEntry) view() sentView {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.sentView
	v.stage = e.stage
	return v
}

// replaceable reports whether another send may claim the entry's
// messageId: the window is over, or the send failed.
func (e *sentEntry) replaceable(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !now.Before(e.expires) || e.stage == contracts.SentReleased
}

// learn records the task (or the answer) of a send in flight and reports
// whether the task id is new.
func (e *sentEntry) learn(taskID, contextID, state string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := taskID != "" && e.taskID == ""
	e.note(taskID, contextID, state)
	if !e.knownClosed {
		e.knownClosed = true
		close(e.known)
	}
	return first
}

// note keeps what is known of the send's task; an empty value changes
// nothing. e.mu is held.
func (e *sentEntry) note(taskID, contextID, state string) {
	if taskID != "" {
		e.taskID = taskID
	}
	if contextID != "" {
		e.contextID = contextID
	}
	if state != "" {
		e.state = state
	}
}

// end records how the send ended and wakes whoever waits for it.
func (e *sentEntry) end(stage contracts.SentStage, taskID, contextID, state string, result []byte, hasResult bool, v wire.Version) {
	e.mu.Lock()
	e.stage = stage
	if stage == contracts.SentDone {
		e.note(taskID, contextID, state)
		e.result, e.hasResult, e.resultVersion = result, hasResult, v
	}
	if !e.knownClosed {
		e.knownClosed = true
		close(e.known)
	}
	e.mu.Unlock()
	close(e.done)
}

// inFlight reports whether the send has not ended yet.
func (e *sentEntry) inFlight() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stage == contracts.SentInFlight
}

// record is the entry as the store keeps it.
func (e *sentEntry) record() contracts.SentMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := contracts.SentMessage{SentKey: e.key, ContractID: e.contract, Digest: e.digest, ClaimID: e.claimID, Stage: e.stage,
		TaskID: e.taskID, ContextID: e.contextID, State: e.state, ClaimedAt: e.claimedAt, HeldUntil: e.heldUntil, ExpiresAt: e.expires}
	if e.hasResult && e.result != nil {
		r.Result, r.ResultVersion = e.result, string(e.resultVersion)
	}
	return r
}

// sentIndex holds the meter's sent messages, bounded: each shard keeps at
// most its capacity, dropping the oldest key first (a dropped key is read
// from the store again).
type sentIndex struct {
	seed   maphash.Seed
	shards [sentShards]sentShard
}

type sentShard struct {
	mu   sync.Mutex
	m    map[contracts.SentKey]*sentEntry
	ring []contracts.SentKey
	next int
	cap  int
}

func newSentIndex(capacity int) *sentIndex {
	x := &sentIndex{seed: maphash.MakeSeed()}
	per := max(capacity/sentShards, 16)
	for i := range x.shards {
		x.shards[i].m = make(map[contracts.SentKey]*sentEntry)
		x.shards[i].cap = per
	}
	return x
}

func (x *sentIndex) shard(k contracts.SentKey) *sentShard {
	var h maphash.Hash
	h.SetSeed(x.seed)
	h.WriteString(k.ListingID)
	h.WriteByte(0)
	h.WriteString(k.OrgID)
	h.WriteByte(0)
	h.WriteString(k.MessageID)
	return &x.shards[h.Sum64()%sentShards]
}

func (x *sentIndex) get(k contracts.SentKey) *sentEntry {
	s := x.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// put stores e under k unless a live entry (not replaceable at now, and
// not e itself) holds k; it returns the entry in force and whether it is
// e.
func (x *sentIndex) put(k contracts.SentKey, e *sentEntry, now time.Time) (*sentEntry, bool) {
	s := x.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[k]; ok {
		if old != e && !old.replaceable(now) {
			return old, false
		}
		s.m[k] = e
		return e, true
	}
	s.m[k] = e
	if len(s.ring) < s.cap {
		s.ring = append(s.ring, k)
		return e, true
	}
	delete(s.m, s.ring[s.next])
	s.ring[s.next] = k
	s.next = (s.next + 1) % s.cap
	return e, true
}

// localLookups is a store of sent messages whose lookups cost no round
// trip (the meter's own log, contracts/sentlog): they are made at once,
// not gathered into batches.
type localLookups interface{ LocalLookups() }

// claimsAtOnce marks a store of sent messages shared by the meters of a
// deployment and fast enough to be written on the call path (Redis,
// contracts.SentFallback): a send claims its messageId there before it is
// forwarded (atomically: a copy sent through another meter at the same
// moment finds the claim), and its end is written as soon as the call
// ends, not when its usage row is projected.
type claimsAtOnce interface{ ClaimsAtOnce() }

// sentFound is the store's answer to one lookup.
type sentFound struct {
	rec *contracts.SentMessage
	err error
}

// initSent starts what idempotent sends need when the proxy has a store.
func (p *Proxy) initSent() {
	if p.Sent == nil {
		return
	}
	p.sentIdx = newSentIndex(p.Limits.SentIndexSize)
	_, p.sentLocal = p.Sent.(localLookups)
	_, p.sentAtOnce = p.Sent.(claimsAtOnce)
	// Lookups are reads, batched: a lookup of one key costs the pure-Go
	// SQLite driver about what one of sixteen does (it parses the
	// statement at every execution), so under load the batch lingers to
	// gather the lookups of the sends arriving meanwhile. One batch at a
	// time: a second in flight split the arrivals between two half-full
	// batches, and waits on the same database when it is slow.
	p.sentFinds = lingering(p.Base, 128, sentLinger, func(ctx context.Context, keys []contracts.SentKey) []sentFound {
		ctx, cancel := context.WithTimeout(ctx, sentLookupTimeout)
		defer cancel()
		recs, err := p.Sent.FindSent(ctx, keys, p.Clock.Now())
		out := make([]sentFound, len(keys))
		for i := range out {
			if err != nil {
				out[i].err = err
			} else {
				out[i].rec = recs[i]
			}
		}
		return out
	})
	p.sentWrites = make(chan sentWrite, sentWriteQueue)
	go p.writeSentLoop(p.Base)
}

// sentWrite is a send to record in the store once due: while it is in
// flight, or whatever it is then (ended).
type sentWrite struct {
	e     *sentEntry
	due   time.Time
	ended bool
}

// writeSent queues a send in flight for the store, off the call path: its
// record as it is when due (nothing, if it ended by then: its usage row
// records it). A full queue drops it (the store lags): the call's usage
// row still records how the send ended.
func (p *Proxy) writeSent(e *sentEntry, due time.Time) {
	p.queueSent(sentWrite{e: e, due: due})
}

func (p *Proxy) queueSent(w sentWrite) {
	e := w.e
	select {
	case p.sentWrites <- w:
	default:
		// Not waited for: the call must not wait on the store. Its usage
		// row records how the send ended (Project); until then another
		// meter does not see the send in flight, and may forward a retry.
		p.Logger.Warn("sent message not recorded at once: the queue is full", "listing", e.key.ListingID, "message_id", e.key.MessageID)
	}
}

// writeSentLoop writes the queued sends in flight, in batches. The queue
// is in the order of the calls, so its head is due first (near enough: a
// stream's task, due at once, waits behind claims due a little later).
func (p *Proxy) writeSentLoop(ctx context.Context) {
	batch := make([]contracts.SentMessage, 0, 256)
	var head *sentWrite
	for {
		if head == nil {
			select {
			case <-ctx.Done():
				return
			case w := <-p.sentWrites:
				head = &w
			}
		}
		if d := time.Until(head.due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		batch = batch[:0]
		for head != nil && len(batch) < cap(batch) && !head.due.After(time.Now()) {
			if head.ended || head.e.inFlight() {
				batch = append(batch, head.e.record())
			}
			head = nil
			select {
			case w := <-p.sentWrites:
				head = &w
			default:
			}
		}
		if len(batch) == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		applied, err := p.Sent.RecordSent(wctx, batch, p.Clock.Now())
		cancel()
		if err != nil {
			// Not retried here: the calls' usage rows record how their sends
			// ended (Project); until then other meters do not see them in
			// flight, and may forward a retry.
			p.Logger.Warn("sent messages not recorded at once; their calls' usage rows record them", "count", len(batch), "err", err)
			continue
		}
		for i, ok := range applied {
			if !ok {
				// Another meter holds the messageId: two copies sent at the
				// same moment through two meters were both forwarded.
				p.Logger.Warn("a message was forwarded by two meters at once under one messageId", "listing", batch[i].ListingID,
					"org", batch[i].OrgID, "message_id", batch[i].MessageID)
			}
		}
	}
}

// findSent is the store's record of a messageId (nil when none holds it).
func (p *Proxy) findSent(ctx context.Context, k contracts.SentKey) (*contracts.SentMessage, error) {
	if p.sentLocal {
		recs, err := p.Sent.FindSent(ctx, []contracts.SentKey{k}, p.Clock.Now())
		if err != nil {
			return nil, err
		}
		return recs[0], nil
	}
	ctx, cancel := context.WithTimeout(ctx, sentLookupTimeout)
	defer cancel()
	r, err := p.sentFinds.do(ctx, k)
	if err != nil {
		return nil, err
	}
	return r.rec, r.err
}

// idempotent decides, before a send is forwarded, whether it repeats an
// earlier one. It answers the call itself (replied) with what the first
// send created, or returns an error to answer (a refusal); otherwise the
// call holds its messageId (cl.sent) and goes on.
func (p *Proxy) idempotent(c exchange, cl *call) (replied bool, err error) {
	if p.Sent == nil || cl.lim.IdempotencyWindow <= 0 {
		return false, nil
	}
	if m := cl.req.Method; m != wire.MethodSend && m != wire.MethodStream {
		return false, nil
	}
	id := cl.req.MessageID()
	if id == "" {
		return false, nil
	}
	// The message compared is the one the agent reads: in its version.
	out, err := outbound(cl)
	if err != nil {
		return false, err
	}
	cl.out = out
	sum := out.MessageDigest()
	digest := hex.EncodeToString(sum[:])
	key := contracts.SentKey{ListingID: cl.target.ListingID, OrgID: cl.actor.OrgID, MessageID: sentMessageKey(id)}
	// The wait for a first copy is bounded like the call itself; the
	// context is made only when something waits (a fresh send, looked up
	// in the meter's own log, waits on nothing).
	var ctx context.Context
	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	bounded := func() context.Context {
		if ctx == nil {
			ctx, cancel = context.WithTimeout(p.Base, cl.lim.RequestTimeout)
		}
		return ctx
	}
	waitEnd := cl.req.Method == wire.MethodSend && cl.req.Blocking()
	// reuse moves key from the messageId's first message to the record of
	// this one (reusedSep), once: a second mismatch is a digest collision.
	reused := false
	reuse := func() bool {
		if reused {
			return false
		}
		key.MessageID += reusedSep + digest
		reused = true
		return true
	}
	for {
		now := p.Clock.Now()
		e := p.sentIdx.get(key)
		if e != nil && !e.replaceable(now) {
			if e.digest != digest {
				if !reuse() {
					return false, p.messageIDReused(cl, id)
				}
				continue
			}
			if e.local {
				ch := e.known
				if waitEnd {
					ch = e.done
				}
				select {
				case <-ch:
				case <-bounded().Done():
				}
			}
			v := e.view()
			switch {
			case v.stage == contracts.SentReleased:
				continue // the first copy failed: this one goes
			case v.taskID == "" && !v.hasResult:
				return false, sentStillRunning()
			}
			return true, p.replay(bounded(), c, cl, key, v)
		}
		lookup := p.Base
		if !p.sentLocal {
			lookup = bounded()
		}
		rec, err := p.findSent(lookup, key)
		if err != nil {
			if lookup.Err() != nil {
				return false, sentStillRunning()
			}
			// The store cannot say: the call goes on (as calls do while the
			// database is down), and the lookup is counted.
			p.Logger.WarnContext(lookup, "messageId not checked against other meters' sends: the store did not answer", "trace_id", cl.trace.traceID,
				"listing", key.ListingID, "err", err)
			p.Metrics.sentOutcome(key.ListingID, "unchecked")
			rec = nil
		}
		if rec != nil && e != nil && e.claimID == rec.ClaimID {
			rec = nil // this meter's own claim, which failed: the store may not know yet
		}
		if rec == nil || rec.Replaceable(now) {
			ne := p.newSentEntry(cl, key, digest, now)
			if _, ok := p.sentIdx.put(key, ne, now); !ok {
				continue // a call through this meter claimed it meanwhile
			}
			if rec != nil || p.sentAtOnce {
				// A claim abandoned by a meter that stopped, or any claim in
				// a store shared at once: taken in the store now, as another
				// meter may try too.
				applied, err := p.Sent.RecordSent(bounded(), []contracts.SentMessage{ne.record()}, now)
				if err == nil && !applied[0] {
					ne.end(contracts.SentReleased, "", "", "", nil, false, "")
					continue
				}
			} else {
				p.writeSent(ne, time.Now().Add(sentClaimDelay))
			}
			cl.sent = ne
			if reused {
				// Another message under a messageId this org sent before:
				// a new send, counted so the buyer can find the client that
				// reuses its ids.
				cl.reusedID = true
				p.Metrics.sentOutcome(key.ListingID, "reused_id")
			}
			return false, nil
		}
		if rec.Digest != digest {
			if !reuse() {
				return false, p.messageIDReused(cl, id)
			}
			continue
		}
		v := sentView{stage: rec.Stage, taskID: rec.TaskID, contextID: rec.ContextID, state: rec.State, result: rec.Result,
			resultVersion: wire.Version(rec.ResultVersion), hasResult: rec.Result != nil}
		if rec.Stage == contracts.SentDone {
			p.rememberSent(rec, v, now)
			return true, p.replay(bounded(), c, cl, key, v)
		}
		if rec.TaskID != "" {
			return true, p.replay(bounded(), c, cl, key, v) // running elsewhere: its current state
		}
		// Claimed through another meter, which has not learned the task
		// yet: wait for it.
		t := time.NewTimer(sentPoll)
		select {
		case <-bounded().Done():
			t.Stop()
			return false, sentStillRunning()
		case <-t.C:
		}
	}
}

// newSentEntry is a call's claim of a messageId.
func (p *Proxy) newSentEntry(cl *call, key contracts.SentKey, digest string, now time.Time) *sentEntry {
	hold := cl.lim.RequestTimeout + 5*time.Second
	if cl.req.Method.Streaming() {
		hold += cl.lim.StreamIdleTimeout
	}
	e := &sentEntry{key: key, digest: digest, claimID: "snd_" + randomHex(12), contract: cl.contract.ID, claimedAt: now,
		heldUntil: now.Add(hold), expires: now.Add(cl.lim.IdempotencyWindow), local: true,
		done: make(chan struct{}), known: make(chan struct{}), stage: contracts.SentInFlight}
	if id := cl.req.TaskID(); id != "" {
		// A message to a task the caller owns: its task is known at once.
		e.taskID = id
	}
	return e
}

// rememberSent keeps a send that ended, read from the store, in the index.
func (p *Proxy) rememberSent(rec *contracts.SentMessage, v sentView, now time.Time) {
	e := &sentEntry{key: rec.SentKey, digest: rec.Digest, claimID: rec.ClaimID, contract: rec.ContractID, claimedAt: rec.ClaimedAt,
		heldUntil: rec.HeldUntil, expires: rec.ExpiresAt, stage: contracts.SentDone, sentView: v}
	if len(v.result) > keptResultBytes {
		e.result = nil
	}
	p.sentIdx.put(rec.SentKey, e, now)
}

// sentLearned is called once the agent answered a send that holds its
// messageId with its task (or a message): a retry waiting for the task
// can go on, and another meter's finds the task while a stream runs.
func (p *Proxy) sentLearned(cl *call) {
	e := cl.sent
	if e == nil || (cl.obs.taskID == "" && cl.sentResult == nil) {
		return
	}
	cl.sentAcked = true
	if e.learn(cl.obs.taskID, cl.obs.contextID, cl.obs.state) && cl.req.Method.Streaming() {
		p.writeSent(e, time.Time{})
	}
}

// sentEnded closes a call's hold on its messageId and returns what its
// usage row records of it: the send is done when the agent took the
// message (answered with a task or a message, or a stream named its
// task before it failed); a call that ended without that frees the
// messageId for the next copy.
func (p *Proxy) sentEnded(cl *call, u *metering.Usage) *metering.Sent {
	e := cl.sent
	cl.sent = nil
	done := cl.sentAcked && (cl.obs.taskID != "" || cl.sentResult != nil)
	stage := contracts.SentReleased
	if done {
		stage = contracts.SentDone
	}
	kept := cl.sentResult
	if len(kept) > keptResultBytes {
		kept = nil
	}
	e.end(stage, u.TaskID, u.ContextID, u.State, kept, cl.sentResult != nil, cl.sentResultVersion)
	if p.sentAtOnce && (!done || u.TaskID != "" || kept != nil) {
		// Other meters see the end now, not once the row is projected (a
		// message answer too large to keep here is left to the row).
		p.queueSent(sentWrite{e: e, ended: true})
	}
	s := &metering.Sent{MessageID: e.key.MessageID, Digest: e.digest, ClaimID: e.claimID, ClaimedAt: e.claimedAt,
		HeldUntil: e.heldUntil, ExpiresAt: e.expires, Done: done}
	if done && cl.sentResult != nil {
		s.Result, s.ResultVersion = cl.sentResult, string(cl.sentResultVersion)
	}
	return s
}

// sentRecords are the records of sent messages that spooled rows carry,
// as the store keeps them (Project).
func sentRecords(rows []metering.Usage) []contracts.SentMessage {
	var out []contracts.SentMessage
	for i := range rows {
		u := &rows[i]
		s := u.Sent
		if s == nil {
			continue
		}
		r := contracts.SentMessage{SentKey: contracts.SentKey{ListingID: u.ListingID, OrgID: u.BuyerOrgID, MessageID: s.MessageID},
			ContractID: u.ContractID, Digest: s.Digest, ClaimID: s.ClaimID, Stage: contracts.SentReleased,
			ClaimedAt: s.ClaimedAt, HeldUntil: s.HeldUntil, ExpiresAt: s.ExpiresAt}
		if s.Done {
			r.Stage, r.TaskID, r.ContextID, r.State = contracts.SentDone, u.TaskID, u.ContextID, u.State
			r.Result, r.ResultVersion = s.Result, s.ResultVersion
		}
		out = append(out, r)
	}
	return out
}

// messageIDReused refuses a send whose messageId was sent before with
// another message.
func (p *Proxy) messageIDReused(cl *call, id string) error {
	p.Metrics.sentOutcome(cl.target.ListingID, "refused")
	return rpcErr(CodeMessageIDReused, http.StatusOK, fmt.Sprintf("messageId %q was sent to this listing before (within the last %s) with another message; "+
		"a retry must repeat the message exactly, and a new message needs a new messageId", id, cl.lim.IdempotencyWindow))
}

func sentStillRunning() error {
	return rpcErr(CodeUpstreamTimeout, http.StatusOK, "the first send of this messageId is still in progress and the agent named no task yet; retry later (it is not forwarded again)")
}

// replay answers a send that repeats an earlier one with what the first
// created: the message the agent answered, or its task in its current
// state, fetched from the agent (a blocking send waits, polling, until the
// task ends or pauses, as long as wait lasts: the request timeout). Its
// usage row (method "replay:<method>") bills nothing.
func (p *Proxy) replay(wait context.Context, c exchange, cl *call, key contracts.SentKey, v sentView) error {
	cl.replayed = true
	cl.label = "replay:" + cl.req.Name
	cl.inlinePush = nil // the first copy registered its own
	p.Metrics.sentOutcome(key.ListingID, "replayed")
	// Each step gets the call's own time, even once the wait is over: the
	// answer is the task as it is then.
	step := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	}
	ctx := p.Base
	if v.taskID == "" {
		result, ver := v.result, v.resultVersion
		if result == nil {
			sctx, cancel := step()
			recs, err := p.Sent.FindSent(sctx, []contracts.SentKey{key}, p.Clock.Now())
			cancel()
			if err != nil {
				return p.fail(c, cl, err)
			}
			if recs[0] == nil || recs[0].Result == nil {
				return p.fail(c, cl, sentStillRunning())
			}
			result, ver = recs[0].Result, wire.Version(recs[0].ResultVersion)
		}
		cl.obs.add(wire.Observe(ver, wire.MethodSend, result))
		out, err := wire.TranslateResult(ver, cl.req.Version, cl.req.Method, result)
		if err != nil {
			return p.fail(c, cl, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's answer could not be translated: "+err.Error()))
		}
		return p.replayAnswer(ctx, c, cl, out)
	}
	sctx, cancel := step()
	b, err := p.owners.Lookup(sctx, key.ListingID, v.taskID)
	cancel()
	if err != nil && !isNotFound(err) {
		return p.fail(c, cl, err)
	}
	if err != nil || !mayRelay(b, cl.actor.OrgID) {
		return p.fail(c, cl, wire.TaskNotFound(v.taskID))
	}
	cl.obs.taskID, cl.obs.contextID, cl.obs.bound = v.taskID, v.contextID, true
	waitEnd := cl.req.Method == wire.MethodSend && cl.req.Blocking()
	var last []byte
	for {
		sctx, cancel := step()
		result, agentErr, err := p.currentTask(sctx, cl, v.taskID)
		cancel()
		switch {
		case err != nil && last == nil:
			return p.fail(c, cl, err)
		case agentErr != nil && last == nil:
			cl.errCode = agentErr.Code
			return p.replyError(ctx, c, cl, wire.TranslateError(cl.upVersion, cl.req.Version, agentErr))
		case err == nil && agentErr == nil:
			ob := wire.Observe(cl.upVersion, wire.MethodGetTask, result)
			if ob.TaskID != v.taskID {
				return p.fail(c, cl, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent answered a GetTask with another task"))
			}
			cl.obs.add(ob)
			last = bytes.Clone(result)
			if !waitEnd || ob.Terminal || ob.Interrupted || wait.Err() != nil {
				return p.replayTask(ctx, c, cl, last)
			}
		}
		if wait.Err() != nil {
			return p.replayTask(ctx, c, cl, last) // the last state read: this one failed
		}
		t := time.NewTimer(min(p.Limits.SettleInterval, time.Second))
		select {
		case <-wait.Done():
			t.Stop() // one more reading, then the answer
		case <-t.C:
		}
	}
}

// currentTask asks the agent for a task (GetTask in its version and
// binding).
func (p *Proxy) currentTask(ctx context.Context, cl *call, taskID string) ([]byte, *wire.Error, error) {
	body, err := wire.TaskRequest(cl.upVersion, wire.MethodGetTask, taskID, nil)
	if err != nil {
		return nil, nil, err
	}
	header := ""
	if cl.upVersion == wire.V10 {
		header = "1.0"
	}
	r, werr := wire.ParseRequest(body, header)
	if werr != nil {
		return nil, nil, werr
	}
	return p.callAgent(ctx, cl, r)
}

// replayTask answers a task (the agent's GetTask answer) as the result of
// the buyer's send.
func (p *Proxy) replayTask(ctx context.Context, c exchange, cl *call, task []byte) error {
	out, err := wire.TaskAsSendResult(cl.upVersion, cl.req.Version, task)
	if err != nil {
		return p.fail(c, cl, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's task could not be answered: "+err.Error()))
	}
	return p.replayAnswer(ctx, c, cl, out)
}

// replayAnswer answers a replayed send's result (in the buyer's version):
// a stream gets it as its one event, then ends.
func (p *Proxy) replayAnswer(ctx context.Context, c exchange, cl *call, result []byte) error {
	if !cl.req.Method.Streaming() {
		return p.answer(ctx, c, cl, result)
	}
	out := p.renderEvent(cl, result)
	cl.bytesOut = len(out)
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	return c.Answer(http.StatusOK, "text/event-stream", out, "Cache-Control", "no-cache", "traceparent", cl.trace.header())
}

// pruneSent deletes the records whose window ended.
func (p *Proxy) pruneSent(ctx context.Context, now time.Time) {
	if p.Sent == nil {
		return
	}
	if n, err := p.Sent.PruneSent(ctx, now); err != nil && ctx.Err() == nil {
		// The next prune, an hour on (RunTaskSweeper), takes them: they
		// only take room meanwhile, as an expired record frees its
		// messageId all the same (SentMessage.Replaceable).
		p.Logger.WarnContext(ctx, "expired sent messages not pruned", "err", err)
	} else if n > 0 {
		p.Logger.InfoContext(ctx, "expired sent messages pruned", "records", n)
	}
}
