-- Coalescing of push deliveries: kind says what a delivery carries
-- ('status': a status update that a later status of its config supersedes;
-- 'state': a terminal status or a task, which supersedes and is never
-- superseded; '' anything else, never superseded). A superseded delivery
-- is not sent: its status is 'superseded' and superseded_by names the
-- delivery that carries the later state; covers counts the status updates
-- a delivery stands for besides itself.
ALTER TABLE push_deliveries ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE push_deliveries ADD COLUMN covers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE push_deliveries ADD COLUMN superseded_by TEXT NOT NULL DEFAULT '';
CREATE INDEX push_deliveries_superseded_by ON push_deliveries (superseded_by);
