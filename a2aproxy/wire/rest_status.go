package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// The REST status table: which HTTP status, google.rpc.Code and
// ErrorInfo reason each JSON-RPC error code travels under (RESTError),
// and the same table read backwards for an agent's REST error
// (codeForReason, codeForStatus).

// RESTError is the REST answer to a failed call in version v: the HTTP
// status and the body. A nil e is an internal error.
//
// The body is a google.rpc.Status
// ({"error":{"code":<http>,"status":<google.rpc.Code>,"message",
// "details":[ErrorInfo{reason,domain,metadata}, ...]}}); error data that
// is already a list of typed details is carried as the details, other
// data as a google.protobuf.Value detail. 0.3 defined no REST error body;
// its SDKs read the bare JSON-RPC error ({code,message,data}, a2a-js) or
// only the status (a2a-python), so a 0.3 body carries both: the
// google.rpc.Status under "error" and the JSON-RPC code, message and data
// at the top level.
//
//	code    HTTP status  google.rpc.Code     ErrorInfo.reason                    domain
//	-32700  400          INVALID_ARGUMENT    JSON_PARSE                          a2a-protocol.org
//	-32600  400          INVALID_ARGUMENT    INVALID_REQUEST                     a2a-protocol.org
//	-32601  404          NOT_FOUND           METHOD_NOT_FOUND                    a2a-protocol.org
//	-32602  400          INVALID_ARGUMENT    INVALID_PARAMS                      a2a-protocol.org
//	-32603  500          INTERNAL            INTERNAL_ERROR                      a2a-protocol.org
//	-32001  404          NOT_FOUND           TASK_NOT_FOUND                      a2a-protocol.org
//	-32002  400          FAILED_PRECONDITION TASK_NOT_CANCELABLE                 a2a-protocol.org
//	-32003  400          FAILED_PRECONDITION PUSH_NOTIFICATION_NOT_SUPPORTED     a2a-protocol.org
//	-32004  400          FAILED_PRECONDITION UNSUPPORTED_OPERATION               a2a-protocol.org
//	-32005  400          INVALID_ARGUMENT    CONTENT_TYPE_NOT_SUPPORTED          a2a-protocol.org
//	-32006  500          INTERNAL            INVALID_AGENT_RESPONSE              a2a-protocol.org
//	-32007  400          FAILED_PRECONDITION EXTENDED_AGENT_CARD_NOT_CONFIGURED  a2a-protocol.org
//	-32008  400          FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED          a2a-protocol.org
//	-32009  400          FAILED_PRECONDITION VERSION_NOT_SUPPORTED               a2a-protocol.org
//	-32040  401          UNAUTHENTICATED     UNAUTHENTICATED                     agentmarket.dev
//	-32041  403          PERMISSION_DENIED   NOT_ENTITLED                        agentmarket.dev
//	-32042  402          RESOURCE_EXHAUSTED  BUDGET_EXHAUSTED                    agentmarket.dev
//	-32043  404          NOT_FOUND           LISTING_UNAVAILABLE                 agentmarket.dev
//	-32044  503          UNAVAILABLE         BUDGET_UNCHECKED                    agentmarket.dev
//	-32050  502          UNAVAILABLE         UPSTREAM_UNREACHABLE                agentmarket.dev
//	-32051  504          DEADLINE_EXCEEDED   UPSTREAM_TIMEOUT                    agentmarket.dev
//	-32052  502          RESOURCE_EXHAUSTED  RESULT_TOO_LARGE                    agentmarket.dev
//	-32053  413          RESOURCE_EXHAUSTED  REQUEST_TOO_LARGE                   agentmarket.dev
//	-32054  504          DEADLINE_EXCEEDED   STREAM_IDLE                         agentmarket.dev
//	-32055  502          FAILED_PRECONDITION UPSTREAM_REFUSED                    agentmarket.dev
//	-32056  502          INTERNAL            AGENT_TASK_CONFLICT                 agentmarket.dev
//	-32057  503          UNAVAILABLE         METER_UNAVAILABLE                   agentmarket.dev
//	-32058  503          UNAVAILABLE         METER_BUSY                          agentmarket.dev
//	-32059  409          ALREADY_EXISTS      MESSAGE_ID_REUSED                   agentmarket.dev
//	other   500          UNKNOWN             UNKNOWN_ERROR, metadata {"code"}    agentmarket.dev
//
// The A2A rows are §5.4's. A spent budget is 402, not 429: 429 invites
// automatic retries, and a monthly budget does not come back in seconds.
func RESTError(v Version, e *Error) (status int, body []byte) {
	if e == nil {
		e = InternalError("")
	}
	info := restErrorOf(e.Code)
	data := errorDataJSON(e.Data)
	b := make([]byte, 0, 256+2*len(e.Message)+2*len(data))
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(info.http), 10)
	b = append(b, `,"status":"`...)
	b = append(b, info.status...)
	b = append(b, `","message":`...)
	msg := quote(e.Message)
	b = append(b, msg...)
	b = append(b, `,"details":`...)
	b = appendDetails(b, e.Code, info, data)
	b = append(b, '}')
	if v == V03 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
		b = append(b, `,"message":`...)
		b = append(b, msg...)
		if data != nil {
			b = append(b, `,"data":`...)
			b = append(b, data...)
		}
	}
	return info.http, compact(append(b, '}'))
}

