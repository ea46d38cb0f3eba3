-- The push configs buyers deleted, by id only (nothing of the webhook is kept):
-- deleting one again succeeds, as A2A 1.0 makes the delete idempotent, while an
-- id the task never had stays unknown (A2A 0.3 clients get an error for it).
CREATE TABLE push_config_deletions (
    listing_id  TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    config_id   TEXT NOT NULL,
    PRIMARY KEY (listing_id, task_id, config_id)
);
