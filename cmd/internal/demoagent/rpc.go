package demoagent

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

const maxBody = 1 << 20

// rpcError is a JSON-RPC error. In 1.0 its detail goes in "data" as the
// google.rpc objects the specification names (§9.5); 0.3 gets no data.
type rpcError struct {
	code    int
	message string
	reason  string            // google.rpc.ErrorInfo reason, A2A errors only
	meta    map[string]string // ErrorInfo metadata
	field   string            // google.rpc.BadRequest field, invalid params only
}

func errParse(err error) *rpcError {
	return &rpcError{code: -32700, message: "Invalid JSON payload: " + err.Error()}
}

func errInvalidRequest(format string, args ...any) *rpcError {
	return &rpcError{code: -32600, message: fmt.Sprintf(format, args...)}
}

func errMethodNotFound(method string) *rpcError {
	return &rpcError{code: -32601, message: fmt.Sprintf("Method not found: %q", method)}
}

func errInvalidParams(field, format string, args ...any) *rpcError {
	return &rpcError{code: -32602, message: fmt.Sprintf(format, args...), field: field}
}

func errTaskNotFound(id string) *rpcError {
	return &rpcError{code: -32001, message: fmt.Sprintf("Task not found: %s", id), reason: "TASK_NOT_FOUND", meta: map[string]string{"taskId": id}}
}

func errNotCancelable(id string, st State) *rpcError {
	return &rpcError{code: -32002, message: fmt.Sprintf("Task cannot be canceled: %s is %s", id, st), reason: "TASK_NOT_CANCELABLE", meta: map[string]string{"taskId": id}}
}

func errPushNotSupported() *rpcError {
	return &rpcError{code: -32003, message: "Push Notification is not supported", reason: "PUSH_NOTIFICATION_NOT_SUPPORTED"}
}

func errUnsupported(format string, args ...any) *rpcError {
	return &rpcError{code: -32004, message: fmt.Sprintf(format, args...), reason: "UNSUPPORTED_OPERATION"}
}

func errContentType(format string, args ...any) *rpcError {
	return &rpcError{code: -32005, message: fmt.Sprintf(format, args...), reason: "CONTENT_TYPE_NOT_SUPPORTED"}
}

func errExtendedCardNotConfigured() *rpcError {
	return &rpcError{code: -32007, message: "Authenticated Extended Card not configured", reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED"}
}

func errVersionNotSupported(asked, served string) *rpcError {
	return &rpcError{
		code:    -32009,
		message: fmt.Sprintf("A2A version %s is not supported: this agent speaks %s (send A2A-Version: %s)", asked, served, served),
		reason:  "VERSION_NOT_SUPPORTED",
		meta:    map[string]string{"requestedVersion": asked, "supportedVersions": served},
	}
}

type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []any  `json:"data,omitempty"`
}

func (e *rpcError) wire(ver string) *wireError {
	out := &wireError{Code: e.code, Message: e.message}
	if ver != "1.0" {
		return out
	}
	switch {
	case e.reason != "":
		info := map[string]any{
			"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": e.reason,
			"domain": "a2a-protocol.org",
		}
		if len(e.meta) > 0 {
			info["metadata"] = e.meta
		}
		out.Data = []any{info}
	case e.field != "":
		out.Data = []any{map[string]any{
			"@type":           "type.googleapis.com/google.rpc.BadRequest",
			"fieldViolations": []map[string]string{{"field": e.field, "description": e.message}},
		}}
	}
	return out
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// call is one JSON-RPC request being served.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	id     json.RawMessage
	params json.RawMessage
}

func (a *Agent) reply(c *call, result any) {
	writeJSON(c.w, rpcResponse{JSONRPC: "2.0", ID: c.id, Result: result})
}

