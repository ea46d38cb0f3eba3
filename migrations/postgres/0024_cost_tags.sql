-- Cost allocation tags (issue 14, item 5): API keys and contracts carry
-- tags (team=payments), a JSON object with its keys sorted ('' for none);
-- the meter copies them onto every usage row of their calls.
ALTER TABLE api_keys ADD COLUMN tags TEXT NOT NULL DEFAULT '';
ALTER TABLE contracts ADD COLUMN tags TEXT NOT NULL DEFAULT '';
