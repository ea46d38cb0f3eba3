package a2aproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// stream forwards a streaming call and relays the agent's SSE events to
// the buyer one by one, as they arrive, never buffering. A buyer who
// leaves stops the relay; the task is then settled by polling the agent so
// its usage is still recorded.
func (p *Proxy) stream(c exchange, cl *call) error {
	ctx, cancel := context.WithCancel(p.Base)
	r, err := outbound(cl)
	if err != nil {
		cancel()
		return p.fail(c, cl, err)
	}
	ar, err := p.upstreamRequest(ctx, cl, r, "text/event-stream")
	if err != nil {
		cancel()
		return p.fail(c, cl, err)
	}
	req, err := ar.httpRequest(ctx)
	if err != nil {
		cancel()
		return p.fail(c, cl, err)
	}
	// The connection itself must come up within the request timeout;
	// afterwards only the idle timeout applies.
	connectTimer := time.AfterFunc(cl.lim.RequestTimeout, cancel)
	res, err := p.send(cl, req)
	connectTimer.Stop()
	if err != nil {
		cl.notTaken = cl.mayFallBack && beforeWork(err)
		cancel()
		return p.fail(c, cl, upstreamErr(ctx, err, cl.lim.RequestTimeout))
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		// The agent answered with a plain response (an error, most often):
		// relay it like a unary answer.
		defer cancel()
		defer res.Body.Close()
		return p.relayPlain(c, cl, res)
	}

	// The request is sent: a held stream keeps only what it answers with.
	cl.id = bytes.Clone(cl.id)
	cl.req.ID = cl.id
	cl.req.DropBody()
	cl.out = nil
	return c.Stream(func(w *bufio.Writer) {
		defer cancel()
		defer res.Body.Close()
		p.relay(ctx, cl, res, w)
	}, "Content-Type", "text/event-stream", "Cache-Control", "no-cache", "X-Accel-Buffering", "no", "traceparent", cl.trace.header())
}

// relay copies events until the agent ends the stream, the buyer leaves,
// or the agent stays silent past the idle timeout. It reads the agent's
// stream on the goroutine it runs on: the heartbeat and the idle timeout
// are timers (the idle one, and a heartbeat that finds the buyer gone,
// close the agent's stream to end the read), so a held stream costs no
// goroutine of its own.
func (p *Proxy) relay(ctx context.Context, cl *call, res *http.Response, w *bufio.Writer) {
	var (
		mu     sync.Mutex // guards w and done, between the relay and the heartbeat
		done   bool
		gone   atomic.Bool // a heartbeat found the buyer gone
		silent atomic.Bool // the idle timeout ran out
	)
	var heartbeat *time.Timer
	heartbeat = time.AfterFunc(p.Limits.Heartbeat, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if _, err := w.WriteString(": keep-alive\n\n"); err != nil || w.Flush() != nil {
			gone.Store(true)
			res.Body.Close()
			return
		}
		heartbeat.Reset(p.Limits.Heartbeat)
	})
	idle := time.AfterFunc(cl.lim.StreamIdleTimeout, func() {
		silent.Store(true)
		res.Body.Close()
	})
	stop := func() {
		idle.Stop()
		mu.Lock()
		done = true
		mu.Unlock()
		heartbeat.Stop()
	}
	var live *liveStream // a kill switch may end it (killswitch.go)
	if p.Switches != nil {
		live = p.Switches.track(cl, res.Body)
		defer p.Switches.untrack(live)
	}
	r := wire.NewSSEReader(res.Body)
	for {
		ev, err := r.Next()
		if err != nil {
			stop()
			switch {
			case live.by() != nil:
				p.endKilledStream(ctx, cl, live.by(), func(e *wire.Error) { p.writeStreamError(w, cl, e) })
			case gone.Load():
				p.settle(cl)
			case silent.Load():
				cl.errCode = CodeStreamIdle
				p.writeStreamError(w, cl, &wire.Error{Code: CodeStreamIdle, Message: fmt.Sprintf("the agent sent nothing for %s", cl.lim.StreamIdleTimeout)})
				p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
			default:
				p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
			}
			return
		}
		idle.Reset(cl.lim.StreamIdleTimeout)
		out, err := p.onEvent(ctx, cl, ev)
		if err != nil {
			stop()
			re := rpcErr(CodeUpstreamInvalid, http.StatusOK, err.Error())
			errors.As(err, &re)
			cl.errCode = re.Code
			p.writeStreamError(w, cl, &wire.Error{Code: re.Code, Message: re.Message})
			p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
			return
		}
		if out == nil {
			continue
		}
		cl.bytesOut += len(out)
		if cl.span != nil {
			cl.span.event()
		}
		mu.Lock()
		_, werr := w.Write(out)
		if werr == nil {
			werr = w.Flush()
		}
		mu.Unlock()
		if werr != nil {
			stop()
			p.settle(cl)
			return
		}
	}
}

