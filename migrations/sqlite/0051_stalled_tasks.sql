-- A task that showed no progress for longer than its listing's stall_after is
-- marked stalled (cleared by progress, or its end).
ALTER TABLE task_owners ADD COLUMN stalled_since TIMESTAMP;
