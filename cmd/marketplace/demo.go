package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

const (
	demoSellerEmail = "seller@demo.agentmarket.local"
	demoBuyerEmail  = "buyer@demo.agentmarket.local"
	demoPassword    = "demo-password-not-secret"
)

// demo starts the built-in demo agents on loopback, lists them for a demo
// seller (created once), subscribes a demo buyer to each, and prints what
// to try. It is idempotent: a restart reuses the seller, buyer, listings
// and key, pointing the listings at the agents' new addresses.
type demo struct {
	accounts *contracts.Accounts
	catalog  *listings.Service
	subs     *contracts.Subscriptions
	dataDir  string
	addrs    []string // where the agents listen (config.DemoAddrs)
	meterURL string
	apiURL   string
	webURL   string
	// operatorKey: the operator's key is the configured one, not the
	// data dir's operator.key.
	operatorKey bool
	// What start made, for print and close.
	key     string
	listed  []demoListing
	servers []*http.Server
}

type demoListing struct {
	Name, ID, Version string
	ReportsUsage      bool
	Behavior          demoagent.Behavior
}

// demoPrompts are what the banner's curl lines ask each kind of agent.
var demoPrompts = map[demoagent.Behavior]string{
	demoagent.Summarize:      "Summarize the quarterly report for the board",
	demoagent.Translate:      "Translate hello world",
	demoagent.ExtractInvoice: "Invoice 17: consulting 1200.00, travel 310.50, VAT 302.10",
}

// start starts the agents and lists them; print then says what to try.
func (d *demo) start(ctx context.Context) error {
	seller, err := d.org(ctx, "Demo Agents Inc.", demoSellerEmail, agentmarket.RoleSeller)
	if err != nil {
		return err
	}
	buyer, err := d.org(ctx, "Demo Buyer Corp.", demoBuyerEmail, agentmarket.RoleBuyer)
	if err != nil {
		return err
	}
	buyerKey, err := d.buyerKey(ctx, buyer)
	if err != nil {
		return err
	}
	presets := demoagent.Presets()
	lns, err := d.listen(len(presets))
	if err != nil {
		return err
	}
	bases := make([]string, len(presets))
	for i, cfg := range presets {
		cfg.StepDelay = 300 * time.Millisecond
		a := demoagent.New(cfg)
		bases[i] = "http://" + lns[i].Addr().String() + "/"
		a.SetBaseURL(bases[i])
		srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
		d.servers = append(d.servers, srv)
		go srv.Serve(lns[i])
	}
	var listed []demoListing
	for i, cfg := range presets {
		base := bases[i]
		card, err := fetchCard(ctx, base+".well-known/agent-card.json")
		if err != nil {
			return fmt.Errorf("demo agent %s: %w", cfg.Name, err)
		}
		id, err := d.listing(ctx, seller, cfg.Name, card)
		if err != nil {
			return fmt.Errorf("demo listing %s: %w", cfg.Name, err)
		}
		if _, err := d.subs.Subscribe(ctx, buyer, contracts.SubscribeInput{ListingID: id}); err != nil && agentmarket.CodeOf(err) != "already_subscribed" {
			return fmt.Errorf("demo subscription %s: %w", cfg.Name, err)
		}
		listed = append(listed, demoListing{Name: cfg.Name, ID: id, Version: cfg.Version, ReportsUsage: cfg.ReportUsage, Behavior: cfg.Behavior})
	}
	d.key, d.listed = buyerKey, listed
	return nil
}

// close stops the agents, at once: their ports are free when it returns
// (a restart takes them again).
func (d *demo) close() {
	for _, s := range d.servers {
		s.Close()
	}
}

// listen opens the n agents' listeners on d.addrs, all or none: the
// ports stay the same from one start to the next (listings made from the
// agents' URLs then survive a restart), so a taken one is an error that
// says which and what to do.
func (d *demo) listen(n int) ([]net.Listener, error) {
	if len(d.addrs) != n {
		return nil, fmt.Errorf("%d addresses for %d demo agents", len(d.addrs), n)
	}
	lns := make([]net.Listener, 0, n)
	for _, addr := range d.addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("the demo agents listen on %s to %s, and %s is taken (another program, or another marketplace with --demo); choose other ports with --demo-port / AGENTMARKET_DEMO_PORT (0: free ones, new at every start)",
					d.addrs[0], d.addrs[n-1], addr)
			}
			return nil, fmt.Errorf("demo agent on %s: %w", addr, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// org returns the demo org of email, signing it up the first time; the
// actor is its admin acting in role.
func (d *demo) org(ctx context.Context, name, email string, role agentmarket.Role) (agentmarket.Actor, error) {
	res, err := d.accounts.Signup(ctx, contracts.SignupInput{OrgName: name, Email: email, Password: demoPassword})
	if err == nil {
		return agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: role}, nil
	}
	if agentmarket.CodeOf(err) != "email_taken" {
		return agentmarket.Actor{}, err
	}
	u, err := d.accounts.Store.GetUserByEmail(ctx, email)
	if err != nil {
		return agentmarket.Actor{}, err
	}
	return agentmarket.Actor{OrgID: u.OrgID, UserID: u.ID, Role: role}, nil
}

