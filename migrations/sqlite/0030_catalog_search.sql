-- Catalog search over SQLite FTS5 (issue 17).
--
-- listing_search is the narrow projection of a listing that searches read:
-- the columns filters and sort orders use, one small row per listing, so
-- counting and ordering never touch the wide listings rows (cards are
-- kilobytes). doc_id is the rowid of the listing's document in
-- listing_fts.
--
-- listing_fts holds, per listing, the words the application cut
-- (listings.SearchWords: lower-case runs of letters and digits), by field,
-- and the facet tokens of its filterable values (listings.Facet). The
-- unicode61 tokenizer only splits them at the spaces between them, so
-- SQLite and PostgreSQL index exactly the same words. The table is
-- contentless and keeps no column sizes: bm25 then ranks without length
-- normalisation (as PostgreSQL's ts_rank does by default), and costs a
-- sixth of what it does reading every match's size from the docsize table
-- (measured at 100,000 listings: 10 ms against 61 ms of CPU to rank the
-- 27,000 listings a broad word finds). Prefix indexes of 2
-- to 6 characters serve prefix queries (every query word is one): without
-- them a prefix is the merge of every word it starts, a few times slower
-- on common prefixes. A published listing's document has a positive rowid,
-- any other a negative one (gormstore's index), so a public search reads
-- only rowid > 0.
--
-- search_term_variants is the deletion neighbourhood of every word in the
-- catalog (listings.Variants), for typo matching with plain index lookups.
--
-- The rows are written by listings/gormstore when a listing is stored;
-- listings stored before this migration are indexed when a store starts
-- (gormstore.IndexMissing).
CREATE TABLE listing_search (
    doc_id             INTEGER PRIMARY KEY,
    listing_id         TEXT NOT NULL UNIQUE REFERENCES listings(id),
    status             TEXT NOT NULL,
    seller_org_id      TEXT NOT NULL,
    name_key           TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    currency           TEXT NOT NULL,
    monthly_fee_micros BIGINT NOT NULL,
    streaming          BOOLEAN NOT NULL,
    push_notifications BOOLEAN NOT NULL
);
CREATE INDEX listing_search_name ON listing_search (status, name_key, listing_id);
CREATE INDEX listing_search_created ON listing_search (status, created_at, listing_id);
CREATE INDEX listing_search_price ON listing_search (status, monthly_fee_micros, name_key, listing_id);
CREATE INDEX listing_search_price_desc ON listing_search (status, monthly_fee_micros DESC, name_key, listing_id);
CREATE INDEX listing_search_seller ON listing_search (seller_org_id, status, name_key);

CREATE VIRTUAL TABLE listing_fts USING fts5(
    name, skills, description, facets,
    content = '',
    columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 0',
    prefix = '2 3 4 5 6'
);

-- What each document of listing_fts holds, as inserted: a contentless
-- FTS5 table forgets its text, and deleting a document (when its listing
-- changes) takes the very words it was inserted with.
CREATE TABLE listing_fts_doc (
    doc_id      INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    skills      TEXT NOT NULL,
    description TEXT NOT NULL,
    facets      TEXT NOT NULL
);

CREATE TABLE search_term_variants (
    variant TEXT NOT NULL,
    term    TEXT NOT NULL,
    PRIMARY KEY (variant, term)
) WITHOUT ROWID;
