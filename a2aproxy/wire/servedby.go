package wire

import (
	"bytes"
	"encoding/json"
)

// ServedByField is the member of the usage extension's object (in a Task's
// or Message's metadata, under UsageExtensionURI) in which the meter names
// the listing whose agent served an answer a fallback served
// (docs/a2a-usage-extension.md).
const ServedByField = "servedBy"

// SetServedBy returns the answer body with listing as the usage
// extension's servedBy in the metadata of the Task or Message it carries:
// a JSON-RPC response's result (a Task or Message, or a 1.0 send's
// {"task"|"message": …}), or an HTTP+JSON body of the same shapes. The
// agent's own members stay, numbers as written. An answer that carries
// neither (an error, an event stream, a task list) comes back as it is,
// with false.
func SetServedBy(body []byte, listing string) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var top map[string]any
	if d.Decode(&top) != nil {
		return body, false
	}
	obj := top
	if _, rpc := top["jsonrpc"]; rpc {
		obj, _ = top["result"].(map[string]any)
	}
	target := carried(obj)
	if target == nil {
		return body, false
	}
	md, _ := target["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		target["metadata"] = md
	}
	ext, _ := md[UsageExtensionURI].(map[string]any)
	if ext == nil {
		ext = map[string]any{}
		md[UsageExtensionURI] = ext
	}
	ext[ServedByField] = listing
	out, err := json.Marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}

// carried is the Task or Message obj is or wraps, nil when none.
func carried(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	for _, k := range [...]string{"task", "message"} {
		if m, ok := obj[k].(map[string]any); ok {
			return m
		}
	}
	if _, ok := obj["status"]; ok && obj["id"] != nil {
		return obj // a Task
	}
	if obj["messageId"] != nil {
		return obj // a Message
	}
	return nil
}
