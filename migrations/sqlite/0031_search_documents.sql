-- Catalog search documents in their own table: PostgreSQL only (see
-- migrations/postgres/0031_search_documents.sql). SQLite's documents are
-- already apart from listing_search, in listing_fts. Nothing changes here.
SELECT 1;
