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

// Org is the org's name.
func (n *Names) Org(ctx context.Context, id string) string {
	if id == "" || !n.sees(id) {
		return ""
	}
	if v, ok := n.orgs[id]; ok {
		return v
	}
	var name string
	if o, err := n.accounts.Store.GetOrg(ctx, id); err == nil {
		name = o.Name
	}
	n.orgs[id] = name
	return name
}

// User is the user's e-mail.
func (n *Names) User(ctx context.Context, id string) string {
	if v, ok := n.users[id]; ok || id == "" {
		return v
	}
	var email string
	if s, ok := n.accounts.Store.(NameStore); ok {
		if u, err := s.UserByID(ctx, id); err == nil && n.sees(u.OrgID) {
			email = u.Email
		}
	}
	n.users[id] = email
	return email
}

// Key is the API key's name.
func (n *Names) Key(ctx context.Context, id string) KeyName {
	if v, ok := n.keys[id]; ok || id == "" {
		return v
	}
	var kn KeyName
	if s, ok := n.accounts.Store.(NameStore); ok {
		if k, err := s.APIKeyByID(ctx, id); err == nil && n.sees(k.OrgID) {
			kn = KeyName{Name: k.Name, Prefix: k.Prefix, OrgID: k.OrgID}
		}
	}
	n.keys[id] = kn
	return kn
}
