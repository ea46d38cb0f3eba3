-- Kill switches (issue 25, item 6; contracts/killswitch.go): each use, on
-- or lifted, one row, kept for the consoles. Only one switch of a scope
-- and target is on at a time.
CREATE TABLE kill_switches (
    id                  TEXT PRIMARY KEY,
    scope               TEXT NOT NULL,
    target_id           TEXT NOT NULL,
    listing_id          TEXT NOT NULL DEFAULT '',
    org_id              TEXT NOT NULL,
    reason              TEXT NOT NULL,
    set_by              TEXT NOT NULL,
    set_by_org          TEXT NOT NULL DEFAULT '',
    by_operator         BOOLEAN NOT NULL DEFAULT FALSE,
    set_at              TIMESTAMPTZ NOT NULL,
    lifted_at           TIMESTAMPTZ,
    lifted_by           TEXT NOT NULL DEFAULT '',
    lifted_by_operator  BOOLEAN NOT NULL DEFAULT FALSE,
    lift_reason         TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX kill_switches_on ON kill_switches (scope, listing_id, target_id) WHERE lifted_at IS NULL;
CREATE INDEX kill_switches_org ON kill_switches (org_id, set_at);
-- The meters poll this one row (every 200 ms by default) and read the
-- switches again only when it moved: every set and lift bumps it in the
-- same transaction.
CREATE TABLE kill_switch_version (
    id       INTEGER PRIMARY KEY,
    version  BIGINT NOT NULL
);
INSERT INTO kill_switch_version (id, version) VALUES (1, 0);
