-- Invoices apply prepaid credit before charging (issue 25, item 2;
-- billing/credit.go): what the period's calls burned of the org's credit,
-- in minor units, taken off total_minor.
ALTER TABLE billing_invoices ADD COLUMN credit_applied_minor BIGINT NOT NULL DEFAULT 0;
