-- A task's row is the meter's one relational write per new task, and
-- agents choose task ids at random (UUIDs, nginx's $request_id): every
-- index keyed by the id is a write at a random page of its B-tree. The
-- index by the id alone (task_owners_task) was the second such write per
-- task, for a lookup that is rare and cached (a delegated task's parent,
-- named by id alone: contracts.TaskLife.FindTasks), which now walks the
-- primary key listing by listing instead (a loose index scan).
DROP INDEX IF EXISTS task_owners_task;
