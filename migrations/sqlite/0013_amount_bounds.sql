-- Amounts are bounded (agentmarket.MaxUnitPriceMicros and its siblings in
-- money.go; docs/billing.md says why): every usage price at most
-- 10,000,000,000 micros, the monthly fee 10,000,000,000,000, allowances
-- 1,000,000,000,000 units, budgets 1,000,000,000,000,000 micros. The API
-- refuses more; this brings what was stored before the bounds within them,
-- so that every stored amount obeys the rules billing relies on.
--
-- Plan versions are otherwise never rewritten. A price above its bound
-- was never billable in earnest (one task at it is trillions of dollars,
-- and a few overflowed every sum of the seller's usage), so lowering it to
-- the bound only spares the buyer; a budget above its bound capped nothing,
-- and at the bound it still caps nothing real.
UPDATE listing_plans SET monthly_fee_micros = 10000000000000 WHERE monthly_fee_micros > 10000000000000;
UPDATE listing_plans SET input_tokens_per_million_micros = 10000000000 WHERE input_tokens_per_million_micros > 10000000000;
UPDATE listing_plans SET output_tokens_per_million_micros = 10000000000 WHERE output_tokens_per_million_micros > 10000000000;
UPDATE listing_plans SET compute_per_hour_micros = 10000000000 WHERE compute_per_hour_micros > 10000000000;
UPDATE listing_plans SET per_task_micros = 10000000000 WHERE per_task_micros > 10000000000;
UPDATE listing_plans SET included_input_tokens = 1000000000000 WHERE included_input_tokens > 1000000000000;
UPDATE listing_plans SET included_output_tokens = 1000000000000 WHERE included_output_tokens > 1000000000000;
UPDATE listing_plans SET included_compute_ms = 1000000000000 WHERE included_compute_ms > 1000000000000;
UPDATE listing_plans SET included_tasks = 1000000000000 WHERE included_tasks > 1000000000000;
UPDATE listings SET monthly_fee_micros = 10000000000000 WHERE monthly_fee_micros > 10000000000000;
UPDATE api_keys SET monthly_budget_micros = 1000000000000000 WHERE monthly_budget_micros > 1000000000000000;
UPDATE contracts SET monthly_budget_micros = 1000000000000000 WHERE monthly_budget_micros > 1000000000000000;
