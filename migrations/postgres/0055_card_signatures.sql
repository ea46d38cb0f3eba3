-- Agent Card signatures (A2A 1.0 §8.4). A listing records what its card's
-- signatures showed (card_signature: JSON {status, key_id, jku, signer,
-- detail, checked_at}), the JWKS its seller registered to verify them with
-- (card_keys, public keys; empty: each signature's jku), and what becomes
-- of a card whose signatures fail (signature_policy: mark or require).
-- Every card version keeps its own result.
ALTER TABLE listings ADD COLUMN card_signature TEXT NOT NULL DEFAULT '';
ALTER TABLE listings ADD COLUMN card_keys TEXT NOT NULL DEFAULT '';
ALTER TABLE listings ADD COLUMN signature_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE listing_card_versions ADD COLUMN signature TEXT NOT NULL DEFAULT '';

-- The keys the meters sign proxied Agent Cards with, apart from the push
-- signing keys (one key, one purpose), in the same generations
-- (a2aproxy/pushsign with Purpose "card"); published at the meter's
-- /.well-known/jwks.json.
CREATE TABLE card_signing_keys (
    generation   BIGINT PRIMARY KEY,
    id           TEXT NOT NULL,
    algorithm    TEXT NOT NULL,
    public_key   BYTEA NOT NULL,
    sealed       BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    active_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX card_signing_keys_id ON card_signing_keys (id);
