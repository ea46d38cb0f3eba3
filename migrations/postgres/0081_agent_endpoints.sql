-- A listing's agent endpoints beside its card's (issue 26, item 1):
-- replicas and regions with their weights, as a JSON array of
-- {url, binding, protocol_version, weight}; '' when the seller set none.
ALTER TABLE listings ADD COLUMN agent_endpoints TEXT NOT NULL DEFAULT '';
