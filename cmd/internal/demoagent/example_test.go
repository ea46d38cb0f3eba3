package demoagent_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
)

// An agent learns its URL once it listens; the card advertises that URL.
func Example() {
	cfg := demoagent.Presets()[0] // the Summarizer: A2A 0.3, reports usage
	cfg.StepDelay = 0
	agent := demoagent.New(cfg)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: agent}
	go srv.Serve(ln)
	defer srv.Close()
	agent.SetBaseURL("http://" + ln.Addr().String() + "/")

	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message",
		"messageId":"m-1","role":"user","parts":[{"kind":"text","text":"Read the quarterly report"}]}}}`
	resp, err := http.Post("http://"+ln.Addr().String()+"/", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Status    struct{ State string }
			Artifacts []struct{ Parts []struct{ Text string } }
			Metadata  map[string]demoagent.Usage
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		panic(err)
	}
	var text strings.Builder
	for _, p := range out.Result.Artifacts[0].Parts {
		text.WriteString(p.Text)
	}
	fmt.Println(out.Result.Status.State)
	fmt.Println(text.String())
	fmt.Printf("%+v\n", out.Result.Metadata[demoagent.UsageExtensionURI])
	// Output:
	// completed
	// Summary of 4 words: Read the quarterly report
	// {InputTokens:4 OutputTokens:8 ComputeMs:56 Model:demo-summarizer-1}
}
