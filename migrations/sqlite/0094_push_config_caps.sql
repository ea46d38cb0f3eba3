-- A buyer org's own rate for the push deliveries of one of its push
-- configs (listing, task, config id), lower than what the config's
-- destination allows (issue 29 item 1; contracts.PushConfigCaps): its
-- deliveries start at least 1/rate apart; the rate is in thousandths of a
-- delivery per second. Deleting the config drops them.
CREATE TABLE push_config_caps (
    listing_id       TEXT NOT NULL,
    task_id          TEXT NOT NULL,
    config_id        TEXT NOT NULL,
    org_id           TEXT NOT NULL,
    per_second_milli BIGINT NOT NULL,
    updated_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (listing_id, task_id, config_id)
);
CREATE INDEX push_config_caps_org ON push_config_caps (org_id);
