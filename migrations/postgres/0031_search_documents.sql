-- Catalog search documents in their own table (issue 17).
--
-- listing_search keeps the narrow columns filters and sort orders read;
-- listing_documents holds each listing's tsvector, with the listing's id
-- and name key, so a ranked page (relevance, then name) reads that table
-- alone, and an order by price, name or date joins only the narrow rows.
-- Before, the tsvector (about 900 bytes) sat inline in listing_search and
-- every candidate of a column filter or order read it.
--
-- The document changes form: the text words keep their positions and
-- weights (A name, B skills and tags, C description), and the facet tokens
-- (listings.Facet) become positionless lexemes that start with '~', which
-- no word has (words are letters and digits). So no query needs a weight
-- restriction to keep words and facets apart, and the GIN index answers a
-- match without rechecking each row's document (a weight restriction
-- makes PostgreSQL read every candidate's tsvector to check it). ts_rank
-- reads only the lexemes a query names, so relevance is unchanged.
CREATE TABLE listing_documents (
    doc_id     BIGINT PRIMARY KEY REFERENCES listing_search(doc_id) ON DELETE CASCADE,
    listing_id TEXT NOT NULL UNIQUE,
    name_key   TEXT COLLATE "C" NOT NULL,
    document   TSVECTOR NOT NULL
);

-- The existing documents, converted: text positions (weights A, B, C) as
-- they are, facets (weight D) as '~' lexemes. gormstore.TSVector writes
-- the same form.
INSERT INTO listing_documents (doc_id, listing_id, name_key, document)
SELECT doc_id, listing_id, name_key,
       ts_filter(document, '{a,b,c}')
       || array_to_tsvector(ARRAY(SELECT '~' || f.lexeme FROM unnest(ts_filter(document, '{d}')) AS f))
FROM listing_search;

CREATE INDEX listing_documents_document ON listing_documents USING gin (document);

DROP INDEX listing_search_document;
ALTER TABLE listing_search DROP COLUMN document;

-- Dropping a column leaves its bytes in every row until the row is
-- written again; a type change with an expression rewrites the table
-- (PostgreSQL's documented way to reclaim them), so listing_search is
-- narrow at once.
ALTER TABLE listing_search ALTER COLUMN status TYPE TEXT USING status || '';
