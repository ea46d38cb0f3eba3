package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Error is a JSON-RPC error object. It is also a Go error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data is any JSON value. In 1.0 it is an array of objects, each with
	// an "@type" (§9.5); 0.3 leaves it free. Parsed errors keep it as the
	// json.RawMessage received.
	Data any `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

// errorInfo is a google.rpc.ErrorInfo detail, as 1.0 puts in error data.
func errorInfo(reason string, metadata map[string]string) []any {
	return []any{map[string]any{
		"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
		"reason":   reason,
		"domain":   "a2a-protocol.org",
		"metadata": metadata,
	}}
}

func newError(code int, msg, standard string) *Error {
	if msg == "" {
		msg = standard
	}
	return &Error{Code: code, Message: msg}
}

// The constructors below take a message for humans; "" gives the standard
// message of the code (§9.5, 0.3 §8).

// ParseError is -32700: the body is not JSON.
func ParseError(msg string) *Error { return newError(CodeParseError, msg, "Invalid JSON payload") }

// InvalidRequest is -32600: JSON, but not a valid request.
func InvalidRequest(msg string) *Error {
	return newError(CodeInvalidRequest, msg, "Request payload validation error")
}

// MethodNotFound is -32601.
func MethodNotFound(msg string) *Error { return newError(CodeMethodNotFound, msg, "Method not found") }

// InvalidParams is -32602: params of the wrong shape or missing.
func InvalidParams(msg string) *Error { return newError(CodeInvalidParams, msg, "Invalid parameters") }

// InternalError is -32603.
func InternalError(msg string) *Error { return newError(CodeInternalError, msg, "Internal error") }

// TaskNotFound is the answer for a task that does not exist or that the
// caller may not see; the two must be indistinguishable (§3.3.2).
func TaskNotFound(taskID string) *Error {
	e := &Error{Code: CodeTaskNotFound, Message: "Task not found"}
	if taskID != "" {
		e.Data = errorInfo("TASK_NOT_FOUND", map[string]string{"taskId": taskID})
	}
	return e
}

// TaskNotCancelable is the answer for a task in a state that cannot be
// canceled.
func TaskNotCancelable(taskID string) *Error {
	e := &Error{Code: CodeTaskNotCancelable, Message: "Task cannot be canceled"}
	if taskID != "" {
		e.Data = errorInfo("TASK_NOT_CANCELABLE", map[string]string{"taskId": taskID})
	}
	return e
}

// PushNotificationNotSupported is -32003.
func PushNotificationNotSupported(msg string) *Error {
	return newError(CodePushNotificationNotSupported, msg, "Push Notification is not supported")
}

// UnsupportedOperation is -32004.
func UnsupportedOperation(msg string) *Error {
	return newError(CodeUnsupportedOperation, msg, "This operation is not supported")
}

// ContentTypeNotSupported is -32005.
func ContentTypeNotSupported(msg string) *Error {
	return newError(CodeContentTypeNotSupported, msg, "Incompatible content types")
}

// InvalidAgentResponse is -32006: the agent answered outside the spec.
func InvalidAgentResponse(msg string) *Error {
	return newError(CodeInvalidAgentResponse, msg, "Invalid agent response")
}

// ExtendedCardNotConfigured is -32007.
func ExtendedCardNotConfigured(msg string) *Error {
	return newError(CodeExtendedCardNotConfigured, msg, "Extended agent card not configured")
}

// ExtensionSupportRequired is -32008 (1.0 only).
func ExtensionSupportRequired(msg string) *Error {
	return newError(CodeExtensionSupportRequired, msg, "Extension support required")
}

// VersionNotSupported is -32009 (1.0 only), the answer to a request for a
// version the proxy does not speak; the message and data name the
// supported ones.
func VersionNotSupported(requested string) *Error {
	return &Error{
		Code:    CodeVersionNotSupported,
		Message: fmt.Sprintf("A2A version %q is not supported; supported versions: %s", requested, supported),
		Data: errorInfo("VERSION_NOT_SUPPORTED", map[string]string{
			"requestedVersion":  requested,
			"supportedVersions": supported,
		}),
	}
}

// ErrorResponse is the body of a JSON-RPC error response. An id that is
// missing or not a string or number is answered as null, as JSON-RPC wants
// when the request's id could not be read.
func ErrorResponse(id json.RawMessage, e *Error) []byte {
	if e == nil {
		e = InternalError("")
	}
	ej, err := marshalNoEscape(e)
	if err != nil { // Data that does not marshal is dropped, never the error
		ej, _ = marshalNoEscape(&Error{Code: e.Code, Message: e.Message})
	}
	b := make([]byte, 0, 40+len(id)+len(ej))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"error":`...)
	b = append(b, ej...)
	return append(b, '}')
}

