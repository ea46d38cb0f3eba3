-- Push deliveries are claimed and capped per destination (the webhook's
-- scheme, host and port, contracts.Destination): a flooded or slow webhook
-- holds its own share of the meters' delivery slots, not every buyer's.
-- Rows enqueued before have none; the meter reads their config's URL.
ALTER TABLE push_deliveries ADD COLUMN destination TEXT NOT NULL DEFAULT '';
CREATE INDEX push_deliveries_destination ON push_deliveries (status, destination, next_attempt_at);
