-- Plan changes (issue 14, item 3). A contract moves from one plan version
-- to another at an instant: the old plan rates what happened before, the
-- new one what happens from then on; the history is kept so that billing
-- rates each part of a month by its plan. A buyer may also ask a contract
-- to end at the end of the billing period (cancel_at).
CREATE TABLE contract_plan_changes (
    contract_id   TEXT NOT NULL REFERENCES contracts(id),
    seq           INTEGER NOT NULL,
    changed_at    TIMESTAMPTZ NOT NULL,
    from_version  INTEGER NOT NULL,
    to_version    INTEGER NOT NULL,
    offer_id      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (contract_id, seq)
);

ALTER TABLE contracts ADD COLUMN cancel_at TIMESTAMPTZ;
CREATE INDEX contracts_cancel_at ON contracts (cancel_at) WHERE cancel_at IS NOT NULL;
