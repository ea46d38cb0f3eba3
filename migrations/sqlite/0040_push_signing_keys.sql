-- The keys the meters sign push deliveries with (a2aproxy/pushsign), one per
-- generation: the newest generation whose active_at has come signs, and the
-- marketplace publishes every key kept here in its JWKS (public keys only).
-- A rotation adds the next generation; two processes rotating at once collide
-- on the generation, so one key is made. sealed is the private key, encrypted
-- with AGENTMARKET_SECRET_KEY; public_key is PKIX DER.
CREATE TABLE push_signing_keys (
    generation   BIGINT PRIMARY KEY,
    id           TEXT NOT NULL,
    algorithm    TEXT NOT NULL,
    public_key   BLOB NOT NULL,
    sealed       BLOB NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    active_at    TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX push_signing_keys_id ON push_signing_keys (id);
