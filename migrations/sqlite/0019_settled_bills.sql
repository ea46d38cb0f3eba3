-- The ledger's answer to each usage row it billed, so that a row settled again
-- (replayed from a meter's spool after a crash, or settled ahead of shipping
-- and again when shipped) is billed once. Pruned after 30 days.
CREATE TABLE settled_bills (
    row_id        TEXT PRIMARY KEY,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    compute_ms    BIGINT NOT NULL,
    first         BOOLEAN NOT NULL,
    settled_at    TIMESTAMP NOT NULL
);
CREATE INDEX settled_bills_settled_at ON settled_bills (settled_at);
