-- The catalog's default order (by name, case-insensitive, within a status)
-- read from an index instead of sorting every published listing.
CREATE INDEX listings_status_lower_name ON listings (status, LOWER(name), id);