// RESTErrorEvent is an SSE event ("event: error" and the RESTError body as
// data, with its blank line) reporting an error in the middle of a REST
// stream, as the reference SDKs send and read it.
func RESTErrorEvent(v Version, e *Error) []byte {
	_, body := RESTError(v, e)
	b := make([]byte, 0, len(body)+24)
	b = append(b, "event: error\ndata: "...)
	b = append(b, body...)
	return append(b, "\n\n"...)
}

const (
	a2aDomain         = "a2a-protocol.org"
	marketplaceDomain = "agentmarket.dev"
	errorInfoType     = "type.googleapis.com/google.rpc.ErrorInfo"
	valueType         = "type.googleapis.com/google.protobuf.Value"
)

// restErr is one row of the REST error table.
type restErr struct {
	code   int
	http   int
	status string // google.rpc.Code
	reason string // google.rpc.ErrorInfo reason
	domain string
}

var restErrors = [...]restErr{
	{CodeParseError, 400, "INVALID_ARGUMENT", "JSON_PARSE", a2aDomain},
	{CodeInvalidRequest, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", a2aDomain},
	{CodeMethodNotFound, 404, "NOT_FOUND", "METHOD_NOT_FOUND", a2aDomain},
	{CodeInvalidParams, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", a2aDomain},
	{CodeInternalError, 500, "INTERNAL", "INTERNAL_ERROR", a2aDomain},
	{CodeTaskNotFound, 404, "NOT_FOUND", "TASK_NOT_FOUND", a2aDomain},
	{CodeTaskNotCancelable, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", a2aDomain},
	{CodePushNotificationNotSupported, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED", a2aDomain},
	{CodeUnsupportedOperation, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION", a2aDomain},
	{CodeContentTypeNotSupported, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", a2aDomain},
	{CodeInvalidAgentResponse, 500, "INTERNAL", "INVALID_AGENT_RESPONSE", a2aDomain},
	{CodeExtendedCardNotConfigured, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", a2aDomain},
	{CodeExtensionSupportRequired, 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", a2aDomain},
	{CodeVersionNotSupported, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", a2aDomain},
	{CodeUnauthorized, 401, "UNAUTHENTICATED", "UNAUTHENTICATED", marketplaceDomain},
	{CodeNotEntitled, 403, "PERMISSION_DENIED", "NOT_ENTITLED", marketplaceDomain},
	{CodeBudgetExhausted, 402, "RESOURCE_EXHAUSTED", "BUDGET_EXHAUSTED", marketplaceDomain},
	{CodeListingUnavailable, 404, "NOT_FOUND", "LISTING_UNAVAILABLE", marketplaceDomain},
	{CodeBudgetUnchecked, 503, "UNAVAILABLE", "BUDGET_UNCHECKED", marketplaceDomain},
	{CodeRateLimited, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED", marketplaceDomain},
	{CodeSessionCapped, 429, "RESOURCE_EXHAUSTED", "SESSION_CAPPED", marketplaceDomain},
	{CodeUpstreamUnreachable, 502, "UNAVAILABLE", "UPSTREAM_UNREACHABLE", marketplaceDomain},
	{CodeUpstreamTimeout, 504, "DEADLINE_EXCEEDED", "UPSTREAM_TIMEOUT", marketplaceDomain},
	{CodeResultTooLarge, 502, "RESOURCE_EXHAUSTED", "RESULT_TOO_LARGE", marketplaceDomain},
	{CodeRequestTooLarge, 413, "RESOURCE_EXHAUSTED", "REQUEST_TOO_LARGE", marketplaceDomain},
	{CodeStreamIdle, 504, "DEADLINE_EXCEEDED", "STREAM_IDLE", marketplaceDomain},
	{CodeUpstreamRefused, 502, "FAILED_PRECONDITION", "UPSTREAM_REFUSED", marketplaceDomain},
	{CodeAgentTaskConflict, 502, "INTERNAL", "AGENT_TASK_CONFLICT", marketplaceDomain},
	{CodeMeterUnavailable, 503, "UNAVAILABLE", "METER_UNAVAILABLE", marketplaceDomain},
	{CodeMeterBusy, 503, "UNAVAILABLE", "METER_BUSY", marketplaceDomain},
	{CodeMessageIDReused, 409, "ALREADY_EXISTS", "MESSAGE_ID_REUSED", marketplaceDomain},
	{CodeSwitchedOff, 403, "PERMISSION_DENIED", "SWITCHED_OFF", marketplaceDomain},
	{CodeCreditExhausted, 402, "RESOURCE_EXHAUSTED", "CREDIT_EXHAUSTED", marketplaceDomain},
}

// unknownReason is the reason of codes outside the table; the code goes
// in the ErrorInfo metadata so it can be read back.
const unknownReason = "UNKNOWN_ERROR"

func restErrorOf(code int) restErr {
	for _, e := range restErrors {
		if e.code == code {
			return e
		}
	}
	return restErr{code, 500, "UNKNOWN", unknownReason, marketplaceDomain}
}

// errorDataJSON is an error's data as JSON, nil when there is none.
func errorDataJSON(d any) []byte {
	var b []byte
	switch x := d.(type) {
	case nil:
		return nil
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = marshalNoEscape(d); err != nil {
			return nil
		}
	}
	b = bytes.TrimSpace(b)
	if isNull(b) || !validJSON(b) {
		return nil
	}
	return compact(b)
}

// typedDetails returns the elements of data when it is an array of typed
// detail objects (each with a string "@type"), as 1.0 error data is.
func typedDetails(data []byte) ([][]byte, bool) {
	els, ok := splitArray(data, nil)
	if !ok {
		return nil, false
	}
	for _, el := range els {
		var buf [6]member
		ms, ok := splitObject(el, buf[:0])
		if !ok {
			return nil, false
		}
		typed := false
		for _, m := range ms {
			if m.is("@type") {
				_, typed = unquote(m.val)
			}
		}
		if !typed {
			return nil, false
		}
	}
	return els, true
}

// appendDetails appends the details array: the error's own typed details,
// after an ErrorInfo of the table's reason unless they carry one already;
// data of any other kind as a google.protobuf.Value.
func appendDetails(b []byte, code int, info restErr, data []byte) []byte {
	els, typed := typedDetails(data)
	hasInfo := false
	for _, el := range els {
		if stringMember(el, "@type") == errorInfoType && stringMember(el, "reason") == info.reason {
			hasInfo = true
		}
	}
	b = append(b, '[')
	n := 0
	if !hasInfo {
		b = append(b, `{"@type":"`+errorInfoType+`","reason":"`...)
		b = append(b, info.reason...)
		b = append(b, `","domain":"`...)
		b = append(b, info.domain...)
		b = append(b, '"')
		if info.reason == unknownReason {
			b = append(b, `,"metadata":{"code":"`...)
			b = strconv.AppendInt(b, int64(code), 10)
			b = append(b, `"}`...)
		}
		b = append(b, '}')
		n++
	}
	if typed {
		for _, el := range els {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, el...)
			n++
		}
	} else if data != nil {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"@type":"`+valueType+`","value":`...)
		b = append(b, data...)
		b = append(b, '}')
	}
	return append(b, ']')
}

// codeForReason is the JSON-RPC code of an ErrorInfo reason.
func codeForReason(reason, domain string, info []byte) (int, bool) {
	switch domain {
	case "", a2aDomain:
		switch reason {
		case "PARSE_ERROR", "JSON_PARSE_ERROR":
			return CodeParseError, true
		case "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED": // 0.3's name
			return CodeExtendedCardNotConfigured, true
		}
	case marketplaceDomain:
		if reason == unknownReason {
			var buf [6]member
			ms, _ := splitObject(info, buf[:0])
			for _, m := range ms {
				if m.is("metadata") {
					if n, err := strconv.Atoi(stringMember(m.val, "code")); err == nil {
						return n, true
					}
				}
			}
			return 0, false
		}
	default:
		return 0, false
	}
	for _, e := range restErrors {
		if e.reason == reason && (e.domain == domain || (domain == "" && e.domain == a2aDomain)) {
			return e.code, true
		}
	}
	return 0, false
}

// codeForStatus is the JSON-RPC code of an HTTP error status that says no
// more.
func codeForStatus(m Method, status int) int {
	switch status {
	case http.StatusNotFound:
		if m.TaskScoped() {
			return CodeTaskNotFound
		}
		return CodeMethodNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotFound
	case http.StatusConflict:
		return CodeTaskNotCancelable
	case http.StatusUnsupportedMediaType:
		return CodeContentTypeNotSupported
	case http.StatusUnprocessableEntity:
		return CodeInvalidParams
	case http.StatusNotImplemented:
		return CodeUnsupportedOperation
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return CodeInternalError
	}
	if status >= 400 && status < 500 {
		return CodeInvalidRequest
	}
	return CodeInternalError
}
