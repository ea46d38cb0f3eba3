package wire_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestMessageDigest: a send's message digest ignores how the message was
// serialized (whitespace, member order, string escapes, the request
// around it) and tells apart any two messages an agent reads differently.
func TestMessageDigest(t *testing.T) {
	digest := func(t *testing.T, method, msg, extra string) [32]byte {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":` + msg + extra + `}}`
		r, werr := wire.ParseRequest([]byte(body), "")
		if werr != nil {
			t.Fatalf("%s: %v", body, werr)
		}
		return r.MessageDigest()
	}
	base := `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1,2.5,true,null],"a":"x"}}],"metadata":{"k":"v"}}`
	ref := digest(t, "SendMessage", base, "")
	if ref == ([32]byte{}) {
		t.Fatal("zero digest for a send")
	}
	same := []struct{ name, msg, extra string }{
		{"whitespace", "{ \"messageId\" : \"m-1\",\n \"role\":\"ROLE_USER\", \"parts\": [ {\"text\": \"Summarise \\\"Q3\\\" <now>\"} , {\"data\":{\"b\":[1, 2.5, true, null],\"a\":\"x\"}}],\t\"metadata\":{\"k\":\"v\"}}", ""},
		{"member order", `{"parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"a":"x","b":[1,2.5,true,null]}}],"metadata":{"k":"v"},"role":"ROLE_USER","messageId":"m-1"}`, ""},
		{"escapes", `{"messageId":"m\u002d1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" \u003cnow\u003e"},{"data":{"b":[1,2.5,true,null],"\u0061":"x"}}],"metadata":{"k":"v"}}`, ""},
		{"configuration and metadata of the request", base, `,"configuration":{"returnImmediately":true},"metadata":{"trace":"t"}`},
	}
	for _, c := range same {
		if got := digest(t, "SendMessage", c.msg, c.extra); got != ref {
			t.Errorf("%s: another digest for the same message", c.name)
		}
	}
	if got := digest(t, "SendStreamingMessage", base, ""); got != ref {
		t.Error("a stream of the same message has another digest")
	}
	different := []struct{ name, msg string }{
		{"text", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q4\" <now>"},{"data":{"b":[1,2.5,true,null],"a":"x"}}],"metadata":{"k":"v"}}`},
		{"data part", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1,2.5,true],"a":"x"}}],"metadata":{"k":"v"}}`},
		{"part order", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":{"b":[1,2.5,true,null],"a":"x"}},{"text":"Summarise \"Q3\" <now>"}],"metadata":{"k":"v"}}`},
		{"metadata", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1,2.5,true,null],"a":"x"}}],"metadata":{"k":"w"}}`},
		{"key case", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1,2.5,true,null],"A":"x"}}],"metadata":{"k":"v"}}`},
		{"task", `{"messageId":"m-1","role":"ROLE_USER","taskId":"t-1","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1,2.5,true,null],"a":"x"}}],"metadata":{"k":"v"}}`},
		{"number written otherwise", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":[1.0,2.5,true,null],"a":"x"}}],"metadata":{"k":"v"}}`},
		{"string for a number", `{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Summarise \"Q3\" <now>"},{"data":{"b":["1",2.5,true,null],"a":"x"}}],"metadata":{"k":"v"}}`},
	}
	for _, c := range different {
		if got := digest(t, "SendMessage", c.msg, ""); got == ref {
			t.Errorf("%s: the same digest for another message", c.name)
		}
	}
	// Duplicate keys in an object the meter does not read count in their
	// order (parsers differ on which wins).
	d1 := digest(t, "SendMessage", `{"messageId":"m","role":"ROLE_USER","parts":[],"metadata":{"k":1,"k":2}}`, "")
	d2 := digest(t, "SendMessage", `{"messageId":"m","role":"ROLE_USER","parts":[],"metadata":{"k":2,"k":1}}`, "")
	if d1 == d2 {
		t.Error("duplicates in another order: the same digest")
	}
	// 0.3 reads the same way.
	d03 := digest(t, "message/send", `{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}`, "")
	d03b := digest(t, "message/send", `{"parts":[{"text":"hi","kind":"text"}],"role":"user","messageId":"m","kind":"message"}`, "")
	if d03 != d03b || d03 == ([32]byte{}) {
		t.Error("0.3: member order changes the digest")
	}
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`), "")
	if r.MessageDigest() != ([32]byte{}) || r.MessageID() != "" {
		t.Error("a GetTask has a message digest or id")
	}
}

// TestMessageIDRead: the meter reads params.message.messageId (message_id,
// its proto name, renamed to it), and refuses a key an agent could take
// for it beside it.
func TestMessageIDRead(t *testing.T) {
	r, werr := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-\u00e9","role":"ROLE_USER","parts":[]}}}`), "")
	if werr != nil || r.MessageID() != "m-é" {
		t.Fatalf("messageId: %q %v", r.MessageID(), werr)
	}
	for _, msg := range []string{
		`{"messageId":"a","MessageId":"b","role":"ROLE_USER","parts":[]}`,
		`{"messageId":"a","message_id":"b","role":"ROLE_USER","parts":[]}`,
		`{"messageID":"b","role":"ROLE_USER","parts":[]}`,
		`{"messageId":7,"role":"ROLE_USER","parts":[]}`,
	} {
		if _, werr := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":`+msg+`}}`), ""); werr == nil {
			t.Errorf("%s: accepted", msg)
		}
	}
}
