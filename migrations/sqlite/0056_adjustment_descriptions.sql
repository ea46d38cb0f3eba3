-- A month's one-off charge at the payment provider (billing.ChargeCommitments)
-- now carries, besides a minimum commitment's shortfall, the allowance the
-- provider's per-item free tiers would give again to a second stay or plan
-- of the month: the charge says which, as its invoice item's description.
ALTER TABLE billing_commitment_charges ADD COLUMN description TEXT NOT NULL DEFAULT '';
