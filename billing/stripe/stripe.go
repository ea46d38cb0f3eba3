package stripe

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// Config is how to reach Stripe.
type Config struct {
	// SecretKey is the account's secret (sk_…) or restricted (rk_…) key.
	SecretKey string
	// APIBase is the API's base URL; empty is https://api.stripe.com.
	// Tests point it at stripe-mock.
	APIBase string
	// HTTPClient makes the requests; nil is stripe-go's default client
	// (80 s timeout).
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go retries a request that
	// failed on the network or with 409, a 429 lock timeout or 503 (any
	// 5xx but on POST), with the same idempotency key: 0 is stripe-go's
	// default (2), negative is never.
	MaxNetworkRetries int
}

// Validate reports every broken rule.
func (c Config) Validate() error {
	var fe agentmarket.Fields
	if c.SecretKey == "" {
		fe.Add("stripe_secret_key", "required", "the Stripe secret key is required")
	}
	if c.APIBase != "" {
		u, err := url.Parse(c.APIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fe.Add("stripe_api_base", "url", "the Stripe API base must be an http(s) URL like https://api.stripe.com")
		}
	}
	return fe.Err("invalid_stripe_config", "the Stripe settings are not valid")
}

// Provider is the billing.Provider on Stripe. It is safe for concurrent
// use: it holds no state but its client.
type Provider struct {
	api *client.API
}

var _ billing.Provider = (*Provider)(nil)

// New returns a Provider with its own stripe-go client and backend; it
// never touches stripe-go's global key or backends. Validate cfg first.
func New(cfg Config) *Provider {
	bc := &stripego.BackendConfig{
		HTTPClient: cfg.HTTPClient,
		// Errors are returned and logged once by whoever handles them.
		LeveledLogger:   &stripego.LeveledLogger{Level: stripego.LevelNull},
		EnableTelemetry: stripego.Bool(false),
	}
	if cfg.APIBase != "" {
		bc.URL = stripego.String(cfg.APIBase)
	}
	switch {
	case cfg.MaxNetworkRetries > 0:
		bc.MaxNetworkRetries = stripego.Int64(int64(cfg.MaxNetworkRetries))
	case cfg.MaxNetworkRetries < 0:
		bc.MaxNetworkRetries = stripego.Int64(0)
	}
	backend := stripego.GetBackendWithConfig(stripego.APIBackend, bc)
	// Only API calls are made; the same backend fills the other two slots
	// so that nothing falls back to stripe-go's global backends.
	api := client.New(cfg.SecretKey, &stripego.Backends{API: backend, Connect: backend, Uploads: backend})
	return &Provider{api: api}
}

// maxKeyLen is Stripe's limit on an idempotency key.
const maxKeyLen = 255

func params(ctx context.Context, key string) stripego.Params {
	return stripego.Params{Context: ctx, IdempotencyKey: stripego.String(key)}
}

// ProductID is the Stripe product of a listing: deterministic, so that a
// later plan version finds it without a lookup.
func ProductID(listingID string) string { return "am_" + listingID }

func planKey(listingID string, version int, object string) string {
	return "am1/listing/" + listingID + "/plan/" + strconv.Itoa(version) + "/" + object
}

