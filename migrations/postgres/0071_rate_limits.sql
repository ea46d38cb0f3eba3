-- Rate limits through the meter (issue 25, item 4): an API key's, an org's
-- (set by its admin) and a subscription's requests per second and minute,
-- tokens per minute and calls in flight, a JSON object ('' for none); a
-- listing's, set by its seller, live in its limits. A subscription's
-- session caps (item 5) bound each contextId's sends and spend, likewise.
ALTER TABLE api_keys ADD COLUMN rate_limits TEXT NOT NULL DEFAULT '';
ALTER TABLE orgs ADD COLUMN rate_limits TEXT NOT NULL DEFAULT '';
ALTER TABLE contracts ADD COLUMN rate_limits TEXT NOT NULL DEFAULT '';
ALTER TABLE contracts ADD COLUMN session_caps TEXT NOT NULL DEFAULT '';
