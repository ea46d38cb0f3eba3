package agentmarket

// Role is what a user or API key may do within its org. Permissions per
// role live in casbin policies; the role itself is stored on the key or user.
type Role string

const (
	RoleAdmin   Role = "admin"
	RoleSeller  Role = "seller"
	RoleBuyer   Role = "buyer"
	RoleFinance Role = "finance"
)

// Roles lists every role, in the order they are documented.
var Roles = []Role{RoleAdmin, RoleSeller, RoleBuyer, RoleFinance}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	for _, k := range Roles {
		if r == k {
			return true
		}
	}
	return false
}

// Actor is who makes a call: an API key or a signed-in user of an org.
type Actor struct {
	OrgID  string
	UserID string // empty for API keys
	KeyID  string // empty for browser sessions
	Role   Role
	// Operator is true for the platform's own org: it approves and
	// suspends listings and sees every listing whatever its state.
	Operator bool
	// KeyBudgetMicros is the API key's monthly spending cap, nil for none.
	KeyBudgetMicros *int64
	// OrgBudgetMicros is the org's monthly spending cap over all its keys
	// and subscriptions, nil for none.
	OrgBudgetMicros *int64
	// KeyRateLimits and OrgRateLimits are the API key's and the org's
	// rate limits through the meter (zero: none).
	KeyRateLimits, OrgRateLimits RateLimits
	// Credit: the org holds prepaid credit (an account in some currency):
	// the meter's credit stage looks its balance up; false costs a call
	// nothing (contracts/credit.go).
	Credit bool
	// KeyTags are the API key's cost allocation tags, which the meter
	// copies onto the usage rows of its calls.
	KeyTags Tags
}
