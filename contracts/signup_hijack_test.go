package contracts_test

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
)

type keepMail struct {
	mu sync.Mutex
	m  []contracts.Mail
}

func (k *keepMail) Send(_ context.Context, m contracts.Mail) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m = append(k.m, m)
	return nil
}

// mailedAccounts is the account service in the confirm sign-up mode, its
// mails kept in box, its mail worker running until the test ends.
func mailedAccounts(t *testing.T) (*contracts.Accounts, *keepMail, context.Context) {
	t.Helper()
	a := newAccounts(t)
	box := &keepMail{}
	a.Mails = &contracts.SignupMails{Store: a.Store.(*contractsgorm.Store), Users: a.Store, Mailer: box, Clock: a.Clock, BaseURL: "https://m.example"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.Mails.Run(ctx)
	return a, box, ctx
}

// TestSignupCannotBeHijacked (found by a review): someone signs up with
// another's address and a password of their own; the address's owner
// follows the mailed link and finishes the sign-up. The account is the
// owner's: it has the password the owner chose on the link's page, and
// the first one's password opens nothing (in the first design the
// request's password was kept, and its sender held the account).
func TestSignupCannotBeHijacked(t *testing.T) {
	a, box, ctx := mailedAccounts(t)
	if _, err := a.SignupFrom(ctx, contracts.SignupInput{OrgName: "Victim Inc", Email: "victim@corp.example", Password: "attacker-knows-this"}, "203.0.113.9"); err != nil {
		t.Fatal(err)
	}
	var mail contracts.Mail
	for deadline := time.Now().Add(5 * time.Second); mail.To == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		box.mu.Lock()
		if len(box.m) > 0 {
			mail = box.m[0]
		}
		box.mu.Unlock()
	}
	m := regexp.MustCompile(`token=([A-Za-z0-9_-]{43})`).FindStringSubmatch(mail.Text)
	if m == nil {
		t.Fatalf("no link in the mail: %+v", mail)
	}
	// A password too short is refused before the link is spent.
	if _, err := a.ConfirmSignup(ctx, m[1], contracts.SignupInput{OrgName: "Corp", Password: "short"}); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Fatalf("a short password at the link: %v, want Invalid", err)
	}
	res, err := a.ConfirmSignup(ctx, m[1], contracts.SignupInput{OrgName: "Corp", Password: "the owner's own choice"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Org.Name != "Corp" || res.User.Email != "victim@corp.example" {
		t.Errorf("the account made: org %q, user %q", res.Org.Name, res.User.Email)
	}
	if actor, err := a.Login(ctx, "victim@corp.example", "attacker-knows-this"); err == nil {
		t.Errorf("the password sent with the sign-up request signs in: %+v", actor)
	}
	if _, err := a.Login(ctx, "victim@corp.example", "the owner's own choice"); err != nil {
		t.Errorf("the owner's password: %v", err)
	}
}

// TestSignupMailsPerAddressBounded (from the review): sign-ups of one
// e-mail from many client addresses all get the same answer, and never a
// 429 (that would let anyone keep the address's owner from signing up),
// while the address's mailbox gets no more than the throttle's count.
func TestSignupMailsPerAddressBounded(t *testing.T) {
	a, box, ctx := mailedAccounts(t)
	for i := range 12 {
		res, err := a.SignupFrom(ctx, contracts.SignupInput{Email: "victim@corp.example"}, "203.0.113."+string(rune('a'+i)))
		if err != nil || !res.Mailed {
			t.Fatalf("sign-up %d of one e-mail: %+v, %v (want the same answer every time)", i, res, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the worker sends what was queued
	box.mu.Lock()
	n := len(box.m)
	box.mu.Unlock()
	if n == 0 || n > 5 {
		t.Errorf("%d mails to one address for 12 sign-ups, want 1 to 5", n)
	}
}
