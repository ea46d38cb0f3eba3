-- The API key whose call created a task (issue 25, item 6): a kill switch
-- of the key cancels its open tasks. '' for tasks bound before.
ALTER TABLE task_owners ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
