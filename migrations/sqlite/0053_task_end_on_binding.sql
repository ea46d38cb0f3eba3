-- One row per task: a task created and ended by the same call keeps its end
-- on its binding (ended_at, and these), instead of a task_events row of its
-- own; its record shows that end as a TaskEnded event.
ALTER TABLE task_owners ADD COLUMN ended_state TEXT NOT NULL DEFAULT '';
ALTER TABLE task_owners ADD COLUMN ended_trace_id TEXT NOT NULL DEFAULT '';
