package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Step is one part of a process's way down, after its HTTP server has
// stopped: flushing the meter's spool, closing the database.
type Step struct {
	Name string
	Run  func(ctx context.Context) error
}

// Server is a Fiber app and the listener it serves.
type Server struct {
	App      *fiber.App
	Listener net.Listener
}

// Serve serves each server's app on its listener (the public one, and the
// operator listener when there is one) until ctx ends or one of them
// fails, then shuts down within budget, logging each part with what it
// took. The servers stop accepting and get half the budget to finish the
// requests under way (streams and slow clients still open then are left
// to the steps, which end the meter); then the steps run in turn with
// whatever remains. A step still running when the budget is spent is
// left behind, logged, and Serve returns: a process never hangs on its
// way out, whatever a dependency does.
func Serve(ctx context.Context, servers []Server, log *slog.Logger, budget time.Duration, steps ...Step) error {
	type ended struct {
		server int
		err    error
	}
	errc := make(chan ended, len(servers))
	for i, s := range servers {
		go func() { errc <- ended{i, s.App.Listener(lingerListener{s.Listener})} }()
	}
	var serveErr error
	failed := -1
	select {
	case e := <-errc:
		serveErr = e.err
		if serveErr != nil {
			failed = e.server
		}
		log.Error("server failed; stopping", "err", serveErr)
	case <-ctx.Done():
	}
	t0 := time.Now()
	deadline := t0.Add(budget)
	log.Info("shutting down", "budget", budget.String())

	if shutErr := shutdown(servers, failed, budget/2); errors.Is(shutErr, context.DeadlineExceeded) {
		log.Warn("http server: requests still open after half the budget; ending them with the process", "took_ms", ms(time.Since(t0)))
	} else if shutErr != nil {
		log.Warn("http server shutdown", "err", shutErr, "took_ms", ms(time.Since(t0)))
	} else {
		log.Info("http server stopped", "took_ms", ms(time.Since(t0)))
	}

	stepCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	for i, s := range steps {
		s0 := time.Now()
		done := make(chan error, 1)
		go func() { done <- s.Run(stepCtx) }()
		// A step that honours ctx returns right at the deadline: a moment
		// of grace lets it say so.
		grace := time.NewTimer(time.Until(deadline) + 100*time.Millisecond)
		select {
		case err := <-done:
			grace.Stop()
			if err != nil {
				log.Warn("shutdown step failed", "step", s.Name, "err", err, "took_ms", ms(time.Since(s0)))
			} else {
				log.Info("shutdown step done", "step", s.Name, "took_ms", ms(time.Since(s0)))
			}
		case <-grace.C:
			left := make([]string, 0, len(steps)-i)
			for _, l := range steps[i:] {
				left = append(left, l.Name)
			}
			log.Error("shutdown budget spent; exiting without waiting", "budget", budget.String(), "unfinished", left, "took_ms", ms(time.Since(t0)))
			return serveErr
		}
	}
	log.Info("stopped", "took_ms", ms(time.Since(t0)))
	return serveErr
}

// shutdown stops every server but the one that failed (-1: none) at
// once, each within timeout.
func shutdown(servers []Server, failed int, timeout time.Duration) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if i == failed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.App.ShutdownWithTimeout(timeout)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
