-- One row per task: what the task has been billed so far (the ledger's
-- cumulative counters) lives on its binding, where the meter's projections
-- write it once per batch, instead of in a row of its own (task_usage, no
-- longer written). billed_at is when the task was first billed (NULL: never),
-- which is what makes a row the task's first.
ALTER TABLE task_owners ADD COLUMN billed_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_owners ADD COLUMN billed_output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_owners ADD COLUMN billed_compute_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_owners ADD COLUMN billed_at TIMESTAMPTZ;
UPDATE task_owners SET billed_input_tokens = u.input_tokens, billed_output_tokens = u.output_tokens,
    billed_compute_ms = u.compute_ms, billed_at = u.updated_at
  FROM task_usage u WHERE u.listing_id = task_owners.listing_id AND u.task_id = task_owners.task_id;
