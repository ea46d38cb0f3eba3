-- The audit log (contracts/audit): every control-plane change, one row
-- each, hash-chained. prev_hash is the hex SHA-256 of the previous entry's
-- canonical bytes, hash that of this entry's (contracts/audit.Canonical);
-- before_json and after_json are kept as text, byte for byte, since they
-- are hashed. Rows are only appended (and pruned from the oldest, behind a
-- checkpoint).
CREATE TABLE audit_entries (
    seq            BIGINT PRIMARY KEY,
    at             TIMESTAMPTZ NOT NULL,
    actor_org_id   TEXT NOT NULL DEFAULT '',
    actor_user_id  TEXT NOT NULL DEFAULT '',
    actor_key_id   TEXT NOT NULL DEFAULT '',
    actor_role     TEXT NOT NULL DEFAULT '',
    operator       BOOLEAN NOT NULL DEFAULT FALSE,
    actor_ip       TEXT NOT NULL DEFAULT '',
    via            TEXT NOT NULL DEFAULT '',
    action         TEXT NOT NULL,
    object_type    TEXT NOT NULL,
    object_id      TEXT NOT NULL DEFAULT '',
    org_id         TEXT NOT NULL DEFAULT '',
    before_json    TEXT NOT NULL DEFAULT 'null',
    after_json     TEXT NOT NULL DEFAULT 'null',
    request_id     TEXT NOT NULL DEFAULT '',
    prev_hash      TEXT NOT NULL,
    hash           TEXT NOT NULL
);
CREATE INDEX audit_entries_at ON audit_entries (at);
CREATE INDEX audit_entries_org ON audit_entries (org_id, seq);
CREATE INDEX audit_entries_actor_org ON audit_entries (actor_org_id, seq);
CREATE INDEX audit_entries_object ON audit_entries (object_type, object_id, seq);

-- The chain's head: one row, locked by every append (an UPDATE first), so
-- that appends from every process chain one after another.
CREATE TABLE audit_chain_head (
    id    INTEGER PRIMARY KEY,
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL
);
INSERT INTO audit_chain_head (id, seq, hash) VALUES (1, 0, '');

-- Signed checkpoints of the head (a compact JWS over {v, seq, hash, at,
-- prune}); the one a prune made (prune) anchors the entries left.
CREATE TABLE audit_checkpoints (
    seq     BIGINT PRIMARY KEY,
    hash    TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL,
    prune   BOOLEAN NOT NULL DEFAULT FALSE,
    key_id  TEXT NOT NULL,
    jws     TEXT NOT NULL
);

-- The keys checkpoints are signed with (a2aproxy/pushsign with Purpose
-- "audit"), kept as the card signing keys are, and never deleted while a
-- checkpoint may name them.
CREATE TABLE audit_signing_keys (
    generation   BIGINT PRIMARY KEY,
    id           TEXT NOT NULL,
    algorithm    TEXT NOT NULL,
    public_key   BYTEA NOT NULL,
    sealed       BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    active_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX audit_signing_keys_id ON audit_signing_keys (id);
