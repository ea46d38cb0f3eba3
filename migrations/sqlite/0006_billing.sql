-- Billing's own state (package billing, adapter billing/gormstore). No
-- foreign keys to contracts or orgs: these rows record what exists at the
-- payment provider, and a webhook may name a subscription we do not know.

-- The provider's product and prices of a listing's plan version.
CREATE TABLE billing_plan_prices (
    listing_id         TEXT NOT NULL,
    plan_version       INTEGER NOT NULL,
    product_id         TEXT NOT NULL,
    flat_price_id      TEXT NOT NULL,
    metered_price_ids  TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (listing_id, plan_version)
);

-- The provider's customer of an org.
CREATE TABLE billing_customers (
    org_id       TEXT PRIMARY KEY,
    customer_id  TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL
);

-- A contract's subscription at the provider and its items.
CREATE TABLE billing_subscriptions (
    contract_id       TEXT PRIMARY KEY,
    subscription_id   TEXT NOT NULL,
    customer_id       TEXT NOT NULL,
    flat_item_id      TEXT NOT NULL,
    metered_item_ids  TEXT NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    canceled_at       TIMESTAMP
);
CREATE UNIQUE INDEX billing_subscriptions_subscription ON billing_subscriptions (subscription_id);

-- The usage reporter's outbox: one row per contract, line kind and window,
-- recorded before the provider is called and marked sent after.
CREATE TABLE billing_usage_reports (
    contract_id      TEXT NOT NULL,
    line_kind        TEXT NOT NULL,
    window_start     TIMESTAMP NOT NULL,
    window_end       TIMESTAMP NOT NULL,
    period_start     TIMESTAMP NOT NULL,
    item_id          TEXT NOT NULL,
    quantity         BIGINT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    status           TEXT NOT NULL,
    error            TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMP NOT NULL,
    sent_at          TIMESTAMP,
    PRIMARY KEY (contract_id, line_kind, window_start)
);
CREATE UNIQUE INDEX billing_usage_reports_key ON billing_usage_reports (idempotency_key);
CREATE INDEX billing_usage_reports_pending ON billing_usage_reports (status, contract_id);

-- Per contract, line kind and billing period: the quantity reported so far
-- and the end of the last window reported.
CREATE TABLE billing_usage_watermarks (
    contract_id       TEXT NOT NULL,
    line_kind         TEXT NOT NULL,
    period_start      TIMESTAMP NOT NULL,
    reported          BIGINT NOT NULL,
    reported_through  TIMESTAMP,
    updated_at        TIMESTAMP NOT NULL,
    PRIMARY KEY (contract_id, line_kind, period_start)
);

-- Webhook events processed, each once.
CREATE TABLE billing_webhook_events (
    event_id     TEXT PRIMARY KEY,
    event_type   TEXT NOT NULL,
    created      TIMESTAMP NOT NULL,
    received_at  TIMESTAMP NOT NULL,
    contract_id  TEXT NOT NULL DEFAULT '',
    outcome      TEXT NOT NULL
);

-- Per contract, the newest event applied, so that an older one delivered
-- late changes nothing.
CREATE TABLE billing_contract_events (
    contract_id    TEXT PRIMARY KEY,
    last_created   TIMESTAMP NOT NULL,
    last_event_id  TEXT NOT NULL,
    updated_at     TIMESTAMP NOT NULL
);

-- The own ledger's invoices: one per contract and period.
CREATE TABLE billing_invoices (
    contract_id            TEXT NOT NULL,
    period_start           TIMESTAMP NOT NULL,
    period_end             TIMESTAMP NOT NULL,
    active_start           TIMESTAMP NOT NULL,
    active_end             TIMESTAMP NOT NULL,
    plan_version           INTEGER NOT NULL,
    currency               TEXT NOT NULL,
    minor_unit_digits      INTEGER NOT NULL,
    subtotal_micros        BIGINT NOT NULL,
    subtotal_fraction_num  BIGINT NOT NULL,
    subtotal_fraction_den  BIGINT NOT NULL,
    total_minor            BIGINT NOT NULL,
    lines                  TEXT NOT NULL,
    created_at             TIMESTAMP NOT NULL,
    PRIMARY KEY (contract_id, period_start)
);
CREATE INDEX billing_invoices_period ON billing_invoices (period_start);
