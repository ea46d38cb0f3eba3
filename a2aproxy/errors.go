package a2aproxy

import (
	"errors"
	"net/http"

	"github.com/agentmarket/agentmarket"
)

// The marketplace's own JSON-RPC error codes, in the range A2A leaves to
// implementations (-32000…-32099, clear of A2A's -32001…-32009). They are
// stable: orchestrators may branch on them. docs/a2a-usage-extension.md
// lists them.
const (
	CodeUnauthorized        = -32040 // missing, unknown or revoked API key
	CodeNotEntitled         = -32041 // no active contract for this listing, or the right was revoked
	CodeBudgetExhausted     = -32042 // the key's or the contract's monthly budget is spent
	CodeListingUnavailable  = -32043 // the listing is not published (suspended, retired, unknown)
	CodeBudgetUnchecked     = -32044 // a budget applies but the spend cannot be read now: retry shortly
	CodeUpstreamUnreachable = -32050 // the agent could not be reached
	CodeUpstreamTimeout     = -32051 // the agent did not answer within the request timeout
	CodeResultTooLarge      = -32052 // the agent's answer exceeds the result size limit
	CodeRequestTooLarge     = -32053 // the request body exceeds the size limit
	CodeStreamIdle          = -32054 // the agent sent nothing within the stream idle timeout
	CodeUpstreamRefused     = -32055 // the agent's address is one the meter does not connect to (SSRF guard)
	CodeAgentTaskConflict   = -32056 // the agent answered with another organisation's task: the answer was withheld
	CodeMeterUnavailable    = -32057 // the meter cannot record usage now (its spool fails): the call is not forwarded
	CodeMeterBusy           = -32058 // the meter's projections lag too far behind its calls: retry shortly
	CodeMessageIDReused     = -32059 // the messageId was sent before (within the window) with another message
	CodeUpstreamInvalid     = -32006 // A2A InvalidAgentResponse: the agent answered something that is not JSON-RPC
	CodeInternal            = -32603
)

// rpcError is an error answered to the buyer as a JSON-RPC error, with the
// HTTP status it travels under.
type rpcError struct {
	Code    int
	Message string
	Status  int
}

func (e *rpcError) Error() string { return e.Message }

func rpcErr(code int, status int, msg string) *rpcError {
	return &rpcError{Code: code, Message: msg, Status: status}
}

// toRPC maps any error to the JSON-RPC error the buyer gets: the one place
// application error kinds become JSON-RPC codes on this transport.
func toRPC(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return rpcErr(CodeInternal, http.StatusOK, "internal error")
	}
	switch ae.Kind {
	case agentmarket.Unauthorized:
		return rpcErr(CodeUnauthorized, http.StatusUnauthorized, ae.Message)
	case agentmarket.Forbidden:
		return rpcErr(CodeNotEntitled, http.StatusOK, ae.Message)
	case agentmarket.PaymentRequired:
		return rpcErr(CodeBudgetExhausted, http.StatusOK, ae.Message)
	case agentmarket.NotFound:
		return rpcErr(CodeListingUnavailable, http.StatusOK, ae.Message)
	case agentmarket.TooLarge:
		return rpcErr(CodeRequestTooLarge, http.StatusOK, ae.Message)
	case agentmarket.Unavailable:
		return rpcErr(CodeUpstreamUnreachable, http.StatusOK, ae.Message)
	case agentmarket.Invalid:
		return rpcErr(-32602, http.StatusOK, ae.Message)
	}
	return rpcErr(CodeInternal, http.StatusOK, "internal error")
}
