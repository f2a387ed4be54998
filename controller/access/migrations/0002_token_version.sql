-- Revocable tokens: a token carries its user's token_version, which goes up
-- at logout, password change, deactivation and rename.
ALTER TABLE users ADD COLUMN token_version INTEGER NOT NULL DEFAULT 0;
