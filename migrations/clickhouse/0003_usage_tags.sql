-- Cost allocation tags (issue 14, item 5): each row carries its contract's
-- and API key's tags at call time, as a flat JSON object with sorted keys
-- ('' for none); group_by=tag:<key> reads one with visitParamExtractString.
ALTER TABLE usage ADD COLUMN tags String DEFAULT '';
