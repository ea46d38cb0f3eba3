package a2aproxy

import (
	"errors"
	"net/http"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The marketplace's own JSON-RPC error codes, as package wire defines
// them (its codes.go says what each means and lists the numbers once).
const (
	CodeUnauthorized        = wire.CodeUnauthorized
	CodeNotEntitled         = wire.CodeNotEntitled
	CodeBudgetExhausted     = wire.CodeBudgetExhausted
	CodeListingUnavailable  = wire.CodeListingUnavailable
	CodeBudgetUnchecked     = wire.CodeBudgetUnchecked
	CodeRateLimited         = wire.CodeRateLimited
	CodeSessionCapped       = wire.CodeSessionCapped
	CodeUpstreamUnreachable = wire.CodeUpstreamUnreachable
	CodeUpstreamTimeout     = wire.CodeUpstreamTimeout
	CodeResultTooLarge      = wire.CodeResultTooLarge
	CodeRequestTooLarge     = wire.CodeRequestTooLarge
	CodeStreamIdle          = wire.CodeStreamIdle
	CodeUpstreamRefused     = wire.CodeUpstreamRefused
	CodeAgentTaskConflict   = wire.CodeAgentTaskConflict
	CodeMeterUnavailable    = wire.CodeMeterUnavailable
	CodeMeterBusy           = wire.CodeMeterBusy
	CodeMessageIDReused     = wire.CodeMessageIDReused
	CodeSwitchedOff         = wire.CodeSwitchedOff
	CodeCreditExhausted     = wire.CodeCreditExhausted
	CodeUpstreamInvalid     = wire.CodeInvalidAgentResponse // the agent answered something that is not JSON-RPC
	CodeInternal            = wire.CodeInternalError
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
		return rpcErr(wire.CodeInvalidParams, http.StatusOK, ae.Message)
	}
	return rpcErr(CodeInternal, http.StatusOK, "internal error")
}
