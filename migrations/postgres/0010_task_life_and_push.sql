-- Delegation and the life of each task the meter carries (contracts.TaskLife).
-- A delegated task names its parent (empty when none). The meter cancels a
-- task whose pause outlasts pause_cancel_at or whose deadline_at passes;
-- lease_until keeps two meters from canceling the same task at once.
ALTER TABLE task_owners ADD COLUMN parent_listing_id TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN parent_task_id TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN deadline_at TIMESTAMPTZ;
ALTER TABLE task_owners ADD COLUMN paused_since TIMESTAMPTZ;
ALTER TABLE task_owners ADD COLUMN pause_cancel_at TIMESTAMPTZ;
ALTER TABLE task_owners ADD COLUMN ended_at TIMESTAMPTZ;
ALTER TABLE task_owners ADD COLUMN lease_until TIMESTAMPTZ;
-- The due sweep reads only the open tasks with a pause limit or a deadline.
CREATE INDEX task_owners_pause_due ON task_owners (pause_cancel_at) WHERE ended_at IS NULL AND pause_cancel_at IS NOT NULL;
CREATE INDEX task_owners_deadline_due ON task_owners (deadline_at) WHERE ended_at IS NULL AND deadline_at IS NOT NULL;
CREATE INDEX task_owners_parent ON task_owners (parent_listing_id, parent_task_id);
CREATE INDEX task_owners_task ON task_owners (task_id, created_at);

-- What happened to each task, in the order it was recorded.
CREATE TABLE task_events (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT NOT NULL,
    listing_id   TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT '',
    occurred_at  TIMESTAMPTZ NOT NULL,
    actor        TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    trace_id     TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX task_events_id ON task_events (id);
CREATE INDEX task_events_task ON task_events (listing_id, task_id, occurred_at, seq);

-- A buyer's push-notification config of a task, and the meter's callback
-- registered with the agent in its place. sealed is opaque to the store.
CREATE TABLE push_configs (
    listing_id   TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    config_id    TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    api_key_id   TEXT NOT NULL DEFAULT '',
    version      TEXT NOT NULL,
    url          TEXT NOT NULL,
    sealed       BYTEA NOT NULL,
    auth_scheme  TEXT NOT NULL DEFAULT '',
    callback_id  TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (listing_id, task_id, config_id)
);
CREATE UNIQUE INDEX push_configs_callback ON push_configs (callback_id);

-- The push outbox. seq orders the deliveries of a config; id is the
-- delivery's stable digest, so a notification the agent sends twice is one row.
CREATE TABLE push_deliveries (
    seq              BIGSERIAL PRIMARY KEY,
    id               TEXT NOT NULL,
    listing_id       TEXT NOT NULL,
    task_id          TEXT NOT NULL,
    config_id        TEXT NOT NULL,
    org_id           TEXT NOT NULL,
    body             BYTEA NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    lease_until      TIMESTAMPTZ,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL,
    delivered_at     TIMESTAMPTZ
);
CREATE UNIQUE INDEX push_deliveries_id ON push_deliveries (id);
CREATE INDEX push_deliveries_due ON push_deliveries (status, next_attempt_at);
CREATE INDEX push_deliveries_config ON push_deliveries (listing_id, task_id, config_id, status, seq);
CREATE INDEX push_deliveries_org ON push_deliveries (org_id, status, seq);

-- A contract's own time budgets, in milliseconds (0 = the listing's).
ALTER TABLE contracts ADD COLUMN request_timeout_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE contracts ADD COLUMN task_timeout_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE contracts ADD COLUMN max_pause_ms BIGINT NOT NULL DEFAULT 0;