// ResultResponse is the body of a JSON-RPC success response; a missing
// result is null.
func ResultResponse(id, result json.RawMessage) []byte {
	result = bytes.TrimSpace(result)
	b := make([]byte, 0, 40+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"result":`...)
	if len(result) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, result...)
	}
	return append(b, '}')
}

func appendID(b []byte, id json.RawMessage) []byte {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || !validID(id) || !validJSON(id) {
		return append(b, "null"...)
	}
	return append(b, id...)
}

// validID reports whether a JSON value is a string or a number, as a
// request id must be.
func validID(v []byte) bool {
	switch c := firstByte(v); {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return false
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Response is a parsed JSON-RPC response: exactly one of Result and Error
// is set. ID and Result alias the parsed body.
type Response struct {
	ID     json.RawMessage
	Result json.RawMessage // the raw result, "null" when the result is null
	Error  *Error          // Data, when present, is a json.RawMessage
}

// ErrInvalidResponse is wrapped by every error ParseResponse returns.
var ErrInvalidResponse = errors.New("wire: invalid JSON-RPC response")

// ParseResponse reads a JSON-RPC 2.0 response: a unary answer's body, or
// the data of one SSE event. It checks the envelope only (jsonrpc "2.0",
// an id, exactly one of result and error, an error's integer code and
// string message); the result is left raw for Observe and TranslateResult.
func ParseResponse(body []byte) (*Response, error) {
	if !validJSON(body) {
		return nil, fmt.Errorf("%w: not JSON", ErrInvalidResponse)
	}
	var buf [6]member
	ms, ok := splitObject(body, buf[:0])
	if !ok {
		return nil, fmt.Errorf("%w: not an object", ErrInvalidResponse)
	}
	var rpcVersion, id, result, errv []byte
	hasID := false
	for _, m := range ms {
		switch {
		case m.is("jsonrpc"):
			rpcVersion = m.val
		case m.is("id"):
			id, hasID = m.val, true
		case m.is("result"):
			result = m.val
		case m.is("error"):
			errv = m.val
		}
	}
	if s, ok := unquote(rpcVersion); !ok || s != "2.0" {
		return nil, fmt.Errorf(`%w: "jsonrpc" must be "2.0"`, ErrInvalidResponse)
	}
	if !hasID || !(validID(id) || isNull(id)) {
		return nil, fmt.Errorf(`%w: "id" must be a string, a number or null`, ErrInvalidResponse)
	}
	r := &Response{ID: id}
	switch {
	case result != nil && errv != nil:
		return nil, fmt.Errorf(`%w: both "result" and "error"`, ErrInvalidResponse)
	case result != nil:
		r.Result = result
		return r, nil
	case errv != nil:
		var ebuf [4]member
		es, _ := splitObject(errv, ebuf[:0])
		var code, msg, data []byte
		for _, m := range es {
			switch {
			case m.is("code"):
				code = m.val
			case m.is("message"):
				msg = m.val
			case m.is("data"):
				data = m.val
			}
		}
		c, cerr := strconv.Atoi(string(code))
		text, ok := unquote(msg)
		if cerr != nil || !ok {
			return nil, fmt.Errorf(`%w: "error" needs an integer "code" and a string "message"`, ErrInvalidResponse)
		}
		r.Error = &Error{Code: c, Message: text}
		if !isNull(data) {
			r.Error.Data = json.RawMessage(data)
		}
		return r, nil
	}
	return nil, fmt.Errorf(`%w: neither "result" nor "error"`, ErrInvalidResponse)
}
