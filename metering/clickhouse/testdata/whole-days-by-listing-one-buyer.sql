SELECT k, toInt64(least(sum(calls), toDecimal128(9223372036854775807, 0))), toInt64(least(sum(tasks), toDecimal128(9223372036854775807, 0))), toInt64(least(sum(input_tokens), toDecimal128(9223372036854775807, 0))), toInt64(least(sum(output_tokens), toDecimal128(9223372036854775807, 0))),
  toInt64(least(sum(compute_ms), toDecimal128(9223372036854775807, 0))), toInt64(least(sum(cost_micros), toDecimal128(9223372036854775807, 0))), toInt64(least(sum(estimated), toDecimal128(9223372036854775807, 0)))
FROM (
  SELECT listing_id AS k, sum(toDecimal128(calls, 0)) AS calls, toDecimal128(sum(tasks_hi), 0) * 4294967296 + toDecimal128(sum(tasks_lo), 0) AS tasks, toDecimal128(sum(input_tokens_hi), 0) * 4294967296 + toDecimal128(sum(input_tokens_lo), 0) AS input_tokens, toDecimal128(sum(output_tokens_hi), 0) * 4294967296 + toDecimal128(sum(output_tokens_lo), 0) AS output_tokens, toDecimal128(sum(compute_ms_hi), 0) * 4294967296 + toDecimal128(sum(compute_ms_lo), 0) AS compute_ms, toDecimal128(sum(cost_micros_hi), 0) * 4294967296 + toDecimal128(sum(cost_micros_lo), 0) AS cost_micros, sum(toDecimal128(estimated, 0)) AS estimated
  FROM usage_rollup
  WHERE kind = 4
    AND ((bucket >= toDateTime(?) AND bucket < toDateTime(?)))
    AND buyer_org_id = ?
  GROUP BY k
)
GROUP BY k
ORDER BY k
-- args: 1793491200, 1795996800, "org_b"
