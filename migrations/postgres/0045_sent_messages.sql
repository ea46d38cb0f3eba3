-- Idempotent sends: the messages the meters forwarded, by the messageId a buyer org
-- sent to a listing. A send of a messageId recorded here (within its window) is
-- answered with what the first send created, never forwarded again; one with another
-- digest is refused. claim_id names the call that forwarded the message; stage is 0
-- in flight, 2 done, 3 released (the call failed: the id is free again). Pruned once
-- expires_at passes.
CREATE TABLE sent_messages (
    listing_id      TEXT NOT NULL,
    org_id          TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    contract_id     TEXT NOT NULL,
    digest          TEXT NOT NULL,
    claim_id        TEXT NOT NULL,
    stage           INTEGER NOT NULL,
    task_id         TEXT NOT NULL DEFAULT '',
    context_id      TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL DEFAULT '',
    result          BYTEA,
    result_version  TEXT NOT NULL DEFAULT '',
    claimed_at      TIMESTAMPTZ NOT NULL,
    held_until      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (listing_id, org_id, message_id)
);
CREATE INDEX sent_messages_expires ON sent_messages (expires_at);
