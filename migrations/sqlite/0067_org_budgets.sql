-- An org may cap what its calls through the meter cost per calendar month,
-- over all its keys and subscriptions (NULL: no cap); the meter holds it
-- with reservations like a key's or a subscription's budget.
ALTER TABLE orgs ADD COLUMN monthly_budget_micros BIGINT;
