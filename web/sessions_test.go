package web_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestSessions runs sign-in and sessions over the gorm store on every
// database: SQLite always, PostgreSQL when the test script provides it.
func TestSessions(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		store := contractsgorm.New(db.DB)
		clock := agentmarket.NewManualClock(now)
		accounts := &contracts.Accounts{Store: store, Clock: clock, BcryptCost: bcrypt.MinCost}
		sessions := &contracts.Sessions{Store: store, Accounts: accounts, Clock: clock, TTL: time.Hour}
		res, err := accounts.Signup(ctx, contracts.SignupInput{OrgName: "Acme", Email: "a@acme.example", Password: "correct horse battery"})
		if err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct{ email, pw string }{{"a@acme.example", "wrong horse battery"}, {"b@acme.example", "correct horse battery"}, {"", ""}} {
			if _, err := accounts.Login(ctx, c.email, c.pw); agentmarket.CodeOf(err) != "invalid_login" {
				t.Errorf("Login(%q, %q) = %v, want invalid_login", c.email, c.pw, err)
			}
		}
		actor, err := accounts.Login(ctx, " A@Acme.example", "correct horse battery")
		if err != nil || actor.OrgID != res.Org.ID || actor.UserID != res.User.ID || actor.Role != agentmarket.RoleAdmin || actor.Operator {
			t.Fatalf("Login = %+v, %v", actor, err)
		}

		tok, sess, err := sessions.Start(ctx, actor)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != 43 || sess.IDHash != contracts.HashSessionToken(tok) || !sess.ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("Start = %q, %+v", tok, sess)
		}
		got, stored, err := sessions.Resolve(ctx, tok)
		if err != nil || got != actor || !stored.CreatedAt.Equal(now) || !stored.ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("Resolve = %+v, %+v, %v; want %+v", got, stored, err, actor)
		}
		other := "A" // a token differing in its last character only
		if tok[42] == 'A' {
			other = "B"
		}
		for _, bad := range []string{"", "x", tok[:42] + other, tok + "="} {
			if _, _, err := sessions.Resolve(ctx, bad); agentmarket.CodeOf(err) != "no_session" {
				t.Errorf("Resolve(%q) = %v", bad, err)
			}
		}

		// A key's session has the key's role and ends with the key.
		_, secret, err := accounts.CreateKey(ctx, actor, contracts.KeyInput{Name: "books", Role: agentmarket.RoleFinance})
		if err != nil {
			t.Fatal(err)
		}
		keyActor, err := accounts.Authenticate(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		ktok, _, err := sessions.Start(ctx, keyActor)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := sessions.Resolve(ctx, ktok); err != nil || got.Role != agentmarket.RoleFinance || got.KeyID != keyActor.KeyID {
			t.Fatalf("key session = %+v, %v", got, err)
		}
		accounts.RevokeKey(ctx, actor, keyActor.KeyID)
		if _, _, err := sessions.Resolve(ctx, ktok); agentmarket.CodeOf(err) != "no_session" {
			t.Errorf("session of a revoked key: %v", err)
		}

		// Sessions end when signed out, and when they expire; expired ones
		// are swept by the next sign-in.
		if err := sessions.End(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if _, _, err := sessions.Resolve(ctx, tok); agentmarket.CodeOf(err) != "no_session" {
			t.Errorf("after End: %v", err)
		}
		if err := sessions.End(ctx, tok); err != nil {
			t.Errorf("ending twice: %v", err)
		}
		tok2, _, _ := sessions.Start(ctx, actor)
		clock.Advance(time.Hour)
		if _, _, err := sessions.Resolve(ctx, tok2); agentmarket.CodeOf(err) != "no_session" {
			t.Errorf("expired session: %v", err)
		}
		clock.Advance(time.Second)
		if _, _, err := sessions.Start(ctx, actor); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SessionByHash(ctx, contracts.HashSessionToken(tok2)); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("expired session not swept: %v", err)
		}
	})
}

// TestSessionIdle: a session unused for its idle time ends, beside its
// absolute lifetime; using it keeps it alive (its last use is written at
// most every few minutes), on every database.
func TestSessionIdle(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		store := contractsgorm.New(db.DB)
		clock := agentmarket.NewManualClock(now)
		accounts := &contracts.Accounts{Store: store, Clock: clock, BcryptCost: bcrypt.MinCost}
		sessions := &contracts.Sessions{Store: store, Accounts: accounts, Clock: clock, TTL: 12 * time.Hour, Idle: 2 * time.Hour}
		res, err := accounts.Signup(ctx, contracts.SignupInput{OrgName: "Acme", Email: "a@acme.example", Password: "correct horse battery"})
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := sessions.Start(ctx, agentmarket.Actor{OrgID: res.Org.ID, UserID: res.User.ID, Role: agentmarket.RoleAdmin})
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []time.Duration{time.Hour, 90 * time.Minute, 119 * time.Minute} {
			clock.Advance(step)
			if _, _, err := sessions.Resolve(ctx, tok); err != nil {
				t.Fatalf("used %s after the last use: %v", step, err)
			}
		}
		clock.Advance(2 * time.Hour)
		if _, _, err := sessions.Resolve(ctx, tok); agentmarket.CodeOf(err) != "no_session" {
			t.Fatalf("unused for 2h: %v, want no_session", err)
		}
		if _, err := store.SessionByHash(ctx, contracts.HashSessionToken(tok)); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("the idle session is still stored: %v", err)
		}
	})
}
