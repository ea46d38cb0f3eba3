package contracts_test

import (
	"context"
	"testing"

	"github.com/agentmarket/agentmarket"
)

// TestNames: a page's viewer reads the names of its own org, users and
// keys; another org's come back empty (the page shows nothing more than
// the id it had); the platform's operator reads every one.
func TestNames(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	acme := mustSignup(t, a, "alice@acme.example")
	globex := mustSignup(t, a, "bob@globex.example")
	own := agentmarket.Actor{OrgID: acme.Org.ID, Role: agentmarket.RoleAdmin}

	n := a.Names(own)
	if got := n.Org(ctx, acme.Org.ID); got != "Acme" {
		t.Errorf("own org's name %q", got)
	}
	if got := n.User(ctx, acme.User.ID); got != "alice@acme.example" {
		t.Errorf("own user's name %q", got)
	}
	if got := n.Key(ctx, acme.Key.ID); got.Name == "" || got.OrgID != acme.Org.ID {
		t.Errorf("own key's name %+v", got)
	}
	for what, got := range map[string]string{
		"org": n.Org(ctx, globex.Org.ID), "user": n.User(ctx, globex.User.ID), "key": n.Key(ctx, globex.Key.ID).Name,
	} {
		if got != "" {
			t.Errorf("another org's %s is named to a buyer: %q", what, got)
		}
	}
	if got := n.User(ctx, "usr_nope"); got != "" {
		t.Errorf("no user named %q", got)
	}

	op := a.Names(agentmarket.Actor{OrgID: "org_platform", Role: agentmarket.RoleAdmin, Operator: true})
	if op.User(ctx, globex.User.ID) != "bob@globex.example" || op.Key(ctx, globex.Key.ID).Name == "" || op.Org(ctx, globex.Org.ID) != "Acme" {
		t.Errorf("the operator reads every name: %q %+v %q", op.User(ctx, globex.User.ID), op.Key(ctx, globex.Key.ID), op.Org(ctx, globex.Org.ID))
	}
}
