-- A session ends after an idle time too (contracts.Sessions.Idle): when the
-- browser was last seen, written at most every few minutes.
ALTER TABLE sessions ADD COLUMN last_seen_at TIMESTAMP;
UPDATE sessions SET last_seen_at = created_at;
