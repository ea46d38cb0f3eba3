package a2aproxy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOutliers: EjectAfter failures in a row eject an endpoint for a
// backoff that doubles at each ejection in a row; calls meanwhile are
// answered at once; the one call let through after the backoff readmits
// it when it succeeds; a success resets the count; other endpoints are
// not affected.
func TestOutliers(t *testing.T) {
	now := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	o := newOutliers(func() time.Time { return now })
	const ep, other = "http://a.example/rpc", "http://b.example/rpc"
	call := func(endpoint string, out outcome) error {
		p, err := o.admit(endpoint)
		if err == nil {
			o.report(endpoint, p, out)
		}
		return err
	}
	for range EjectAfter - 1 {
		if err := call(ep, failed); err != nil {
			t.Fatal(err)
		}
	}
	call(ep, answered) // resets the count
	for i := range EjectAfter {
		if err := call(ep, failed); err != nil {
			t.Fatalf("failure %d refused: %v", i+1, err)
		}
	}
	if o.Ejections() != 1 {
		t.Fatalf("%d ejections, want 1", o.Ejections())
	}
	err := call(ep, answered)
	until := now.Add(EjectBackoff).Format(time.RFC3339)
	var re *rpcError
	if !errors.As(err, &re) || !beforeWork(err) || re.Code != CodeUpstreamUnreachable ||
		!strings.Contains(re.Message, "the agent could not be reached: the meter ejected its endpoint after 5 failed calls in a row, until "+until) {
		t.Fatalf("a call while ejected: %v", err)
	}
	if err := call(other, answered); err != nil {
		t.Fatalf("another endpoint: %v", err)
	}
	if got := o.ejected(); len(got) != 1 || got[0].URL != ep || got[0].Until.Format(time.RFC3339) != until {
		t.Fatalf("ejected = %+v", got)
	}

	// The backoff over, one call tests it; others wait for its answer.
	now = now.Add(EjectBackoff)
	trial, err := o.admit(ep)
	if err != nil || trial != passTrial {
		t.Fatalf("the trial call: %v %v", trial, err)
	}
	if _, err := o.admit(ep); err == nil {
		t.Fatal("a second call during the trial went through")
	}
	o.report(ep, trial, failed) // ejected again, for twice as long
	if got := o.ejected(); len(got) != 1 || !got[0].Until.Equal(now.Add(2*EjectBackoff)) {
		t.Fatalf("after a failed trial: %+v", got)
	}
	now = now.Add(2 * EjectBackoff)
	trial, _ = o.admit(ep)
	o.report(ep, trial, neutral) // the buyer left: says nothing; another call tests it
	trial, err = o.admit(ep)
	if err != nil || trial != passTrial {
		t.Fatalf("after a neutral trial: %v %v", trial, err)
	}
	o.report(ep, trial, answered)
	if got := o.ejected(); len(got) != 0 || o.watched.Load() != 0 {
		t.Fatalf("readmitted, yet ejected = %+v, watched %d", got, o.watched.Load())
	}
	if p, err := o.admit(ep); err != nil || p != passQuiet {
		t.Fatalf("after readmission: %v %v", p, err)
	}
	if o.Ejections() != 2 {
		t.Fatalf("%d ejections, want 2", o.Ejections())
	}
}

// TestOutliersQuietPathAllocatesNothing: with nothing failing, a call's
// admit and report allocate nothing.
func TestOutliersQuietPathAllocatesNothing(t *testing.T) {
	o := newOutliers(time.Now)
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := o.admit("http://a.example/rpc")
		o.report("http://a.example/rpc", p, answered)
	}); n != 0 {
		t.Fatalf("%v allocations a call", n)
	}
}

// Ejections is the count of outliers, for the tests.
func (o *outliers) Ejections() uint64 { return o.ejections.Load() }

// BenchmarkOutliersQuiet is what ejection adds to a call when nothing
// fails: admit and report.
func BenchmarkOutliersQuiet(b *testing.B) {
	o := newOutliers(time.Now)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := o.admit("http://a.example/rpc")
		o.report("http://a.example/rpc", p, answered)
	}
}
