-- Sign-ups waiting for their mailed link (the confirm sign-up mode,
-- contracts.SignupMails; issue 30 item 6): only the SHA-256 of the link's
-- token is stored, and the e-mail: whoever follows the link chooses the
-- org's name and the password. A link is taken once (the row is deleted)
-- and expired rows are swept as new ones come.
CREATE TABLE pending_signups (
    token_hash    TEXT PRIMARY KEY,
    email         TEXT NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    expires_at    TIMESTAMP NOT NULL
);
CREATE INDEX pending_signups_expires ON pending_signups (expires_at);
