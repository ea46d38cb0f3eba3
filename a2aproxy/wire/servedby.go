package wire

import "bytes"

// ServedByField is the member of the usage extension's object (in a Task's
// or Message's metadata, under UsageExtensionURI) in which the meter names
// the listing whose agent served an answer a fallback served
// (docs/a2a-usage-extension.md).
const ServedByField = "servedBy"

// SetServedBy returns the answer body with listing as the usage
// extension's servedBy in the metadata of the Task or Message it carries:
// a JSON-RPC response's result (a Task or Message, or a 1.0 send's
// {"task"|"message": …}), or an HTTP+JSON body of the same shapes. The
// agent's bytes stay as they were (the reading rule's object rewriter:
// members in their order, values untouched) but for the one member set.
// An answer that carries neither (an error, an event stream, a task list)
// comes back as it is, with false.
func SetServedBy(body []byte, listing string) ([]byte, bool) {
	top, ok := parseObject(bytes.TrimSpace(body))
	if !ok {
		return body, false
	}
	if _, rpc := top.get("jsonrpc"); !rpc {
		if out, ok := servedByIn(top, listing); ok {
			return out, true
		}
		return body, false
	}
	res, ok := top.get("result")
	if !ok {
		return body, false
	}
	obj, ok := parseObject(bytes.TrimSpace(res))
	if !ok {
		return body, false
	}
	out, ok := servedByIn(obj, listing)
	if !ok {
		return body, false
	}
	top.set("result", out)
	return top.bytes(), true
}

// servedByIn sets servedBy in the Task or Message o is or wraps, and
// returns o's bytes; false when o carries neither.
func servedByIn(o *object, listing string) ([]byte, bool) {
	for _, k := range [...]string{"task", "message"} {
		if v, ok := o.get(k); ok && firstByte(v) == '{' {
			inner, ok := parseObject(bytes.TrimSpace(v))
			if !ok {
				return nil, false
			}
			o.set(k, markServed(inner, listing))
			return o.bytes(), true
		}
	}
	_, status := o.get("status")
	id, hasID := o.get("id")
	mid, hasMID := o.get("messageId")
	if status && hasID && !isNull(id) || hasMID && !isNull(mid) {
		return markServed(o, listing), true
	}
	return nil, false
}

// markServed sets listing as servedBy in the usage extension's object of
// o's metadata (made when absent or not an object) and returns o's bytes.
func markServed(o *object, listing string) []byte {
	md := &object{}
	if v, ok := o.get("metadata"); ok {
		if m, ok := parseObject(bytes.TrimSpace(v)); ok {
			md = m
		}
	}
	ext := &object{}
	if v, ok := md.get(UsageExtensionURI); ok {
		if e, ok := parseObject(bytes.TrimSpace(v)); ok {
			ext = e
		}
	}
	ext.set(ServedByField, quote(listing))
	md.set(UsageExtensionURI, ext.bytes())
	o.set("metadata", md.bytes())
	return o.bytes()
}
