-- Accounts: organisations, their users and API keys.
CREATE TABLE orgs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    platform    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    org_id         TEXT NOT NULL REFERENCES orgs(id),
    email          TEXT NOT NULL,
    password_hash  TEXT NOT NULL,
    role           TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX users_email ON users (email);

CREATE TABLE api_keys (
    id                     TEXT PRIMARY KEY,
    org_id                 TEXT NOT NULL REFERENCES orgs(id),
    name                   TEXT NOT NULL,
    prefix                 TEXT NOT NULL,
    hash                   TEXT NOT NULL,
    role                   TEXT NOT NULL,
    monthly_budget_micros  BIGINT,
    created_at             TIMESTAMPTZ NOT NULL,
    revoked_at             TIMESTAMPTZ
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);
CREATE INDEX api_keys_org ON api_keys (org_id);

-- Listings: one per agent a seller sells. The card columns hold the version
-- in force; listing_card_versions keeps every card ever fetched.
CREATE TABLE listings (
    id                 TEXT PRIMARY KEY,
    seller_org_id      TEXT NOT NULL REFERENCES orgs(id),
    status             TEXT NOT NULL,
    health             TEXT NOT NULL,
    health_detail      TEXT NOT NULL DEFAULT '',
    name               TEXT NOT NULL,
    description        TEXT NOT NULL,
    card_url           TEXT NOT NULL DEFAULT '',
    card_json          TEXT NOT NULL,
    card_hash          TEXT NOT NULL,
    card_etag          TEXT NOT NULL DEFAULT '',
    card_fetched_at    TIMESTAMPTZ NOT NULL,
    protocol_versions  TEXT NOT NULL,
    streaming          BOOLEAN NOT NULL,
    push_notifications BOOLEAN NOT NULL,
    search_text        TEXT NOT NULL,
    plan_version       INTEGER NOT NULL,
    currency           TEXT NOT NULL,
    monthly_fee_micros BIGINT NOT NULL,
    upstream_auth      TEXT NOT NULL DEFAULT '',
    refresh_seconds    INTEGER NOT NULL,
    next_refresh_at    TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX listings_seller ON listings (seller_org_id);
CREATE INDEX listings_status_name ON listings (status, name);
CREATE INDEX listings_refresh ON listings (next_refresh_at);

CREATE TABLE listing_card_versions (
    id          BIGSERIAL PRIMARY KEY,
    listing_id  TEXT NOT NULL REFERENCES listings(id),
    card_hash   TEXT NOT NULL,
    card_json   TEXT NOT NULL,
    source_url  TEXT NOT NULL DEFAULT '',
    fetched_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX listing_card_versions_listing ON listing_card_versions (listing_id, id);

-- Plan versions are immutable once written: contracts freeze one.
CREATE TABLE listing_plans (
    listing_id                        TEXT NOT NULL REFERENCES listings(id),
    version                           INTEGER NOT NULL,
    currency                          TEXT NOT NULL,
    monthly_fee_micros                BIGINT NOT NULL,
    input_tokens_per_million_micros   BIGINT NOT NULL,
    output_tokens_per_million_micros  BIGINT NOT NULL,
    compute_per_hour_micros           BIGINT NOT NULL,
    per_task_micros                   BIGINT NOT NULL,
    included_input_tokens             BIGINT NOT NULL,
    included_output_tokens            BIGINT NOT NULL,
    included_compute_ms               BIGINT NOT NULL,
    included_tasks                    BIGINT NOT NULL,
    created_at                        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (listing_id, version)
);

-- Search index rows, rewritten whenever the card in force changes.
CREATE TABLE listing_skills (
    listing_id  TEXT NOT NULL REFERENCES listings(id),
    position    INTEGER NOT NULL,
    skill_id    TEXT NOT NULL,
    name        TEXT NOT NULL,
    PRIMARY KEY (listing_id, position)
);
CREATE INDEX listing_skills_id ON listing_skills (skill_id);

CREATE TABLE listing_tags (
    listing_id  TEXT NOT NULL REFERENCES listings(id),
    tag         TEXT NOT NULL,
    PRIMARY KEY (listing_id, tag)
);
CREATE INDEX listing_tags_tag ON listing_tags (tag);

CREATE TABLE listing_modes (
    listing_id  TEXT NOT NULL REFERENCES listings(id),
    direction   TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    PRIMARY KEY (listing_id, direction, media_type)
);
CREATE INDEX listing_modes_type ON listing_modes (direction, media_type);

-- casbin policies (p and g rules), read by every marketplace and meter.
CREATE TABLE casbin_rules (
    id     BIGSERIAL PRIMARY KEY,
    ptype  TEXT NOT NULL,
    v0     TEXT NOT NULL DEFAULT '',
    v1     TEXT NOT NULL DEFAULT '',
    v2     TEXT NOT NULL DEFAULT '',
    v3     TEXT NOT NULL DEFAULT '',
    v4     TEXT NOT NULL DEFAULT '',
    v5     TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX casbin_rules_unique ON casbin_rules (ptype, v0, v1, v2, v3, v4, v5);
