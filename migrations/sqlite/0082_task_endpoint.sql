-- The agent endpoint a task was created at, for listings with several
-- (issue 26, item 1): the task's later calls go there. '' for a listing
-- with one endpoint.
ALTER TABLE task_owners ADD COLUMN endpoint TEXT NOT NULL DEFAULT '';
