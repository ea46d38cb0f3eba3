-- A task the agent no longer knows (it answered TaskNotFound for a task the
-- meter bound, say after a restart) is recorded lost; the listing counts them.
ALTER TABLE listings ADD COLUMN lost_tasks BIGINT NOT NULL DEFAULT 0;
ALTER TABLE listings ADD COLUMN lost_task_at TIMESTAMPTZ;
