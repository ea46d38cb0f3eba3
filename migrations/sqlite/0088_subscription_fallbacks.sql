-- Fallback agents (issue 26, item 4): a subscription's ordered fallback
-- listings, comma-separated listing ids ('' for none), each one the buyer
-- org also subscribes to. The meter sends a new task there when every
-- endpoint of the subscription's own listing is ejected or refused it
-- before work started.
ALTER TABLE contracts ADD COLUMN fallbacks TEXT NOT NULL DEFAULT '';
