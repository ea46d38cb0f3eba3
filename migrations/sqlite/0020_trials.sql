-- Free trials (issue 14, item 1). A plan version may offer a trial: its
-- length in days and, optionally, the tokens or the list price of usage
-- that end it earlier. A contract that starts in trial records when the
-- trial ends (the scheduled end while it runs, the actual end once over)
-- and whether the buyer asked to stop then instead of converting to paid.
ALTER TABLE listing_plans ADD COLUMN trial_days BIGINT NOT NULL DEFAULT 0;
ALTER TABLE listing_plans ADD COLUMN trial_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE listing_plans ADD COLUMN trial_cap_micros BIGINT NOT NULL DEFAULT 0;

ALTER TABLE contracts ADD COLUMN trial_end TIMESTAMP;
ALTER TABLE contracts ADD COLUMN cancel_at_trial_end BOOLEAN NOT NULL DEFAULT FALSE;
-- One trial per buyer org and listing, ever.
CREATE UNIQUE INDEX contracts_one_trial ON contracts (buyer_org_id, listing_id) WHERE trial_end IS NOT NULL;
CREATE INDEX contracts_trialing ON contracts (status) WHERE status = 'trialing';

-- Usage before this instant is not reported to the provider (it was free:
-- a trial's).
ALTER TABLE billing_subscriptions ADD COLUMN usage_from TIMESTAMP;

-- An invoice's parts (the spans rated under one set of terms), as JSON;
-- empty for invoices issued before parts existed (one part: the active span).
ALTER TABLE billing_invoices ADD COLUMN parts TEXT NOT NULL DEFAULT '';
