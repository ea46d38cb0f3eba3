-- Active health checks of listings' agents (issue 26, item 2): what the
-- last probe of each agent endpoint said, kept per listing and endpoint
-- URL. A row changes only when its endpoint goes up or down (since) or its
-- cause changes, never at every probe.
CREATE TABLE listing_endpoint_health (
    listing_id  TEXT NOT NULL REFERENCES listings(id),
    url         TEXT NOT NULL,
    up          BOOLEAN NOT NULL,
    since       TIMESTAMP NOT NULL,
    cause       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (listing_id, url)
);
