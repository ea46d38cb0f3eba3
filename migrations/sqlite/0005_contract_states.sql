-- When a contract went past due (the grace period runs from here).
ALTER TABLE contracts ADD COLUMN past_due_at TIMESTAMP;
CREATE INDEX contracts_status ON contracts (status, past_due_at);
