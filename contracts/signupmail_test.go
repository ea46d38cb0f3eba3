package contracts_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
)

// countingUsers counts the look-ups of users by e-mail.
type countingUsers struct {
	contracts.UserFinder
	n atomic.Int64
}

func (u *countingUsers) GetUserByEmail(ctx context.Context, email string) (*contracts.User, error) {
	u.n.Add(1)
	return u.UserFinder.GetUserByEmail(ctx, email)
}

type discardMail struct{}

func (discardMail) Send(context.Context, contracts.Mail) error { return nil }

// TestConfirmModeAnswersBeforeLookingUp: in the confirm mode a sign-up's
// answer does not wait on whether its e-mail is registered: nothing reads
// the users until the mail worker runs, so the answer, its time and the
// work before it are the same for every e-mail. Past the queue, every
// sign-up is refused alike; and each counts against the throttle, per
// address and per e-mail.
func TestConfirmModeAnswersBeforeLookingUp(t *testing.T) {
	a := newAccounts(t)
	mustSignup(t, a, "owner@acme.example")
	users := &countingUsers{UserFinder: a.Store}
	a.Mails = &contracts.SignupMails{Store: a.Store.(*contractsgorm.Store), Users: users, Mailer: discardMail{}, Clock: a.Clock, BaseURL: "https://m.example", Queue: 2}
	ctx := context.Background()
	for i, email := range []string{"owner@acme.example", "new@globex.example"} {
		res, err := a.SignupFrom(ctx, contracts.SignupInput{OrgName: "X", Email: email, Password: "correct horse battery"}, "198.51.100.1")
		if err != nil || !res.Mailed || res.Org != nil || res.Secret != "" {
			t.Fatalf("sign-up %d: %+v, %v", i, res, err)
		}
	}
	if n := users.n.Load(); n != 0 {
		t.Errorf("users read %d times before any mail was sent", n)
	}
	_, err := a.SignupFrom(ctx, contracts.SignupInput{OrgName: "X", Email: "third@initech.example", Password: "correct horse battery"}, "198.51.100.2")
	if ae := appError(t, err); ae.Kind != agentmarket.Unavailable || ae.Code != "signup_busy" {
		t.Errorf("past the queue: %v, want Unavailable signup_busy", err)
	}
	// Five from one address, then that address waits (429), whatever the e-mail.
	for i := range 3 {
		if _, err := a.SignupFrom(ctx, contracts.SignupInput{OrgName: "X", Email: "bad", Password: "short"}, "198.51.100.1"); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Fatalf("invalid sign-up %d: %v", i, err)
		}
	}
	if _, err := a.SignupFrom(ctx, contracts.SignupInput{OrgName: "X", Email: "other@globex.example", Password: "correct horse battery"}, "198.51.100.1"); agentmarket.KindOf(err) != agentmarket.TooManyRequests {
		t.Errorf("a sixth sign-up from one address: %v, want TooManyRequests", err)
	}
	if _, err := a.ConfirmSignup(ctx, "not-a-token", contracts.SignupInput{OrgName: "X", Password: "correct horse battery"}); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("a made-up token: %v, want NotFound", err)
	}
}
