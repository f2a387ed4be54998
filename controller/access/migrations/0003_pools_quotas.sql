-- Resource pools (GNS3 3.x's: named sets of projects, an ACE target),
-- who owns each project (its maker: whose quota it counts against), and
-- quotas on users, groups and pools. A quota's NULL member limits nothing.
CREATE TABLE resource_pools (
	resource_pool_id TEXT PRIMARY KEY,
	name             TEXT NOT NULL UNIQUE,
	created_at       TEXT NOT NULL,
	updated_at       TEXT NOT NULL
);

CREATE TABLE pool_resources (
	resource_pool_id TEXT NOT NULL REFERENCES resource_pools (resource_pool_id) ON DELETE CASCADE,
	resource_id      TEXT NOT NULL,
	resource_type    TEXT NOT NULL DEFAULT 'project' CHECK (resource_type = 'project'),
	name             TEXT,
	created_at       TEXT NOT NULL,
	updated_at       TEXT NOT NULL,
	PRIMARY KEY (resource_pool_id, resource_id)
);
CREATE INDEX pool_resources_resource ON pool_resources (resource_id);

CREATE TABLE project_owners (
	project_id TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
	created_at TEXT NOT NULL
);
CREATE INDEX project_owners_user ON project_owners (user_id);

CREATE TABLE quotas (
	subject_type      TEXT NOT NULL CHECK (subject_type IN ('user', 'group', 'pool')),
	subject_id        TEXT NOT NULL,
	max_nodes         INTEGER CHECK (max_nodes >= 0),
	max_running_nodes INTEGER CHECK (max_running_nodes >= 0),
	max_ram_mb        INTEGER CHECK (max_ram_mb >= 0),
	max_capture_bytes INTEGER CHECK (max_capture_bytes >= 0),
	updated_at        TEXT NOT NULL,
	PRIMARY KEY (subject_type, subject_id)
);
-- A quota goes with its subject.
CREATE TRIGGER users_quota AFTER DELETE ON users BEGIN
	DELETE FROM quotas WHERE subject_type = 'user' AND subject_id = OLD.user_id;
END;
CREATE TRIGGER user_groups_quota AFTER DELETE ON user_groups BEGIN
	DELETE FROM quotas WHERE subject_type = 'group' AND subject_id = OLD.user_group_id;
END;
CREATE TRIGGER resource_pools_quota AFTER DELETE ON resource_pools BEGIN
	DELETE FROM quotas WHERE subject_type = 'pool' AND subject_id = OLD.resource_pool_id;
END;
