package demoagent_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestStreamGolden pins the exact bytes of one streamed exchange per version:
// the wire format other packages (the meter, its tests) are written against.
func TestStreamGolden(t *testing.T) {
	for _, v := range []string{"0.3", "1.0"} {
		t.Run(v, func(t *testing.T) {
			_, srv := MustStart(t, demoagent.Config{Version: v, ReportUsage: true, Now: fixedNow})
			header := map[string]string{"0.3": "", "1.0": "1.0"}[v]
			msg := message(v, "Hello from AgentMarket", "")
			msg["messageId"] = "msg-1"
			c := newClient(t, srv, header)
			var got bytes.Buffer
			for _, f := range c.stream(method(v, "stream"), map[string]any{"message": msg}) {
				got.Write(f.data)
				got.WriteByte('\n')
			}
			path := filepath.Join("testdata", "stream-"+v+".golden")
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("stream differs from %s:\ngot:\n%s\nwant:\n%s", path, got.Bytes(), want)
			}
		})
	}
}
