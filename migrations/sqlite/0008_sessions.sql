-- Browser sessions of the web UI. Only the SHA-256 of the cookie's token is
-- stored. key_id is set for a session opened with an API key (operators).
CREATE TABLE sessions (
    id_hash     TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL DEFAULT '',
    key_id      TEXT NOT NULL DEFAULT '',
    org_id      TEXT NOT NULL REFERENCES orgs(id),
    role        TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);
