package wire

// JSON-RPC error codes: the JSON-RPC 2.0 ones and A2A's (§5.4). -32008 and
// -32009 exist only in 1.0.
const (
	CodeParseError                   = -32700
	CodeInvalidRequest               = -32600
	CodeMethodNotFound               = -32601
	CodeInvalidParams                = -32602
	CodeInternalError                = -32603
	CodeTaskNotFound                 = -32001
	CodeTaskNotCancelable            = -32002
	CodePushNotificationNotSupported = -32003
	CodeUnsupportedOperation         = -32004
	CodeContentTypeNotSupported      = -32005
	CodeInvalidAgentResponse         = -32006
	CodeExtendedCardNotConfigured    = -32007
	CodeExtensionSupportRequired     = -32008
	CodeVersionNotSupported          = -32009
)

// The marketplace's own JSON-RPC error codes, in the range A2A leaves to
// implementations (-32000…-32099, clear of A2A's -32001…-32009). They are
// stable: orchestrators may branch on them. docs/a2a-usage-extension.md
// lists them. They live here, not in package a2aproxy (which names them
// too), because the REST status table (RESTError) maps them and this
// package cannot import a2aproxy.
const (
	CodeUnauthorized        = -32040 // missing, unknown or revoked API key
	CodeNotEntitled         = -32041 // no active contract for this listing, or the right was revoked
	CodeBudgetExhausted     = -32042 // the key's or the contract's monthly budget is spent
	CodeListingUnavailable  = -32043 // the listing is not published (suspended, retired, unknown)
	CodeBudgetUnchecked     = -32044 // a budget applies but the spend cannot be read now: retry shortly
	CodeRateLimited         = -32045 // a rate limit (requests, tokens or calls in flight) refused the call: retry after Retry-After
	CodeSessionCapped       = -32046 // the call's contextId reached its subscription's session cap (calls or spend)
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
	CodeSwitchedOff         = -32048 // a kill switch is on for the listing, its seller, the org, the key or the task
	CodeCreditExhausted     = -32049 // the org's prepaid credit (required) cannot cover the call
)
