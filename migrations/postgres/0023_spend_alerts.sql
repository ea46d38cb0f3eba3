-- Spend alerts (issue 14, item 4). A budget's spend reaching one of its
-- thresholds records an alert once per budget, threshold and month (id is
-- a digest of the three); the org's alert webhook, a push config of its
-- own (listing and task ''), gets it through the push delivery outbox.
CREATE TABLE spend_alerts (
    id             TEXT PRIMARY KEY,
    org_id         TEXT NOT NULL,
    budget_kind    TEXT NOT NULL,
    budget_id      TEXT NOT NULL,
    period_start   TIMESTAMPTZ NOT NULL,
    percent        INTEGER NOT NULL,
    budget_micros  BIGINT NOT NULL,
    spent_micros   BIGINT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX spend_alerts_org ON spend_alerts (org_id, period_start, created_at);

-- An org's thresholds, in percent ("50,80,100"; none: the default).
CREATE TABLE org_alert_settings (
    org_id      TEXT PRIMARY KEY,
    thresholds  TEXT NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

-- A budget's own thresholds ('': its org's).
ALTER TABLE api_keys ADD COLUMN alert_thresholds TEXT NOT NULL DEFAULT '';
ALTER TABLE contracts ADD COLUMN alert_thresholds TEXT NOT NULL DEFAULT '';