// EnsurePlan implements billing.Provider. It creates the listing's product
// (or finds it: its id is ProductID, so a product created for an earlier
// version answers resource_already_exists and is used as it is), then the
// flat price and the metered prices, in billing.LineKinds order.
func (p *Provider) EnsurePlan(ctx context.Context, listingID, listingName string, plan listings.Plan) (billing.PlanPrices, error) {
	var fe agentmarket.Fields
	if listingID == "" {
		fe.Add("listing_id", "required", "listing_id is required")
	} else if len(planKey(listingID, plan.Version, "price/output_tokens")) > maxKeyLen {
		fe.Add("listing_id", "max_length", "listing_id is too long for an idempotency key")
	}
	if listingName == "" {
		fe.Add("listing_name", "required", "the listing's name is required (it names the product)")
	}
	if plan.Version < 1 {
		fe.Add("plan.version", "positive", "the plan version must be 1 or more")
	}
	digits, err := billing.MinorUnitDigits(plan.Currency)
	if err != nil {
		fe.Add("plan.currency", "unknown_currency", "currency %q is not one AgentMarket can bill in", plan.Currency)
	}
	plan.CheckAmounts(&fe, "plan.")
	if err := fe.Err("invalid_plan", "the plan cannot be created at the payment provider"); err != nil {
		return billing.PlanPrices{}, err
	}

	version := strconv.Itoa(plan.Version)
	productID := ProductID(listingID)
	pp := &stripego.ProductParams{
		Params:   params(ctx, planKey(listingID, plan.Version, "product")),
		ID:       stripego.String(productID),
		Name:     stripego.String(listingName),
		Metadata: map[string]string{"agentmarket_listing_id": listingID},
	}
	if _, err := p.api.Products.New(pp); err != nil && !isStripeCode(err, stripego.ErrorCodeResourceAlreadyExists) {
		return billing.PlanPrices{}, mapError("create the product", err)
	}

	out := billing.PlanPrices{ProductID: productID, MeteredPriceIDs: make(map[billing.LineKind]string, len(billing.MeteredLineKinds))}
	for _, kind := range billing.LineKinds {
		var prp *stripego.PriceParams
		if kind == billing.LineFlatFee {
			prp = flatPriceParams(productID, plan, digits)
		} else {
			prp = meteredPriceParams(productID, plan, kind, digits)
		}
		prp.Params.Context = ctx
		prp.Params.IdempotencyKey = stripego.String(planKey(listingID, plan.Version, "price/"+string(kind)))
		prp.Metadata = map[string]string{
			"agentmarket_listing_id":   listingID,
			"agentmarket_plan_version": version,
			"agentmarket_line_kind":    string(kind),
		}
		pr, err := p.api.Prices.New(prp)
		if err != nil {
			return billing.PlanPrices{}, mapError("create the "+string(kind)+" price", err)
		}
		if kind == billing.LineFlatFee {
			out.FlatPriceID = pr.ID
		} else {
			out.MeteredPriceIDs[kind] = pr.ID
		}
	}
	return out, nil
}

// EnsureCustomer implements billing.Provider.
func (p *Provider) EnsureCustomer(ctx context.Context, orgID, orgName, email string) (billing.Customer, error) {
	var fe agentmarket.Fields
	key := "am1/org/" + orgID + "/customer"
	if orgID == "" {
		fe.Add("org_id", "required", "org_id is required")
	} else if len(key) > maxKeyLen {
		fe.Add("org_id", "max_length", "org_id is too long for an idempotency key")
	}
	if err := fe.Err("invalid_customer", "the customer cannot be created at the payment provider"); err != nil {
		return billing.Customer{}, err
	}
	cp := &stripego.CustomerParams{
		Params:   params(ctx, key),
		Metadata: map[string]string{"agentmarket_org_id": orgID},
	}
	if orgName != "" {
		cp.Name = stripego.String(orgName)
	}
	if email != "" {
		cp.Email = stripego.String(email)
	}
	c, err := p.api.Customers.New(cp)
	if err != nil {
		return billing.Customer{}, mapError("create the customer", err)
	}
	return billing.Customer{ID: c.ID}, nil
}

// Subscribe implements billing.Provider. Items: the flat price (quantity
// 1) first, then the metered prices in billing.MeteredLineKinds order.
// Stripe answers with the items it created; they are matched to our line
// kinds by price (a subscription holds each price once).
func (p *Provider) Subscribe(ctx context.Context, in billing.SubscribeInput) (billing.SubscriptionRefs, error) {
	key := "am1/contract/" + in.ContractID + "/subscription"
	if err := in.Validate(); err != nil {
		return billing.SubscriptionRefs{}, err
	}
	if len(key) > maxKeyLen {
		return billing.SubscriptionRefs{}, agentmarket.Errorf(agentmarket.Invalid, "invalid_subscribe_input",
			"contract_id is too long for an idempotency key")
	}
	sp := &stripego.SubscriptionParams{
		Params:   params(ctx, key),
		Customer: stripego.String(in.CustomerID),
		Metadata: map[string]string{"agentmarket_contract_id": in.ContractID},
		Items:    items(in.Prices),
	}
	if !in.BillingCycleAnchor.IsZero() {
		sp.BillingCycleAnchor = stripego.Int64(in.BillingCycleAnchor.Unix())
		sp.ProrationBehavior = stripego.String("create_prorations")
	}
	if !in.TrialEnd.IsZero() {
		sp.TrialEnd = stripego.Int64(in.TrialEnd.Unix())
		if in.CancelAtTrialEnd {
			sp.CancelAt = stripego.Int64(in.TrialEnd.Unix())
		}
	}
	if in.ConnectedAccountID != "" {
		sp.TransferData = &stripego.SubscriptionTransferDataParams{Destination: stripego.String(in.ConnectedAccountID)}
		sp.ApplicationFeePercent = stripego.Float64(in.PlatformFeePercent)
	}
	sub, err := p.api.Subscriptions.New(sp)
	if err != nil {
		return billing.SubscriptionRefs{}, mapError("create the subscription", err)
	}
	return refsOf(sub, in.Prices, in.ContractID)
}

