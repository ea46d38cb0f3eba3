-- With Stripe, what a contract's calls burned of its org's prepaid credit
-- in a closed month goes on the subscription's next invoice as a negative
-- invoice item (issue 25, item 2; billing/credit.go): recorded before the
-- provider is called, marked sent after, so it is credited once, like a
-- commitment charge.
CREATE TABLE billing_credit_items (
    contract_id      TEXT NOT NULL,
    period_start     TIMESTAMPTZ NOT NULL,
    currency         TEXT NOT NULL,
    amount_minor     BIGINT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL,
    sent_at          TIMESTAMPTZ,
    PRIMARY KEY (contract_id, period_start)
);
