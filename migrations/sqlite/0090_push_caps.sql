-- A buyer org's own caps for its push deliveries to one destination (a
-- webhook server), lower than the destination's (issue 29 item 1;
-- contracts.PushCaps): deliveries in flight at once, and started per
-- second in thousandths (0: the destination's).
CREATE TABLE push_caps (
    org_id          TEXT NOT NULL,
    destination     TEXT NOT NULL,
    max_in_flight   INTEGER NOT NULL DEFAULT 0,
    per_second_milli BIGINT NOT NULL DEFAULT 0,
    updated_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (org_id, destination)
);
