-- The usage rows the meters ship (metering/clickhouse applies this file;
-- migrations.Apply does not: ClickHouse has no transactions).
--
-- Written to the subset that ClickHouse 18.16 and current releases share:
-- DateTime plus a millisecond column (no DateTime64), plain String (no
-- LowCardinality), the MergeTree syntax with PARTITION BY / ORDER BY.
-- Every statement is idempotent (IF NOT EXISTS): two processes starting at
-- once may both run it.
--
-- Exactly once: a batch sent again after a crash is stored again (18.16
-- deduplicates inserts only in Replicated tables). ReplacingMergeTree
-- collapses rows with equal sorting keys when parts merge, and a row's key
-- ends with its id, so the copies of a row collapse, and until they do every
-- read uses FINAL to see each row once. A row's content never changes under
-- its id (the spool replays the same bytes), so the whole key is equal
-- between copies, and so is the partition.
--
-- The key starts with what finance filters on most (buyer, then listing)
-- so those queries read a narrow range; time bounds prune partitions.
-- No materialized rollups: an MV fires on every insert, re-sent ones too,
-- and would count a re-sent batch twice.
--
-- On a cluster (AGENTMARKET_CLICKHOUSE_CLUSTER) metering/clickhouse runs this
-- file ON CLUSTER as usage_local, ReplicatedReplacingMergeTree with the same
-- key, behind a Distributed table named usage (metering/clickhouse/cluster.go).
CREATE TABLE IF NOT EXISTS usage (
    id String,
    time DateTime,
    time_ms UInt16,
    trace_id String,
    task_id String,
    context_id String,
    parent_task_id String,
    listing_id String,
    seller_org_id String,
    buyer_org_id String,
    api_key_id String,
    contract_id String,
    method String,
    protocol_version String,
    state String,
    error_code Int32,
    bytes_in Int64,
    bytes_out Int64,
    latency_ms Int64,
    input_tokens Int64,
    output_tokens Int64,
    compute_ms Int64,
    tasks Int64,
    cost_micros Int64,
    currency String,
    estimated UInt8,
    card_hash String,
    model String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(time)
ORDER BY (buyer_org_id, listing_id, time, id);
