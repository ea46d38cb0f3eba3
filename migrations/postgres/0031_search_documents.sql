-- Catalog search documents in their own table (issue 17).
--
-- listing_search keeps the narrow columns that browsing (no words, no
-- many-valued filter) reads, walking its indexes; before, the tsvector
-- (about 900 bytes) sat inline in it and made every row it read wide.
-- listing_documents holds each listing's tsvector with copies of the
-- columns a full-text search filters or sorts on (seller, name key, date,
-- price), so a full-text search reads that table alone, never a join: the
-- copies are rewritten with the document whenever a listing is stored.
--
-- The document changes form: the text words keep their positions and
-- weights (A name, B skills and tags, C description), and the facet tokens
-- (listings.Facet: 'z', the kind, the value in hex) become positionless
-- lexemes that start with '~', which no word has (words are letters and
-- digits): '~', the kind and the value itself when it is printable ASCII,
-- else '~' and the token as it was (gormstore's facetLexeme). So no query
-- needs a weight restriction to keep words and facets apart, and the GIN
-- index answers a match without rechecking each row's document (a weight
-- restriction makes PostgreSQL read every candidate's tsvector to check
-- it); and facets, almost half of a document's bytes in hex, take half as
-- many. ts_rank reads only the lexemes a query names, so relevance is
-- unchanged.
CREATE TABLE listing_documents (
    doc_id             BIGINT PRIMARY KEY REFERENCES listing_search(doc_id) ON DELETE CASCADE,
    listing_id         TEXT NOT NULL UNIQUE,
    seller_org_id      TEXT NOT NULL,
    name_key           TEXT COLLATE "C" NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    monthly_fee_micros BIGINT NOT NULL,
    document           TSVECTOR NOT NULL
);

-- The existing documents, converted: text positions (weights A, B, C) as
-- they are, facets (weight D) as '~' lexemes. gormstore.TSVector writes
-- the same form. Hex pairs 20 to 7e are the printable ASCII bytes.
INSERT INTO listing_documents (doc_id, listing_id, seller_org_id, name_key, created_at, monthly_fee_micros, document)
SELECT doc_id, listing_id, seller_org_id, name_key, created_at, monthly_fee_micros,
       ts_filter(document, '{a,b,c}')
       || array_to_tsvector(ARRAY(
           SELECT CASE WHEN substr(f.lexeme, 3) ~ '^([2-6][0-9a-f]|7[0-9a-e])*$'
                       THEN '~' || substr(f.lexeme, 2, 1) || convert_from(decode(substr(f.lexeme, 3), 'hex'), 'UTF8')
                       ELSE '~' || f.lexeme END
           FROM unnest(ts_filter(document, '{d}')) AS f))
FROM listing_search;

CREATE INDEX listing_documents_document ON listing_documents USING gin (document);

DROP INDEX listing_search_document;
ALTER TABLE listing_search DROP COLUMN document;

-- Dropping a column leaves its bytes in every row until the row is
-- written again; a type change with an expression rewrites the table
-- (PostgreSQL's documented way to reclaim them), so listing_search is
-- narrow at once.
ALTER TABLE listing_search ALTER COLUMN status TYPE TEXT USING status || '';

-- Fresh planner statistics for both tables (the new one has none).
ANALYZE listing_search;
ANALYZE listing_documents;