// items are a plan's subscription items: the flat price (quantity 1)
// first, then the metered prices in billing.MeteredLineKinds order.
func items(prices billing.PlanPrices) []*stripego.SubscriptionItemsParams {
	out := []*stripego.SubscriptionItemsParams{{
		Price:    stripego.String(prices.FlatPriceID),
		Quantity: stripego.Int64(1),
		Metadata: map[string]string{"agentmarket_line_kind": string(billing.LineFlatFee)},
	}}
	for _, kind := range billing.MeteredLineKinds {
		out = append(out, &stripego.SubscriptionItemsParams{
			Price:    stripego.String(prices.MeteredPriceIDs[kind]),
			Metadata: map[string]string{"agentmarket_line_kind": string(kind)},
		})
	}
	return out
}

// refsOf matches the items Stripe answered with to our line kinds, by
// price (a subscription holds each price once).
func refsOf(sub *stripego.Subscription, prices billing.PlanPrices, contractID string) (billing.SubscriptionRefs, error) {
	itemOf := map[string]string{} // price id → item id
	if sub.Items != nil {
		for _, it := range sub.Items.Data {
			if it != nil && it.Price != nil {
				itemOf[it.Price.ID] = it.ID
			}
		}
	}
	refs := billing.SubscriptionRefs{ID: sub.ID, FlatItemID: itemOf[prices.FlatPriceID],
		MeteredItemIDs: make(map[billing.LineKind]string, len(billing.MeteredLineKinds))}
	missing := refs.ID == "" || refs.FlatItemID == ""
	for _, kind := range billing.MeteredLineKinds {
		id := itemOf[prices.MeteredPriceIDs[kind]]
		missing = missing || id == ""
		refs.MeteredItemIDs[kind] = id
	}
	if missing {
		return billing.SubscriptionRefs{}, agentmarket.Wrap(agentmarket.Internal, "payment_provider_unexpected_response",
			fmt.Errorf("stripe: subscription %q for contract %s lacks an item for one of our prices (it has %v)", sub.ID, contractID, itemOf),
			"payment provider error")
	}
	return refs, nil
}

// ChangePlan implements billing.Provider: one update that deletes the old
// items and adds the new plan's, proration_behavior=create_prorations with
// proration_date at the change (Stripe credits the old fee and charges the
// new one for the rest of the period on the next invoice, by the second).
// The old metered items' usage is not cleared: the next invoice bills it
// at the old prices.
func (p *Provider) ChangePlan(ctx context.Context, in billing.PlanChangeInput) (billing.SubscriptionRefs, error) {
	var fe agentmarket.Fields
	checkCall(&fe, "subscription_id", in.SubscriptionID, in.IdempotencyKey)
	if in.At.IsZero() {
		fe.Add("at", "required", "the change's time is required")
	}
	if in.Old.FlatItemID == "" || in.Prices.FlatPriceID == "" {
		fe.Add("items", "required", "the old items and the new prices are required")
	}
	for _, k := range billing.MeteredLineKinds {
		if in.Old.MeteredItemIDs[k] == "" || in.Prices.MeteredPriceIDs[k] == "" {
			fe.Add("items."+string(k), "required", "the old %s item and the new %s price are required", k, k)
		}
	}
	if err := fe.Err("invalid_plan_change", "the plan change cannot be made"); err != nil {
		return billing.SubscriptionRefs{}, err
	}
	sp := &stripego.SubscriptionParams{
		Params:            params(ctx, in.IdempotencyKey),
		ProrationBehavior: stripego.String("create_prorations"),
		ProrationDate:     stripego.Int64(in.At.Unix()),
		Items:             []*stripego.SubscriptionItemsParams{{ID: stripego.String(in.Old.FlatItemID), Deleted: stripego.Bool(true)}},
	}
	for _, k := range billing.MeteredLineKinds {
		sp.Items = append(sp.Items, &stripego.SubscriptionItemsParams{ID: stripego.String(in.Old.MeteredItemIDs[k]), Deleted: stripego.Bool(true)})
	}
	sp.Items = append(sp.Items, items(in.Prices)...)
	sub, err := p.api.Subscriptions.Update(in.SubscriptionID, sp)
	if err != nil {
		return billing.SubscriptionRefs{}, mapError("change the subscription's plan", err)
	}
	return refsOf(sub, in.Prices, in.SubscriptionID)
}

