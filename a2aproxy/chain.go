package a2aproxy

// The meter's call path is a chain of stages, composed once (Init) and run
// on every buyer's call, the way Caddy's handler chain or Envoy's HTTP
// filters compose theirs: each stage is one concern with its own state,
// and either answers the call itself (returns an error: the call is
// refused, and serve answers it in the buyer's binding and meters it when
// it got far enough to be attributed) or hands it to the next stage, and
// may act on what comes back. The last handler forwards the call (unary,
// stream, push configs, task lists) and answers it itself.
//
// In order (stages.go):
//
//	traced       the call's server span, with a Tracer only (traced.go)
//	gate         the meter can record usage; the projections keep up (pace, hold)
//	authenticate the bearer key → the caller's org and key
//	invokers     the key's role may invoke listings in its org
//	entitle      the listing, its limits, the org's open contract, casbin's grant
//	decode       the body's size, the request parsed by the reading rule, push support
//	route        the frozen plan, the agent's interface (its binding and version)
//	fallback     a new task the listing's agent took nothing of goes to the
//	             subscription's first fallback that takes it, through this
//	             chain again from entitle; a call on a task a fallback holds
//	             goes there (fallback.go)
//	ownership    every task the request names is the caller's
//	killswitch   no kill switch is on for the listing, its seller, the org,
//	             the key or the task (killswitch.go)
//	limit        rate limits of the key, subscription, org and listing;
//	             session caps per contextId (ratelimit.go)
//	reserve      the key's and the contract's monthly budgets: a reservation
//	             held until the call ends (reserve.go)
//	credit       the org's prepaid credit in the plan's currency: a
//	             reservation burned when the call ends (credit.go)
//	idempotency  a send's messageId sent before is answered from the first send
//	balance      the endpoint among the listing's (balance.go)
//
// Routing among endpoints and tracing come as stages of this chain
// (issues 26, 27): a policy is a stage, not a method of Proxy.

// handler runs a call from a point of the chain on.
type handler func(cl *call) error

// stage is one step of the chain.
type stage interface {
	serve(cl *call, next handler) error
}

// compose returns the handler that runs stages in order, then last. The
// closures are made once, not per call.
func compose(last handler, stages ...stage) handler {
	h := last
	for i := len(stages) - 1; i >= 0; i-- {
		s, next := stages[i], h
		h = func(cl *call) error { return s.serve(cl, next) }
	}
	return h
}
