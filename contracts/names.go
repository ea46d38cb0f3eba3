package contracts

import (
	"context"

	"github.com/agentmarket/agentmarket"
)

// NameStore reads users and API keys by id, whichever org they belong
// to: what a page shows in place of an id (the audit log's actors, the
// operator's usage by key). A Store that is not one shows ids.
type NameStore interface {
	UserByID(ctx context.Context, id string) (*User, error)
	APIKeyByID(ctx context.Context, id string) (*APIKey, error)
}

// Names say who an org's, a user's or a key's id is, for pages. The
// viewer (actor) learns no more than its role lets it see: the platform's
// operator any name; anyone else its own org's name, users and keys only.
// An id it may not see, or that names nothing, comes back "".
type Names struct {
	accounts *Accounts
	actor    agentmarket.Actor
	orgs     map[string]string
	users    map[string]string
	keys     map[string]KeyName
}

// KeyName is how a page names an API key: its name and the first
// characters of the key, which its holder recognises, and its org.
type KeyName struct {
	Name, Prefix, OrgID string
}

// Names returns a reader of names for actor's pages, remembering what it
// read (one page's worth: make one per request).
func (a *Accounts) Names(actor agentmarket.Actor) *Names {
	return &Names{accounts: a, actor: actor, orgs: map[string]string{}, users: map[string]string{}, keys: map[string]KeyName{}}
}

func (n *Names) sees(orgID string) bool { return n.actor.Operator || orgID == n.actor.OrgID }

// remember reads id's value into m once (read), and answers from m after:
// one page's worth of look-ups.
func remember[V any](m map[string]V, id string, read func() V) V {
	if v, ok := m[id]; ok {
		return v
	}
	v := read()
	m[id] = v
	return v
}

// Org is the org's name.
func (n *Names) Org(ctx context.Context, id string) string {
	if id == "" || !n.sees(id) {
		return ""
	}
	return remember(n.orgs, id, func() string {
		if o, err := n.accounts.Store.GetOrg(ctx, id); err == nil {
			return o.Name
		}
		return ""
	})
}

// User is the user's e-mail.
func (n *Names) User(ctx context.Context, id string) string {
	s, ok := n.accounts.Store.(NameStore)
	if id == "" || !ok {
		return ""
	}
	return remember(n.users, id, func() string {
		if u, err := s.UserByID(ctx, id); err == nil && n.sees(u.OrgID) {
			return u.Email
		}
		return ""
	})
}

// Key is the API key's name.
func (n *Names) Key(ctx context.Context, id string) KeyName {
	s, ok := n.accounts.Store.(NameStore)
	if id == "" || !ok {
		return KeyName{}
	}
	return remember(n.keys, id, func() KeyName {
		if k, err := s.APIKeyByID(ctx, id); err == nil && n.sees(k.OrgID) {
			return KeyName{Name: k.Name, Prefix: k.Prefix, OrgID: k.OrgID}
		}
		return KeyName{}
	})
}