// CancelSubscription implements billing.Provider: the subscription ends
// now, with a final invoice for the usage not yet invoiced (invoice_now)
// and a credit for the unused part of the flat fee (prorate).
func (p *Provider) CancelSubscription(ctx context.Context, subscriptionID, idempotencyKey string) error {
	var fe agentmarket.Fields
	checkCall(&fe, "subscription_id", subscriptionID, idempotencyKey)
	if err := fe.Err("invalid_cancel", "the subscription cannot be canceled"); err != nil {
		return err
	}
	cp := &stripego.SubscriptionCancelParams{
		Params:     params(ctx, idempotencyKey),
		InvoiceNow: stripego.Bool(true),
		Prorate:    stripego.Bool(true),
	}
	_, err := p.api.Subscriptions.Cancel(subscriptionID, cp)
	return mapError("cancel the subscription", err)
}

// EndTrialNow implements billing.Provider: trial_end=now, so Stripe
// starts the paid period, prorated to the billing cycle anchor, at once.
func (p *Provider) EndTrialNow(ctx context.Context, subscriptionID, idempotencyKey string) error {
	var fe agentmarket.Fields
	checkCall(&fe, "subscription_id", subscriptionID, idempotencyKey)
	if err := fe.Err("invalid_trial_end", "the trial cannot be ended"); err != nil {
		return err
	}
	sp := &stripego.SubscriptionParams{
		Params:            params(ctx, idempotencyKey),
		TrialEndNow:       stripego.Bool(true),
		ProrationBehavior: stripego.String("create_prorations"),
	}
	_, err := p.api.Subscriptions.Update(subscriptionID, sp)
	return mapError("end the trial", err)
}

// SetCancelAt implements billing.Provider: cancel_at=<at>, or cancel_at=""
// (Stripe's way to unset it) for a zero at.
func (p *Provider) SetCancelAt(ctx context.Context, subscriptionID string, at time.Time, idempotencyKey string) error {
	var fe agentmarket.Fields
	checkCall(&fe, "subscription_id", subscriptionID, idempotencyKey)
	if err := fe.Err("invalid_cancel_at", "the subscription's end cannot be set"); err != nil {
		return err
	}
	sp := &stripego.SubscriptionParams{Params: params(ctx, idempotencyKey)}
	if at.IsZero() {
		sp.AddExtra("cancel_at", "")
	} else {
		sp.CancelAt = stripego.Int64(at.Unix())
	}
	_, err := p.api.Subscriptions.Update(subscriptionID, sp)
	return mapError("set when the subscription ends", err)
}

// Metadata keys of an adjustment's invoice item and invoice: the
// contract, and the item's idempotency key, by which a resend finds the
// item once Stripe has forgotten the key (24 hours).
const (
	metaContract = "agentmarket_contract_id"
	metaItemKey  = "agentmarket_item_key"
)

// invoiceKeySuffix makes the idempotency key of the invoice that takes an
// item without a subscription from the item's own key.
const invoiceKeySuffix = "/invoice"

// AddInvoiceItem implements billing.Provider. With a subscription, the
// item is on it (subscription=…) and its next invoice takes it. Without
// one, the item is the customer's (no subscription: Stripe attaches an
// item with a subscription only to that subscription's invoices, and a
// canceled subscription issues none) and an invoice of the customer is
// created at once with pending_invoice_items_behavior=include (the
// default, exclude, would leave it out) and auto_advance=true (Stripe
// finalizes and collects it), key <item key>/invoice. A resend first
// lists the customer's items created since the period's end and takes the
// one whose metadata holds the key: found, it is not created again, and
// without a subscription the invoice is created only while it is still
// pending (an item already on an invoice was invoiced).
func (p *Provider) AddInvoiceItem(ctx context.Context, in billing.InvoiceItem) error {
	var fe agentmarket.Fields
	checkCall(&fe, "customer_id", in.CustomerID, in.IdempotencyKey)
	if len(in.IdempotencyKey)+len(invoiceKeySuffix) > maxKeyLen {
		fe.Add("idempotency_key", "max_length", "an invoice item's idempotency key has at most %d characters", maxKeyLen-len(invoiceKeySuffix))
	}
	if in.AmountMinor == 0 {
		// Negative: a credit (prepaid credit given back, billing.ApplyCredits).
		fe.Add("amount_minor", "nonzero", "an invoice item's amount must not be zero")
	}
	if _, err := billing.MinorUnitDigits(in.Currency); err != nil {
		fe.Add("currency", "unknown_currency", "currency %q is not one AgentMarket can bill in", in.Currency)
	}
	if err := fe.Err("invalid_invoice_item", "the charge cannot be added"); err != nil {
		return err
	}
	meta := map[string]string{metaItemKey: in.IdempotencyKey}
	if in.ContractID != "" {
		meta[metaContract] = in.ContractID
	}
	if in.Resend {
		sent, err := p.findItem(ctx, in)
		if err != nil {
			return err
		}
		if sent != nil && (in.SubscriptionID != "" || sent.Invoice != nil && sent.Invoice.ID != "") {
			return nil
		}
		if sent != nil {
			return p.invoiceNow(ctx, in, meta)
		}
	}
	ip := &stripego.InvoiceItemParams{
		Params:      params(ctx, in.IdempotencyKey),
		Customer:    stripego.String(in.CustomerID),
		Currency:    stripego.String(in.Currency),
		Amount:      stripego.Int64(in.AmountMinor),
		Description: stripego.String(in.Description),
		Period: &stripego.InvoiceItemPeriodParams{
			Start: stripego.Int64(in.Period.Start.Unix()),
			End:   stripego.Int64(in.Period.End.Unix()),
		},
		Metadata: meta,
	}
	if in.SubscriptionID != "" {
		ip.Subscription = stripego.String(in.SubscriptionID)
	}
	if _, err := p.api.InvoiceItems.New(ip); err != nil {
		return mapError("add the invoice item", err)
	}
	if in.SubscriptionID != "" {
		return nil
	}
	return p.invoiceNow(ctx, in, meta)
}

