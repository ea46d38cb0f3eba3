-- A seller's Stripe Connect account, where its share of each sale is paid.
ALTER TABLE orgs ADD COLUMN connect_account_id TEXT NOT NULL DEFAULT '';
