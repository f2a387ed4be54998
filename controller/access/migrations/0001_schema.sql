-- Users, groups, roles, privileges and the ACL.
CREATE TABLE users (
	user_id         TEXT PRIMARY KEY,
	username        TEXT NOT NULL UNIQUE,
	email           TEXT UNIQUE,
	full_name       TEXT,
	hashed_password TEXT NOT NULL,
	is_active       INTEGER NOT NULL DEFAULT 1,
	is_superadmin   INTEGER NOT NULL DEFAULT 0,
	last_login      TEXT,
	created_at      TEXT NOT NULL,
	updated_at      TEXT NOT NULL
);

CREATE TABLE user_groups (
	user_group_id TEXT PRIMARY KEY,
	name          TEXT NOT NULL UNIQUE,
	is_builtin    INTEGER NOT NULL DEFAULT 0,
	created_at    TEXT NOT NULL,
	updated_at    TEXT NOT NULL
);

CREATE TABLE user_group_members (
	user_group_id TEXT NOT NULL REFERENCES user_groups (user_group_id) ON DELETE CASCADE,
	user_id       TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
	PRIMARY KEY (user_group_id, user_id)
);

CREATE TABLE privileges (
	privilege_id TEXT PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	description  TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL
);

CREATE TABLE roles (
	role_id     TEXT PRIMARY KEY,
	name        TEXT NOT NULL UNIQUE,
	description TEXT,
	is_builtin  INTEGER NOT NULL DEFAULT 0,
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL
);

CREATE TABLE role_privileges (
	role_id      TEXT NOT NULL REFERENCES roles (role_id) ON DELETE CASCADE,
	privilege_id TEXT NOT NULL REFERENCES privileges (privilege_id) ON DELETE CASCADE,
	PRIMARY KEY (role_id, privilege_id)
);

CREATE TABLE acl (
	ace_id     TEXT PRIMARY KEY,
	ace_type   TEXT NOT NULL CHECK (ace_type IN ('user', 'group')),
	path       TEXT NOT NULL,
	propagate  INTEGER NOT NULL,
	allowed    INTEGER NOT NULL,
	user_id    TEXT REFERENCES users (user_id) ON DELETE CASCADE,
	group_id   TEXT REFERENCES user_groups (user_group_id) ON DELETE CASCADE,
	role_id    TEXT NOT NULL REFERENCES roles (role_id) ON DELETE CASCADE,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	CHECK ((ace_type = 'user' AND user_id IS NOT NULL AND group_id IS NULL)
	    OR (ace_type = 'group' AND group_id IS NOT NULL AND user_id IS NULL))
);
CREATE INDEX acl_user ON acl (user_id);
CREATE INDEX acl_group ON acl (group_id);
CREATE INDEX acl_role ON acl (role_id);
