-- Rollups of the usage rows, maintained by the usage store's Insert
-- (metering/clickhouse), which finance queries read instead of the rows.
--
-- One table holds three kinds of rows, so that what one Insert adds to it
-- is one INSERT, stored as one part per partition, all or nothing:
--   kind 0, a row's marker: bucket is the row's time, row_id its id; it
--        says the row is counted in the cells. Insert looks the markers of
--        a batch up and adds to the cells only the rows without one, so a
--        batch sent again (after a crash between insert and acknowledge,
--        or a retry whose first attempt did commit) counts once. A
--        materialized view cannot do that: it fires on every insert, the
--        re-sent ones too (shared/infra.md).
--   kind 1, an hourly cell, and kind 2, a daily cell: the sums of the rows
--        of one attribution (buyer, seller, listing, key, contract) in the
--        hour or UTC day starting at bucket.
--   kind 3 and 4, the same per listing: summed over keys and contracts
--        (api_key_id and contract_id empty), for the reports that neither
--        filter nor group by them, which read a third as many cells.
-- A row's marker and cells fall in the row's month, so a partition's part
-- holds a row's marker exactly when it holds the row's contribution.
--
-- SummingMergeTree adds up the rows of equal keys when parts merge; reads
-- add up what is not merged yet (GROUP BY), so no FINAL is needed. It
-- drops rows whose summed columns are all zero: every kind has calls = 1
-- or more. Amounts are kept as a high and a low 32-bit part (value =
-- hi * 2^32 + lo, lo in [0, 2^32)), whose sums cannot wrap below 2^31 rows
-- a cell; reads recombine them as Decimal(38, 0) and saturate at the
-- largest Int64, as the row sums do.
--
-- usage_rollup_state says from when the cells are complete (the latest
-- value, should this file be applied twice): rows stored
-- before this file was applied have no markers, so a database that held
-- rows then reads the rollups only from that time on (rounded up to the
-- hour) and the rows before it. Meters that do not maintain the rollups
-- must not ship rows after it (upgrade them all at once), or the cells
-- miss their rows: docs/operations.md.
CREATE TABLE IF NOT EXISTS usage_rollup (
    kind UInt8,
    bucket DateTime,
    row_id String,
    buyer_org_id String,
    seller_org_id String,
    listing_id String,
    api_key_id String,
    contract_id String,
    calls Int64,
    estimated Int64,
    tasks_hi Int64,
    tasks_lo Int64,
    input_tokens_hi Int64,
    input_tokens_lo Int64,
    output_tokens_hi Int64,
    output_tokens_lo Int64,
    compute_ms_hi Int64,
    compute_ms_lo Int64,
    cost_micros_hi Int64,
    cost_micros_lo Int64
) ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (kind, bucket, row_id, buyer_org_id, seller_org_id, listing_id, api_key_id, contract_id);

CREATE TABLE IF NOT EXISTS usage_rollup_state (
    name String,
    value DateTime
) ENGINE = ReplacingMergeTree(value)
ORDER BY name;

INSERT INTO usage_rollup_state (name, value)
SELECT 'complete_from', if(count() = 0, toDateTime(0), now())
FROM usage;
