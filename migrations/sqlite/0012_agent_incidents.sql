-- An agent that answers one org with another org's task (it reused a task id,
-- say after a restart): the listing gets an incident, cleared when the seller
-- refreshes it by hand, and the task is relayed to no one from then on.
ALTER TABLE listings ADD COLUMN incident TEXT NOT NULL DEFAULT '';
ALTER TABLE listings ADD COLUMN incident_at TIMESTAMP;
ALTER TABLE task_owners ADD COLUMN reused_at TIMESTAMP;