// buyerKey returns the demo buyer's key, kept in the data dir.
func (d *demo) buyerKey(ctx context.Context, buyer agentmarket.Actor) (string, error) {
	path := filepath.Join(d.dataDir, "demo-buyer.key")
	if b, err := os.ReadFile(path); err == nil {
		if k := strings.TrimSpace(string(b)); k != "" {
			if _, err := d.accounts.Authenticate(ctx, k); err == nil {
				return k, nil
			}
		}
	}
	_, secret, err := d.accounts.CreateKey(ctx, buyer, contracts.KeyInput{Name: "demo orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", err
	}
	return secret, nil
}

// listing creates the demo listing, or points the existing one at the
// agent's current card.
func (d *demo) listing(ctx context.Context, seller agentmarket.Actor, name string, card json.RawMessage) (string, error) {
	page, err := d.catalog.Search(ctx, seller, listings.Query{SellerOrgID: seller.OrgID, Text: name,
		Statuses: []listings.Status{listings.StatusPublished, listings.StatusPendingReview, listings.StatusDraft}})
	if err != nil {
		return "", err
	}
	for _, l := range page.Items {
		if l.Card != nil && l.Card.Name == name {
			if _, err := d.catalog.Update(ctx, seller, l.ID, listings.UpdateInput{Card: card}); err != nil {
				return "", err
			}
			return l.ID, nil
		}
	}
	pricing := json.RawMessage(`{"currency":"usd","monthly_fee_micros":19000000,"input_tokens_per_million_micros":3000000,
		"output_tokens_per_million_micros":15000000,"compute_per_hour_micros":3600000,"per_task_micros":2000}`)
	l, err := d.catalog.Create(ctx, seller, listings.CreateInput{Card: card, Pricing: pricing})
	if err != nil {
		return "", err
	}
	if l.Status != listings.StatusPublished {
		// The demo publishes its own listings even when review is on.
		if l, err = d.catalog.Update(ctx, agentmarket.Actor{OrgID: seller.OrgID, Role: agentmarket.RoleAdmin, Operator: true}, l.ID,
			listings.UpdateInput{Status: ptr(listings.StatusPublished)}); err != nil {
			return "", err
		}
	}
	return l.ID, nil
}

func ptr[T any](v T) *T { return &v }

func fetchCard(ctx context.Context, u string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, errors.New(res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, listings.MaxCardBytes))
	return b, err
}

func (d *demo) print(out io.Writer) {
	key, ls := d.key, d.listed
	fmt.Fprintf(out, "\nDemo ready. The demo buyer's API key (also in %s):\n  export KEY=%s\n", filepath.Join(d.dataDir, "demo-buyer.key"), key)
	for _, l := range ls {
		usage := "estimated usage"
		if l.ReportsUsage {
			usage = "reports usage"
		}
		fmt.Fprintf(out, "  %-18s A2A %s, %s: %s/a2a/%s\n", l.Name, l.Version, usage, d.meterURL, l.ID)
	}
	for _, l := range ls {
		if l.Version == "0.3" {
			fmt.Fprintf(out, "\nCall the %s (A2A 0.3) through the meter:\n", l.Name)
			fmt.Fprintf(out, "  curl -s %s/a2a/%s -H \"Authorization: Bearer $KEY\" -H 'Content-Type: application/json' \\\n", d.meterURL, l.ID)
			fmt.Fprintf(out, "    -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"message/send\",\"params\":{\"message\":{\"kind\":\"message\",\"messageId\":\"m-'$RANDOM$RANDOM'\",\"role\":\"user\",\"parts\":[{\"kind\":\"text\",\"text\":%q}]}}}'\n", demoPrompts[l.Behavior])
		} else {
			fmt.Fprintf(out, "\nStream from the %s (A2A 1.0) through the meter:\n", l.Name)
			fmt.Fprintf(out, "  curl -sN %s/a2a/%s -H \"Authorization: Bearer $KEY\" -H 'A2A-Version: 1.0' -H 'Content-Type: application/json' \\\n", d.meterURL, l.ID)
			fmt.Fprintf(out, "    -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendStreamingMessage\",\"params\":{\"message\":{\"messageId\":\"m-'$RANDOM$RANDOM'\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":%q}]}}}'\n", demoPrompts[l.Behavior])
		}
	}
	fmt.Fprintf(out, "\nThen see what it cost (usage reaches the store within a second):\n")
	fmt.Fprintf(out, "  curl -s '%s/usage?group_by=listing' -H \"Authorization: Bearer $KEY\"\n", d.apiURL)
	fmt.Fprintf(out, "  curl -s '%s/usage?group_by=task' -H \"Authorization: Bearer $KEY\" -H 'Accept: text/csv'\n", d.apiURL)
	d.printSignins(out)
}

// printSignins says how to sign in to the web UI as each of the demo's
// parties. The platform operator's org has no user: its way in is its key.
func (d *demo) printSignins(out io.Writer) {
	operator := "the key in " + filepath.Join(d.dataDir, "operator.key")
	if d.operatorKey {
		operator = "the key given as --operator-key / AGENTMARKET_OPERATOR_KEY"
	}
	fmt.Fprintf(out, "\nSign in to the web UI at %s/signin as\n", d.webURL)
	fmt.Fprintf(out, "  the seller    e-mail %s  password %s\n", demoSellerEmail, demoPassword)
	fmt.Fprintf(out, "  the buyer     e-mail %s  password %s\n", demoBuyerEmail, demoPassword)
	fmt.Fprintf(out, "  the operator  \"Sign in with an API key\": %s\n\n", operator)
}
