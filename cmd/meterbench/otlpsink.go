package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is an OTLP/HTTP receiver that keeps nothing: it reads each
// export whole and answers it with an empty ExportTraceServiceResponse,
// as a collector does, so that -otlp-sink measures the meter with tracing
// on (every span built, batched, encoded and sent) at no cost of a real
// backend's. It counts the exports and their bytes for the report.
type otlpSink struct {
	url            string
	exports, bytes atomic.Int64
	srv            *http.Server
}

func startOTLPSink(ctx context.Context) (*otlpSink, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go s.srv.Serve(l)
	return s, nil
}

func (s *otlpSink) stop() { s.srv.Close() }

// detail is the sink's line among the report's peers.
func (s *otlpSink) detail() string {
	return fmt.Sprintf("OTLP/HTTP at %s (AGENTMARKET_OTEL_ENDPOINT of the meter): %d exports, %d bytes", s.url, s.exports.Load(), s.bytes.Load())
}
