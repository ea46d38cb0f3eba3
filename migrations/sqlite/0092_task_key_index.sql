-- A key's kill switch cancels the key's open tasks (RequestSwitchCancels):
-- found by this index rather than by reading every open task. Only open
-- tasks are in it: a task ended in the call that made it (most) costs
-- nothing here.
CREATE INDEX IF NOT EXISTS task_owners_open_key ON task_owners (key_id) WHERE ended_at IS NULL;