// onEvent observes one upstream event and returns the bytes to relay:
// the agent's own bytes when both sides speak the same binding and
// version, else the event rendered in the buyer's binding and version.
func (p *Proxy) onEvent(ctx context.Context, cl *call, ev wire.Event) ([]byte, error) {
	if ev.Comment || len(ev.Data) == 0 {
		return nil, nil
	}
	var result json.RawMessage
	var agentErr *wire.Error
	if cl.upREST() && cl.dialect.agent == wire.DialectSDK03 {
		result, agentErr = wire.FromSDK03Event(cl.req.Method, ev.Data)
	} else if cl.upREST() {
		result, agentErr = wire.FromRESTEvent(cl.upVersion, cl.req.Method, ev.Data)
	} else {
		resp, err := wire.ParseResponse(ev.Data)
		if err != nil {
			return nil, fmt.Errorf("the agent sent a stream event that is not a JSON-RPC response")
		}
		result, agentErr = resp.Result, resp.Error
	}
	if agentErr != nil {
		cl.agentRefused(agentErr)
		if cl.passthrough() {
			return ev.Raw, nil
		}
		return p.streamError(cl, wire.TranslateError(cl.upVersion, cl.req.Version, agentErr)), nil
	}
	ob := wire.Observe(cl.upVersion, cl.req.Method, result)
	cl.obs.add(ob)
	if cl.sent != nil && ob.Kind == wire.KindMessage && cl.obs.taskID == "" && cl.sentResult == nil {
		cl.sentResult, cl.sentResultVersion = bytes.Clone(result), cl.upVersion
	}
	if err := p.bindAnswer(ctx, cl); err != nil {
		return nil, err
	}
	p.noteProgress(cl, ob)
	if cl.passthrough() {
		return ev.Raw, nil
	}
	if cl.upVersion != cl.req.Version {
		tr, err := wire.TranslateResult(cl.upVersion, cl.req.Version, cl.req.Method, result)
		if err != nil {
			return nil, err
		}
		result = tr
	}
	return p.renderEvent(cl, result), nil
}

// renderEvent is a stream event carrying result (in the buyer's version),
// in the buyer's binding.
func (p *Proxy) renderEvent(cl *call, result []byte) []byte {
	if cl.buyerREST() && cl.dialect.buyer == wire.DialectSDK03 {
		return sseData(wire.SDK03Event(cl.req.Method, result))
	}
	if cl.buyerREST() {
		return sseData(wire.RESTEvent(cl.req.Version, cl.req.Method, result))
	}
	return sseData(resultResponse(cl.req.ID, result))
}

func sseData(b []byte) []byte {
	var sb strings.Builder
	_ = wire.WriteEvent(&sb, b)
	return []byte(sb.String())
}

// streamError is an error event in the buyer's binding.
func (p *Proxy) streamError(cl *call, e *wire.Error) []byte {
	switch {
	case cl.sdk03Buyer():
		return wire.SDK03ErrorEvent(e)
	case cl.buyerREST():
		return wire.RESTErrorEvent(cl.req.Version, e)
	}
	return sseData(wire.ErrorResponse(cl.req.ID, e))
}

func (p *Proxy) writeStreamError(w *bufio.Writer, cl *call, e *wire.Error) {
	out := p.streamError(cl, e)
	cl.bytesOut += len(out)
	w.Write(out)
	w.Flush()
}

// relayPlain answers a streaming request the agent answered with JSON.
func (p *Proxy) relayPlain(c exchange, cl *call, res *http.Response) error {
	ctx := res.Request.Context()
	raw, err := readLimited(res, cl.lim.MaxResultBytes)
	if err != nil {
		if _, ok := err.(*rpcError); ok {
			return p.fail(c, cl, err)
		}
		return p.fail(c, cl, upstreamErr(ctx, err, cl.lim.RequestTimeout))
	}
	return p.unaryFrom(ctx, c, cl, agentReply{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), body: raw})
}

// settle follows a task whose buyer left mid-stream: it polls the agent
// (bounded by SettleTimeout) until the task ends, then meters the call
// with everything the agent did.
func (p *Proxy) settle(cl *call) {
	go func() {
		ctx, cancel := context.WithTimeout(p.Base, p.Limits.SettleTimeout)
		defer cancel()
		if cl.obs.taskID != "" && !cl.obs.terminal {
			p.poll(ctx, cl)
		}
		p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	}()
}

func (p *Proxy) poll(ctx context.Context, cl *call) {
	body, err := wire.GetTaskRequest(cl.upVersion, cl.obs.taskID)
	if err != nil {
		return
	}
	header := ""
	if cl.upVersion == wire.V10 {
		header = "1.0"
	}
	get, werr := wire.ParseRequest(body, header)
	if werr != nil {
		return
	}
	t := time.NewTicker(p.Limits.SettleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ar, err := p.upstreamRequest(ctx, cl, get, "application/json")
		if err != nil {
			return
		}
		rep, err := p.roundTrip(ctx, cl, ar, cl.lim.MaxResultBytes, cl.lim.RequestTimeout)
		if err != nil {
			continue
		}
		result, agentErr, err := agentAnswer(cl, wire.MethodGetTask, rep.status, rep.contentType, rep.body)
		if err != nil || agentErr != nil {
			rep.release()
			continue
		}
		ob := wire.Observe(cl.upVersion, wire.MethodGetTask, result)
		rep.release()
		if ob.TaskID != cl.obs.taskID {
			return // not the task asked for: nothing of another task is billed here
		}
		cl.obs.add(ob)
		p.noteProgress(cl, ob)
		if cl.obs.terminal {
			return
		}
	}
}
