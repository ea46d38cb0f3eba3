package a2aproxy_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/contracts"
)

// openSpans counts the spans started and not ended.
type openSpans struct{ open atomic.Int64 }

func (o *openSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) { o.open.Add(1) }
func (o *openSpans) OnEnd(sdktrace.ReadOnlySpan)                     { o.open.Add(-1) }
func (o *openSpans) Shutdown(context.Context) error                  { return nil }
func (o *openSpans) ForceFlush(context.Context) error                { return nil }

// sweepLife hands the sweeper one paused task, once.
type sweepLife struct {
	coreLife
	once sync.Once
}

func (l *sweepLife) DueTasks(context.Context, time.Time, time.Time, int) ([]contracts.DueTask, error) {
	var due []contracts.DueTask
	l.once.Do(func() {
		since := time.Now().Add(-time.Hour)
		due = []contracts.DueTask{{TaskBinding: contracts.TaskBinding{ListingID: "lst_core", TaskID: "task-9", OrgID: "org_acme", ContractID: "ctr_core"},
			Why: "pause", PausedSince: &since, Attempts: 1}}
	})
	return due, nil
}

func (l *sweepLife) RequestCancel(context.Context, string, string, string, string, string, time.Time) error {
	return nil
}

// TestSpansOfASweepEnded: the sweeper asks an agent answering 500 where a
// paused task is, then cancels it (500 again): every span it opened is
// ended and exported, the sweep's GetTask as an error.
func TestSpansOfASweepEnded(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	agent.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	exp, open := tracetest.NewInMemoryExporter(), &openSpans{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(open), sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	life := &sweepLife{}
	p, m := newCoreProxy(t, agent, nil)
	p.Tasks = life
	p.Tracer = tp.Tracer("a2aproxy")
	mountCore(p, m)
	p.Sweep(t.Context())
	if n := open.open.Load(); n != 0 {
		t.Errorf("%d spans left open after the sweep, want none", n)
	}
	var sweep bool
	for _, s := range spansOfKind(exp.GetSpans(), trace.SpanKindInternal) {
		if s.Name == "a2a sweep" {
			sweep = true
			if _, ok := attrsOf(s)["a2a.error.code"]; !ok {
				t.Errorf("the sweep's span has no error code: %v", attrsOf(s))
			}
		}
	}
	if !sweep {
		t.Errorf("no sweep span exported: %+v", exp.GetSpans())
	}
}
