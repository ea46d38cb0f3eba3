-- Private offers (issue 14, item 2). A seller offers one buyer org its own
-- plan on a listing: the plan is a private version of the listing's plans
-- (buyer_org_id names the only org that sees it; '' for public versions),
-- and a contract that accepts the offer freezes it. A plan may charge a
-- minimum per month (min_commit_micros).
ALTER TABLE listing_plans ADD COLUMN buyer_org_id TEXT NOT NULL DEFAULT '';
ALTER TABLE listing_plans ADD COLUMN min_commit_micros BIGINT NOT NULL DEFAULT 0;

CREATE TABLE listing_offers (
    id             TEXT PRIMARY KEY,
    listing_id     TEXT NOT NULL REFERENCES listings(id),
    seller_org_id  TEXT NOT NULL REFERENCES orgs(id),
    buyer_org_id   TEXT NOT NULL REFERENCES orgs(id),
    plan_version   INTEGER NOT NULL,
    expires_at     TIMESTAMP NOT NULL,
    status         TEXT NOT NULL,
    contract_id    TEXT NOT NULL DEFAULT '',
    created_at     TIMESTAMP NOT NULL,
    decided_at     TIMESTAMP,
    FOREIGN KEY (listing_id, plan_version) REFERENCES listing_plans (listing_id, version)
);
CREATE INDEX listing_offers_seller ON listing_offers (seller_org_id, created_at);
CREATE INDEX listing_offers_buyer ON listing_offers (buyer_org_id, created_at);

-- The offer a contract accepted ('' for none).
ALTER TABLE contracts ADD COLUMN offer_id TEXT NOT NULL DEFAULT '';

-- With a payment provider: a month's shortfall of a contract's minimum
-- commitment, recorded before the provider is charged it and marked sent
-- after, so it is charged once.
CREATE TABLE billing_commitment_charges (
    contract_id      TEXT NOT NULL,
    period_start     TIMESTAMP NOT NULL,
    currency         TEXT NOT NULL,
    amount_minor     BIGINT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    sent_at          TIMESTAMP,
    PRIMARY KEY (contract_id, period_start)
);
