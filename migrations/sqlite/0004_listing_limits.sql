-- Per-listing meter limits (JSON; empty = the platform defaults).
ALTER TABLE listings ADD COLUMN limits TEXT NOT NULL DEFAULT '';
