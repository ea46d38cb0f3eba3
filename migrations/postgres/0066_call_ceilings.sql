-- A plan may declare the most a single call may use (tokens in and out,
-- compute): the meter reserves that, at the plan's rates, before it
-- forwards a call under a budget (a2aproxy/reserve.go). 0: the meter's
-- documented default (docs/billing.md, "Budgets").
ALTER TABLE listing_plans ADD COLUMN max_call_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE listing_plans ADD COLUMN max_call_output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE listing_plans ADD COLUMN max_call_compute_ms BIGINT NOT NULL DEFAULT 0;