func (a *Agent) fail(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	writeJSON(w, rpcResponse{JSONRPC: "2.0", ID: id, Error: e.wire(a.cfg.Version)})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

type operation int

const (
	opSend operation = iota + 1
	opStream
	opGet
	opList
	opCancel
	opSubscribe
	opPush
	opExtendedCard
)

var methods = map[string]map[string]operation{
	"0.3": {
		"message/send":                        opSend,
		"message/stream":                      opStream,
		"tasks/get":                           opGet,
		"tasks/cancel":                        opCancel,
		"tasks/resubscribe":                   opSubscribe,
		"tasks/pushNotificationConfig/set":    opPush,
		"tasks/pushNotificationConfig/get":    opPush,
		"tasks/pushNotificationConfig/list":   opPush,
		"tasks/pushNotificationConfig/delete": opPush,
		"agent/getAuthenticatedExtendedCard":  opExtendedCard,
	},
	"1.0": {
		"SendMessage":                      opSend,
		"SendStreamingMessage":             opStream,
		"GetTask":                          opGet,
		"ListTasks":                        opList,
		"CancelTask":                       opCancel,
		"SubscribeToTask":                  opSubscribe,
		"CreateTaskPushNotificationConfig": opPush,
		"GetTaskPushNotificationConfig":    opPush,
		"ListTaskPushNotificationConfigs":  opPush,
		"DeleteTaskPushNotificationConfig": opPush,
		"GetExtendedAgentCard":             opExtendedCard,
	},
}

func otherVersion(v string) string {
	if v == "0.3" {
		return "1.0"
	}
	return "0.3"
}

func (a *Agent) serveRPC(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.lastHeaders = r.Header.Clone()
	a.mu.Unlock()

	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="demoagent"`)
		http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			a.fail(w, nil, errInvalidRequest("request body exceeds %d bytes", maxBody))
			return
		}
		a.fail(w, nil, errParse(err))
		return
	}
	req, rerr := parseRequest(body)
	if rerr != nil {
		a.fail(w, req.ID, rerr)
		return
	}

	// A missing version means 0.3 (1.0 §3.6.2); an agent answers only in the
	// version it speaks, so a mismatch is VersionNotSupported.
	asked := requestVersion(r)
	if asked != a.cfg.Version {
		a.fail(w, req.ID, errVersionNotSupported(asked, a.cfg.Version))
		return
	}
	op, ok := methods[a.cfg.Version][req.Method]
	if !ok {
		if _, other := methods[otherVersion(a.cfg.Version)][req.Method]; other {
			a.fail(w, req.ID, errInvalidRequest("method %q is A2A %s, but the request is A2A %s", req.Method, otherVersion(a.cfg.Version), a.cfg.Version))
			return
		}
		a.fail(w, req.ID, errMethodNotFound(req.Method))
		return
	}

	if a.cfg.ReportUsage && activates(a.cfg.Version, r.Header) {
		w.Header().Set(extensionHeader(a.cfg.Version), UsageExtensionURI)
	}
	c := &call{w: w, r: r, id: req.ID, params: req.Params}
	switch op {
	case opSend:
		a.send(c)
	case opStream:
		a.streamSend(c)
	case opGet:
		a.get(c)
	case opList:
		a.list(c)
	case opCancel:
		a.cancelTask(c)
	case opSubscribe:
		a.subscribe(c)
	case opPush:
		a.fail(w, c.id, errPushNotSupported())
	case opExtendedCard:
		// 1.0 §3.3.4: a card that does not declare an extended card
		// answers UnsupportedOperation; 0.3 has only "not configured".
		if a.cfg.Version == "0.3" {
			a.fail(w, c.id, errExtendedCardNotConfigured())
		} else {
			a.fail(w, c.id, errUnsupported("this agent has no extended agent card"))
		}
	}
}

// parseRequest reads one JSON-RPC request. On error the returned request
// carries the id when it could be read, so the error can echo it.
func parseRequest(body []byte) (rpcRequest, *rpcError) {
	var req rpcRequest
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		if err == nil {
			err = errors.New("not a JSON value")
		}
		return req, errParse(err)
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return req, errInvalidRequest("the request must be a JSON-RPC request object (batches are not supported)")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return req, errInvalidRequest("%v", err)
	}
	if id, ok := raw["id"]; ok {
		if !validID(id) {
			return req, errInvalidRequest("id must be a string, a number or null")
		}
		req.ID = id
	}
	if err := json.Unmarshal(raw["jsonrpc"], &req.JSONRPC); err != nil || req.JSONRPC != "2.0" {
		return req, errInvalidRequest(`jsonrpc must be "2.0"`)
	}
	if err := json.Unmarshal(raw["method"], &req.Method); err != nil || req.Method == "" {
		return req, errInvalidRequest("method must be a non-empty string")
	}
	req.Params = raw["params"]
	return req, nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	default:
		return string(id) == "null"
	}
}

// requestVersion is the major.minor the request asks for: the A2A-Version
// header, else the query parameter, else 0.3. An unreadable value is
// returned as written, so that it fails the version check.
func requestVersion(r *http.Request) string {
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("A2A-Version"))
	}
	if v == "" {
		return "0.3"
	}
	if mm, ok := majorMinor(v); ok {
		return mm
	}
	return v
}

// majorMinor reduces "0.3.0" or "1.0" to "0.3" or "1.0".
func majorMinor(v string) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(v), ".", 3)
	if len(parts) < 2 {
		return "", false
	}
	var nums [2]int
	for i := range nums {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || strings.Trim(parts[i], "0123456789") != "" {
			return "", false
		}
		nums[i] = n
	}
	return strconv.Itoa(nums[0]) + "." + strconv.Itoa(nums[1]), true
}

// extensionHeader is the header that activates extensions: 0.3 used the
// X- prefix, 1.0 dropped it.
func extensionHeader(ver string) string {
	if ver == "0.3" {
		return "X-A2A-Extensions"
	}
	return "A2A-Extensions"
}

// activates reports whether the request activates the usage extension.
func activates(ver string, h http.Header) bool {
	for _, v := range h.Values(extensionHeader(ver)) {
		for _, uri := range strings.Split(v, ",") {
			if strings.TrimSpace(uri) == UsageExtensionURI {
				return true
			}
		}
	}
	return false
}

func (a *Agent) authorized(r *http.Request) bool {
	if a.cfg.RequireAuth == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(a.cfg.RequireAuth)) == 1
}

// sse writes one stream: each event is a full JSON-RPC response, flushed at
// once so the client sees it before the next one is produced.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	id json.RawMessage
}

func startSSE(w http.ResponseWriter, id json.RawMessage) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w), id: id}
	_ = s.rc.Flush()
	return s
}

func (s *sse) send(result any) error {
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: s.id, Result: result})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return s.rc.Flush()
}
