-- A contract binds a buyer org to a listing at one frozen plan version.
CREATE TABLE contracts (
    id                     TEXT PRIMARY KEY,
    buyer_org_id           TEXT NOT NULL REFERENCES orgs(id),
    listing_id             TEXT NOT NULL REFERENCES listings(id),
    seller_org_id          TEXT NOT NULL REFERENCES orgs(id),
    plan_version           INTEGER NOT NULL,
    status                 TEXT NOT NULL,
    monthly_budget_micros  BIGINT,
    created_at             TIMESTAMP NOT NULL,
    updated_at             TIMESTAMP NOT NULL,
    canceled_at            TIMESTAMP
);
CREATE INDEX contracts_buyer ON contracts (buyer_org_id);
CREATE INDEX contracts_listing ON contracts (listing_id);
-- At most one contract per buyer and listing that is not canceled.
CREATE UNIQUE INDEX contracts_one_open ON contracts (buyer_org_id, listing_id) WHERE status <> 'canceled';

-- The org a task belongs to, bound the first time the meter sees the task.
CREATE TABLE task_owners (
    listing_id   TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    contract_id  TEXT NOT NULL,
    context_id   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (listing_id, task_id)
);

-- What has been billed per task so far (cumulative), so replays,
-- resubscribes and polls never bill the same tokens twice.
CREATE TABLE task_usage (
    listing_id     TEXT NOT NULL,
    task_id        TEXT NOT NULL,
    input_tokens   BIGINT NOT NULL,
    output_tokens  BIGINT NOT NULL,
    compute_ms     BIGINT NOT NULL,
    updated_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (listing_id, task_id)
);
