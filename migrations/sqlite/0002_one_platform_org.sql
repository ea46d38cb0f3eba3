-- At most one platform (operator) org, even when several replicas start at once.
CREATE UNIQUE INDEX orgs_one_platform ON orgs (platform) WHERE platform;
