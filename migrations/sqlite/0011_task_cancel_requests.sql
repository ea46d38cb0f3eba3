-- A cancel the meter must carry out (a cascade from a canceled parent):
-- recorded before it is tried, so a failed attempt or a restart does not
-- lose it; the sweeper tries again, counting its attempts on every task it
-- leases, and gives up after a bound.
ALTER TABLE task_owners ADD COLUMN cancel_requested_at TIMESTAMP;
ALTER TABLE task_owners ADD COLUMN cancel_actor TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN cancel_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN cancel_trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN sweep_attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX task_owners_cancel_due ON task_owners (cancel_requested_at) WHERE ended_at IS NULL AND cancel_requested_at IS NOT NULL;
