package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
)

// maxDrain bounds the wait for the spool to drain after the generator
// stopped.
const maxDrain = 5 * time.Minute

// ingestReport is what an ingest run measured.
type ingestReport struct {
	Offered     float64       // rows a second the generator appended
	Shipped     float64       // rows a second shipped while it did
	MaxBacklog  int64         // the most rows waiting in the spool at a sample
	Drain       time.Duration // from the generator's stop to an empty spool
	Rows        int64
	EndBacklog  int64 // rows waiting when the generator stopped
	Sustained   bool  // the shipper kept up: at most a second's rows waited at the end, and they drained within 5 s
	BatchRows   int
	SampleEvery time.Duration
	// CPU time per shipped row, of this process (generator, spool,
	// shipper, driver) and of the usage store's server when -server-pid
	// names it: what the rates would be on an idle machine, whatever else
	// this one ran meanwhile.
	CPUPerRow, ServerCPUPerRow time.Duration
}

// measureIngest appends rows at o.ingestRate to a spool for o.ingestFor
// while a shipper ships them to the store, as a meter at that rate would,
// and reports what the shipper kept up with. The rows are the synthetic
// usage's first 100,000, sent again and again under new ids and the
// current time, so making them costs the generator next to nothing.
func measureIngest(ctx context.Context, o *options, out io.Writer) (*ingestReport, error) {
	s, closeStore, err := openUsage(ctx, o)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.dataDir, "ingest-spool-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sp, err := spool.Open(dir, spool.Options{})
	if err != nil {
		return nil, err
	}
	defer sp.Close()
	sh := spool.NewShipper(sp, s, spool.ShipperOptions{BatchRows: o.batchRows})
	shipCtx, stopShip := context.WithCancel(ctx)
	shipDone := make(chan struct{})
	go func() {
		defer close(shipDone)
		sh.Run(shipCtx)
	}()
	defer func() {
		stopShip()
		<-shipDone
	}()

	g := o.usageRange()
	g.Rows = 100_000
	pool := make([]metering.Usage, g.Rows)
	for i := range pool {
		pool[i] = g.Row(i)
	}
	const tick = 10 * time.Millisecond
	perTick := max(1, o.ingestRate/int(time.Second/tick))
	prefix := "ing_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	rep := &ingestReport{BatchRows: cmp.Or(o.batchRows, batchRows(s)), SampleEvery: time.Second}
	var n int64
	buf := make([]metering.Usage, perTick)
	cpu0, server0 := processCPU(os.Getpid()), processCPU(o.serverPID)
	shipped0 := sh.Stats().ShippedRows
	start := time.Now()
	next := start
	sample := start.Add(rep.SampleEvery)
	for time.Since(start) < o.ingestFor {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		for i := range buf {
			u := pool[int(n)%len(pool)]
			u.ID = prefix + strconv.FormatInt(n, 10)
			u.Time = now
			buf[i] = u
			n++
		}
		if err := sp.Append(buf...); err != nil {
			return nil, err
		}
		if now.After(sample) {
			st := sh.Stats()
			rep.MaxBacklog = max(rep.MaxBacklog, st.SpoolRows)
			fmt.Fprintf(out, "ingest: %5.1fs appended %d, shipped %d, backlog %d\n", time.Since(start).Seconds(), n, st.ShippedRows, st.SpoolRows)
			sample = sample.Add(rep.SampleEvery)
		}
		next = next.Add(tick)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	genTime := time.Since(start)
	atStop := sh.Stats()
	shippedAtStop, endBacklog := int64(atStop.ShippedRows), atStop.SpoolRows
	stop := time.Now()
	for sh.Stats().SpoolRows > 0 {
		if time.Since(stop) > maxDrain {
			fmt.Fprintf(out, "ingest: the spool did not drain within %s (%d rows left)\n", maxDrain, sh.Stats().SpoolRows)
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	rep.Drain = time.Since(stop)
	if rows := int64(sh.Stats().ShippedRows - shipped0); rows > 0 {
		rep.CPUPerRow = (processCPU(os.Getpid()) - cpu0) / time.Duration(rows)
		if o.serverPID > 0 {
			rep.ServerCPUPerRow = (processCPU(o.serverPID) - server0) / time.Duration(rows)
		}
	}
	rep.Rows = n
	rep.Offered = float64(n) / genTime.Seconds()
	rep.Shipped = float64(shippedAtStop) / genTime.Seconds()
	rep.EndBacklog = endBacklog
	rep.Sustained = rep.Drain <= 5*time.Second && float64(endBacklog) <= rep.Offered
	return rep, nil
}

// processCPU is the CPU time (user and system) process pid used so far,
// from /proc; 0 where that cannot be read.
func processCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it count
	// from its closing parenthesis: utime and stime are the 14th and 15th.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, 100 on Linux.
const clockTicks = 100
