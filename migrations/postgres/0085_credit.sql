-- Prepaid credit (issue 25, item 2; contracts/credit.go): an org's balance
-- per currency, and every movement of it (purchase, grant, burn, refund).
-- The balance is kept on the account in the same transaction as each
-- movement; burns arrive from the meters a few seconds' worth at a time.
CREATE TABLE credit_accounts (
    org_id              TEXT NOT NULL,
    currency            TEXT NOT NULL,
    credited_micros     BIGINT NOT NULL DEFAULT 0,
    burned_micros       BIGINT NOT NULL DEFAULT 0,
    required            BOOLEAN NOT NULL DEFAULT FALSE,
    low_balance_micros  BIGINT NOT NULL DEFAULT 0,
    updated_at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (org_id, currency)
);
CREATE TABLE credit_movements (
    id             TEXT PRIMARY KEY,
    org_id         TEXT NOT NULL,
    currency       TEXT NOT NULL,
    kind           TEXT NOT NULL,
    amount_micros  BIGINT NOT NULL,
    contract_id    TEXT NOT NULL DEFAULT '',
    ref            TEXT NOT NULL DEFAULT '',
    actor          TEXT NOT NULL DEFAULT '',
    note           TEXT NOT NULL DEFAULT '',
    at             TIMESTAMPTZ NOT NULL
);
-- A purchase is credited once however often its webhook is delivered.
CREATE UNIQUE INDEX credit_movements_ref ON credit_movements (kind, ref) WHERE ref <> '';
CREATE INDEX credit_movements_org ON credit_movements (org_id, at);
CREATE INDEX credit_movements_contract ON credit_movements (contract_id, at) WHERE contract_id <> '';
-- The meter looks an org's credit up only when this is set (the actor it
-- authenticates carries it): orgs without credit cost nothing more.
ALTER TABLE orgs ADD COLUMN has_credit BOOLEAN NOT NULL DEFAULT FALSE;
