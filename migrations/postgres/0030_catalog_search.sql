-- Catalog search over PostgreSQL full-text search (issue 17).
--
-- listing_search is the narrow projection of a listing that searches read:
-- the columns filters and sort orders use, and the listing's document, a
-- tsvector of the words the application cut (listings.SearchWords), with
-- weights by field (A name, B skills and tags, C description) and the
-- facet tokens of its filterable values (listings.Facet) at weight D. The
-- document is built from a tsvector literal, not by to_tsvector, so no
-- text search parser or dictionary touches the words: SQLite and
-- PostgreSQL index exactly the same words. A GIN index serves word,
-- prefix and facet queries.
--
-- Text columns that are sorted or range-scanned use the C collation: the
-- byte order SQLite uses, whatever the database's default.
--
-- search_term_variants is the deletion neighbourhood of every word in the
-- catalog (listings.Variants), for typo matching with plain index lookups:
-- the same candidates on both databases, which pg_trgm's similarity would
-- not give.
--
-- The rows are written by listings/gormstore when a listing is stored;
-- listings stored before this migration are indexed when a store starts
-- (gormstore.IndexMissing).
CREATE TABLE listing_search (
    doc_id             BIGSERIAL PRIMARY KEY,
    listing_id         TEXT NOT NULL UNIQUE REFERENCES listings(id),
    status             TEXT NOT NULL,
    seller_org_id      TEXT NOT NULL,
    name_key           TEXT COLLATE "C" NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    currency           TEXT NOT NULL,
    monthly_fee_micros BIGINT NOT NULL,
    streaming          BOOLEAN NOT NULL,
    push_notifications BOOLEAN NOT NULL,
    document           TSVECTOR NOT NULL
);
CREATE INDEX listing_search_name ON listing_search (status, name_key, listing_id);
CREATE INDEX listing_search_created ON listing_search (status, created_at, listing_id);
CREATE INDEX listing_search_price ON listing_search (status, monthly_fee_micros, name_key, listing_id);
CREATE INDEX listing_search_price_desc ON listing_search (status, monthly_fee_micros DESC, name_key, listing_id);
CREATE INDEX listing_search_seller ON listing_search (seller_org_id, status, name_key);
CREATE INDEX listing_search_document ON listing_search USING gin (document);

CREATE TABLE search_term_variants (
    variant TEXT COLLATE "C" NOT NULL,
    term    TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (variant, term)
);
