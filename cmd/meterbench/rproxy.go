package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime/pprof"
	"time"
)

// startReverseProxy serves a plain net/http/httputil reverse proxy to
// target on a free loopback port until ctx ends: the baseline without
// metering. Its transport keeps as many idle connections per host as the
// meter's client, so neither pays for reconnecting.
func startReverseProxy(ctx context.Context, target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go pprof.Do(ctx, pprof.Labels("role", "reverse-proxy"), func(context.Context) {
		_ = srv.Serve(ln) // ends with http.ErrServerClosed at shutdown
	})
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return "http://" + ln.Addr().String() + u.Path, nil
}
