package a2aproxy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// creditStore is a CreditReader of one account, recording the burns.
type creditStore struct {
	mu    sync.Mutex
	acct  *contracts.CreditAccount
	err   error
	burns []contracts.CreditBurn
}

func (s *creditStore) CreditAccount(_ context.Context, orgID, currency string) (*contracts.CreditAccount, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if s.acct == nil || s.acct.OrgID != orgID || s.acct.Currency != currency {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "credit_account_not_found", "none")
	}
	a := *s.acct
	return &a, nil
}

func (s *creditStore) RecordBurns(_ context.Context, b []contracts.CreditBurn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.burns = append(s.burns, b...)
	return nil
}

// creditCall is a send of org_b under a plan in currency whose send
// reserves 1,350 micros (TestBudgetBurst's plan).
func creditCall(t testing.TB, currency string) *call {
	cl := switchCall(t, "lst_a", "org_s", "org_b", "key_1", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`)
	cl.actor.Credit = true
	cl.plan = &listings.Plan{Currency: currency, InputTokensPerMillionMicros: 3_000_000, OutputTokensPerMillionMicros: 15_000_000,
		ComputePerHourMicros: 360_000, PerTaskMicros: 1_000, MaxCallInputTokens: 10, MaxCallOutputTokens: 20, MaxCallComputeMs: 200}
	cl.contract = &contracts.Contract{ID: "ctr_1"}
	return cl
}

// TestCreditStage: 24 concurrent sends against a required credit of three
// reservations admit exactly three; their costs are burned and written in
// one movement; the next call is refused with -32049. Not required, a call
// the balance cannot cover goes on unheld; an org without credit in the
// plan's currency is not held; a store that cannot answer (never read)
// fails closed with -32044.
func TestCreditStage(t *testing.T) {
	ctx := context.Background()
	const reserve, cost, credited = 1350, 1119, 3*1350 + 500
	store := &creditStore{acct: &contracts.CreditAccount{OrgID: "org_b", Currency: "usd", CreditedMicros: credited, Required: true}}
	book := newCreditBook(store, agentmarket.SystemClock{}, 1<<62, slog.New(slog.DiscardHandler))
	if got := reservation(creditCall(t, "usd")); got != reserve {
		t.Fatalf("a send reserves %d, want %d", got, reserve)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted, refused int
	held := make(chan *call, 24)
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := creditCall(t, "usd")
			err := book.reserve(ctx, cl)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && cl.credit.on:
				admitted++
				held <- cl
			case toRPC(err).Code == CodeCreditExhausted:
				refused++
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	close(held)
	if admitted != 3 || refused != 21 {
		t.Fatalf("%d admitted, %d refused; want 3 and 21", admitted, refused)
	}
	for cl := range held {
		book.settle(cl, cost)
		book.settle(cl, cost) // idempotent
	}
	if err := book.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(store.burns) != 1 || store.burns[0].Micros != 3*cost || store.burns[0].ContractID != "ctr_1" || store.burns[0].Currency != "usd" {
		t.Fatalf("burns written: %+v, want one of %d for ctr_1", store.burns, 3*cost)
	}
	if err := book.reserve(ctx, creditCall(t, "usd")); toRPC(err).Code != CodeCreditExhausted {
		t.Fatalf("a call past the balance: %v, want -32049", err)
	}

	book.accts[creditKey{"org_b", "usd"}].required = false
	if cl := creditCall(t, "usd"); book.reserve(ctx, cl) != nil || cl.credit.on {
		t.Errorf("not required: the call should go on, unheld")
	}
	if cl := creditCall(t, "eur"); book.reserve(ctx, cl) != nil || cl.credit.on {
		t.Errorf("no credit in the plan's currency: the call should go on, unheld")
	}
	store.err = errors.New("database down")
	if err := book.reserve(ctx, creditCall(t, "gbp")); toRPC(err).Code != CodeBudgetUnchecked {
		t.Errorf("credit never read, store down: %v, want -32044", err)
	}
}

// BenchmarkCreditNone is what the stage adds to a call of an org without
// credit: one bool test, no allocation.
func BenchmarkCreditNone(b *testing.B) {
	stage := credit{book: newCreditBook(&creditStore{}, agentmarket.SystemClock{}, 0, slog.New(slog.DiscardHandler))}
	cl := creditCall(b, "usd")
	cl.actor.Credit = false
	next := func(*call) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := stage.serve(cl, next); err != nil {
			b.Fatal(err)
		}
	}
}