// invoiceNow creates the customer's invoice that takes its pending items,
// the one just added among them.
func (p *Provider) invoiceNow(ctx context.Context, in billing.InvoiceItem, meta map[string]string) error {
	ip := &stripego.InvoiceParams{
		Params:                      params(ctx, in.IdempotencyKey+invoiceKeySuffix),
		Customer:                    stripego.String(in.CustomerID),
		Currency:                    stripego.String(in.Currency),
		PendingInvoiceItemsBehavior: stripego.String("include"),
		AutoAdvance:                 stripego.Bool(true),
		Description:                 stripego.String(in.Description),
		Metadata:                    meta,
	}
	_, err := p.api.Invoices.New(ip)
	return mapError("invoice the item", err)
}

// findItem is the customer's invoice item sent with in's key, created
// after in's period ended (as every item of a closed month is); nil when
// there is none.
func (p *Provider) findItem(ctx context.Context, in billing.InvoiceItem) (*stripego.InvoiceItem, error) {
	lp := &stripego.InvoiceItemListParams{
		ListParams:   stripego.ListParams{Context: ctx, Limit: stripego.Int64(100)},
		Customer:     stripego.String(in.CustomerID),
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: in.Period.End.Unix()},
	}
	it := p.api.InvoiceItems.List(lp)
	for it.Next() {
		if ii := it.InvoiceItem(); ii != nil && ii.Metadata[metaItemKey] == in.IdempotencyKey {
			return ii, nil
		}
	}
	if err := it.Err(); err != nil {
		return nil, mapError("look for the invoice item", err)
	}
	return nil, nil
}

// ReportUsage implements billing.Provider.
func (p *Provider) ReportUsage(ctx context.Context, itemID string, quantity int64, at time.Time, idempotencyKey string) error {
	var fe agentmarket.Fields
	checkCall(&fe, "item_id", itemID, idempotencyKey)
	if quantity < 0 {
		fe.Add("quantity", "non_negative", "a usage quantity must not be negative")
	}
	if at.IsZero() {
		fe.Add("at", "required", "the usage's time is required")
	}
	if err := fe.Err("invalid_usage_report", "the usage cannot be reported"); err != nil {
		return err
	}
	up := &stripego.UsageRecordParams{
		Params:           params(ctx, idempotencyKey),
		SubscriptionItem: stripego.String(itemID),
		Quantity:         stripego.Int64(quantity),
		Timestamp:        stripego.Int64(at.Unix()),
		Action:           stripego.String(stripego.UsageRecordActionIncrement),
	}
	_, err := p.api.UsageRecords.New(up)
	return mapError("report usage", err)
}

// checkCall checks the object id and idempotency key a caller passes.
func checkCall(fe *agentmarket.Fields, idField, id, key string) {
	if id == "" {
		fe.Add(idField, "required", "%s is required", idField)
	}
	switch {
	case key == "":
		fe.Add("idempotency_key", "required", "an idempotency key is required")
	case len(key) > maxKeyLen:
		fe.Add("idempotency_key", "max_length", "an idempotency key has at most %d characters", maxKeyLen)
	}
}
