-- A labtap access database at schema version 1 (written by TestWriteV1Fixture).
-- The users' password is fixture-password.
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
INSERT INTO users VALUES ('6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a01', 'admin', NULL, 'Super Administrator', '$2a$04$A1hEGXrSlQd.xMfkDGmxbOw2ndOEVi9iPB/euMWA0vTtWS1jFnWlm', 1, 1, NULL, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO users VALUES ('6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a02', 'alice', 'alice@example.com', 'Alice', '$2a$04$A1hEGXrSlQd.xMfkDGmxbOw2ndOEVi9iPB/euMWA0vTtWS1jFnWlm', 1, 0, NULL, '2026-11-01T12:00:01', '2026-11-01T12:00:01');
INSERT INTO user_groups VALUES ('d4ba035e-097f-4116-b267-6dbdb8f72cc2', 'Administrators', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO user_groups VALUES ('7afe8184-a839-4d7c-bec6-7a4c4c2a3b8a', 'Users', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO user_group_members VALUES ('7afe8184-a839-4d7c-bec6-7a4c4c2a3b8a', '6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a02');
INSERT INTO privileges VALUES ('5d86ec9e-db92-4ed2-8b43-8821ad3658ec', 'User.Allocate', 'Create or delete a user', 0, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('180cc629-2623-4884-99d1-f6f4ffae53a0', 'User.Audit', 'View a user', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('974fbd56-ec79-4480-b258-a79cfdd9ebc2', 'User.Modify', 'Update a user', 2, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('bcc31888-85c1-4bc6-b405-8681eb0f0366', 'Group.Allocate', 'Create or delete a group', 3, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('e09f868a-8a21-48af-9dde-8699ab77c52f', 'Group.Audit', 'View a group', 4, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('bffea6a5-002c-4e24-a450-500f3b198ed3', 'Group.Modify', 'Update a group', 5, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('cc215d2e-0673-49a1-be2f-0ccb838b7fe1', 'Role.Allocate', 'Create or delete a role', 6, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('ca5c1d5f-64c5-4316-aa83-3009b5b4d8eb', 'Role.Audit', 'View a role', 7, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('e7c41233-5a4b-443e-a2db-84e2477525e0', 'Role.Modify', 'Update a role', 8, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('6bb84fd0-c4a7-40ee-a6c0-21d09249bdb0', 'ACE.Allocate', 'Create or delete an ACE', 9, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('d4891120-1ea7-45db-8cbf-66bc2c5a0fd8', 'ACE.Audit', 'View an ACE', 10, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('2e5c8ec7-8a11-4274-930f-e090efcd5b0e', 'ACE.Modify', 'Update an ACE', 11, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('80634cc4-64ec-4db2-89c9-91fce9646784', 'Pool.Allocate', 'Create or delete a resource pool', 12, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('93ccdcac-f491-4c01-a6bd-76f7c0ee37c0', 'Pool.Audit', 'View a resource pool', 13, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('d8189f80-ff29-40da-b3c3-5f88c7ada5d9', 'Pool.Modify', 'Update a resource pool', 14, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('67785613-2ce5-4aae-ba53-2093d50464c2', 'Template.Allocate', 'Create or delete a template', 15, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('ff973e3a-14a3-4e15-8c60-69e60b87bcd7', 'Template.Audit', 'View a template', 16, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('e00516a1-fc72-4514-ac3d-a7940ca35c95', 'Template.Modify', 'Update a template', 17, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('5147b0bf-a9da-4ddc-ab9e-3f775d287050', 'Project.Allocate', 'Create or delete a project', 18, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('6b53303d-7aaa-4755-9893-64d5a389f271', 'Project.Audit', 'View a project', 19, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('4f4cc9bf-944b-4298-abac-03ee618d145b', 'Project.Modify', 'Update a project', 20, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('42654a5a-b160-4969-b45d-202d3dfed3a7', 'Snapshot.Allocate', 'Create or delete project snapshots', 21, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('90f1e863-0463-4945-9e74-7877d7cb86b5', 'Snapshot.Restore', 'Restore a snapshot', 22, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('ae9fac06-2054-497b-bd82-cffc8eda1c98', 'Snapshot.Audit', 'View a snapshot', 23, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('c082656a-3eb9-4892-a69e-fcf84a21adb6', 'Node.Allocate', 'Create or delete a node', 24, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('f76f1516-2350-456d-aeb3-e47a716bbd00', 'Node.Audit', 'View a node', 25, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('4cb6f4bb-8d69-4b05-8da2-75601a1c9e17', 'Node.Modify', 'Update a node', 26, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('a2c0eb45-9012-4f49-917b-c0f0ab83a536', 'Node.Console', 'Console access to a node', 27, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('f6896433-d0d7-4644-8954-89bb66366ad5', 'Node.PowerMgmt', 'Power management for a node', 28, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('01ccf844-0307-4dd5-90ba-e225d16a405d', 'Link.Allocate', 'Create or delete a link', 29, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('f32d1666-2e08-4cfd-ba0b-1d6dc9766d69', 'Link.Audit', 'View a link', 30, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('f53c2fb7-3501-4675-a1c0-c387bb4eb737', 'Link.Modify', 'Update a link', 31, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('2515e46c-8905-40da-9863-461dc5a71453', 'Link.Capture', 'Capture packets on a link', 32, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('8f12241b-7c26-4220-b631-f672f9fd3213', 'Drawing.Allocate', 'Create or delete a drawing', 33, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('a3bffd3f-3255-4f60-a9df-e367844937b3', 'Drawing.Audit', 'View a drawing', 34, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('b77a1848-9803-4cd2-93bd-7b48200e1cba', 'Drawing.Modify', 'Update a drawing', 35, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('5e8aa22b-1485-40f2-a4a2-6996936bfe6e', 'Symbol.Allocate', 'Create or delete a symbol', 36, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('c042da4a-7a6f-4a4d-8fa1-01da188e2ce4', 'Symbol.Audit', 'View a symbol', 37, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('8e87c1f3-7aed-4634-85fd-7876297d9f2b', 'Image.Allocate', 'Create or delete an image', 38, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('4e67585a-0dbf-474c-9cd4-cbde6c872a99', 'Image.Audit', 'View an image', 39, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('bb995a0d-add3-4a33-809c-7747821e385d', 'Compute.Allocate', 'Create or delete a compute', 40, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('f171d7a7-acc2-4764-8e6f-c24d7cdec772', 'Compute.Modify', 'Update a compute', 41, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('306f837f-9dec-472b-a03f-e4f40e8a3faa', 'Compute.Audit', 'View a compute', 42, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('d1d69d8d-5983-4c0b-8023-bad1ecd07e57', 'Appliance.Allocate', 'Install an appliance', 43, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO privileges VALUES ('5783789b-49b0-4cb9-84ce-502c426a2e74', 'Appliance.Audit', 'View an appliance', 44, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'Administrator', 'Administrator role', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'User', 'User role', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'Auditor', 'Role with read only access', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', 'Template manager', 'Role to manage templates', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', 'User manager', 'Role to manage users and groups', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', 'ACL manager', 'Role to manage other roles and the ACL', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO roles VALUES ('36a61518-0e37-476e-8894-e7a99c4ec9c7', 'No Access', 'Role with no privileges (used to forbid access)', 1, '2026-11-01T12:00:00', '2026-11-01T12:00:00');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '5d86ec9e-db92-4ed2-8b43-8821ad3658ec');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '180cc629-2623-4884-99d1-f6f4ffae53a0');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '974fbd56-ec79-4480-b258-a79cfdd9ebc2');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'bcc31888-85c1-4bc6-b405-8681eb0f0366');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'e09f868a-8a21-48af-9dde-8699ab77c52f');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'bffea6a5-002c-4e24-a450-500f3b198ed3');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'cc215d2e-0673-49a1-be2f-0ccb838b7fe1');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'ca5c1d5f-64c5-4316-aa83-3009b5b4d8eb');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'e7c41233-5a4b-443e-a2db-84e2477525e0');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '6bb84fd0-c4a7-40ee-a6c0-21d09249bdb0');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'd4891120-1ea7-45db-8cbf-66bc2c5a0fd8');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '2e5c8ec7-8a11-4274-930f-e090efcd5b0e');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '80634cc4-64ec-4db2-89c9-91fce9646784');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '93ccdcac-f491-4c01-a6bd-76f7c0ee37c0');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'd8189f80-ff29-40da-b3c3-5f88c7ada5d9');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '67785613-2ce5-4aae-ba53-2093d50464c2');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'ff973e3a-14a3-4e15-8c60-69e60b87bcd7');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'e00516a1-fc72-4514-ac3d-a7940ca35c95');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '5147b0bf-a9da-4ddc-ab9e-3f775d287050');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '6b53303d-7aaa-4755-9893-64d5a389f271');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '4f4cc9bf-944b-4298-abac-03ee618d145b');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '42654a5a-b160-4969-b45d-202d3dfed3a7');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '90f1e863-0463-4945-9e74-7877d7cb86b5');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'ae9fac06-2054-497b-bd82-cffc8eda1c98');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'c082656a-3eb9-4892-a69e-fcf84a21adb6');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'f76f1516-2350-456d-aeb3-e47a716bbd00');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '4cb6f4bb-8d69-4b05-8da2-75601a1c9e17');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'a2c0eb45-9012-4f49-917b-c0f0ab83a536');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'f6896433-d0d7-4644-8954-89bb66366ad5');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '01ccf844-0307-4dd5-90ba-e225d16a405d');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'f32d1666-2e08-4cfd-ba0b-1d6dc9766d69');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'f53c2fb7-3501-4675-a1c0-c387bb4eb737');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '2515e46c-8905-40da-9863-461dc5a71453');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '8f12241b-7c26-4220-b631-f672f9fd3213');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'a3bffd3f-3255-4f60-a9df-e367844937b3');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'b77a1848-9803-4cd2-93bd-7b48200e1cba');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '5e8aa22b-1485-40f2-a4a2-6996936bfe6e');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'c042da4a-7a6f-4a4d-8fa1-01da188e2ce4');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '8e87c1f3-7aed-4634-85fd-7876297d9f2b');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '4e67585a-0dbf-474c-9cd4-cbde6c872a99');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'bb995a0d-add3-4a33-809c-7747821e385d');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'f171d7a7-acc2-4764-8e6f-c24d7cdec772');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '306f837f-9dec-472b-a03f-e4f40e8a3faa');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', 'd1d69d8d-5983-4c0b-8023-bad1ecd07e57');
INSERT INTO role_privileges VALUES ('55fbaf66-92ae-4251-b261-228bd668af5a', '5783789b-49b0-4cb9-84ce-502c426a2e74');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'ff973e3a-14a3-4e15-8c60-69e60b87bcd7');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '5147b0bf-a9da-4ddc-ab9e-3f775d287050');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '6b53303d-7aaa-4755-9893-64d5a389f271');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '4f4cc9bf-944b-4298-abac-03ee618d145b');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '42654a5a-b160-4969-b45d-202d3dfed3a7');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '90f1e863-0463-4945-9e74-7877d7cb86b5');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'ae9fac06-2054-497b-bd82-cffc8eda1c98');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'c082656a-3eb9-4892-a69e-fcf84a21adb6');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'f76f1516-2350-456d-aeb3-e47a716bbd00');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '4cb6f4bb-8d69-4b05-8da2-75601a1c9e17');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'a2c0eb45-9012-4f49-917b-c0f0ab83a536');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'f6896433-d0d7-4644-8954-89bb66366ad5');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '01ccf844-0307-4dd5-90ba-e225d16a405d');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'f32d1666-2e08-4cfd-ba0b-1d6dc9766d69');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'f53c2fb7-3501-4675-a1c0-c387bb4eb737');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '2515e46c-8905-40da-9863-461dc5a71453');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '8f12241b-7c26-4220-b631-f672f9fd3213');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'a3bffd3f-3255-4f60-a9df-e367844937b3');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'b77a1848-9803-4cd2-93bd-7b48200e1cba');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'c042da4a-7a6f-4a4d-8fa1-01da188e2ce4');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '4e67585a-0dbf-474c-9cd4-cbde6c872a99');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '306f837f-9dec-472b-a03f-e4f40e8a3faa');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', 'd1d69d8d-5983-4c0b-8023-bad1ecd07e57');
INSERT INTO role_privileges VALUES ('9605bd9a-65d7-4667-a878-530cde72abc4', '5783789b-49b0-4cb9-84ce-502c426a2e74');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'ff973e3a-14a3-4e15-8c60-69e60b87bcd7');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', '6b53303d-7aaa-4755-9893-64d5a389f271');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'ae9fac06-2054-497b-bd82-cffc8eda1c98');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'f76f1516-2350-456d-aeb3-e47a716bbd00');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'f32d1666-2e08-4cfd-ba0b-1d6dc9766d69');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'a3bffd3f-3255-4f60-a9df-e367844937b3');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', 'c042da4a-7a6f-4a4d-8fa1-01da188e2ce4');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', '4e67585a-0dbf-474c-9cd4-cbde6c872a99');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', '306f837f-9dec-472b-a03f-e4f40e8a3faa');
INSERT INTO role_privileges VALUES ('1ea8ef8c-2386-4699-8542-e42e73f11e4a', '5783789b-49b0-4cb9-84ce-502c426a2e74');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', '67785613-2ce5-4aae-ba53-2093d50464c2');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', 'ff973e3a-14a3-4e15-8c60-69e60b87bcd7');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', 'e00516a1-fc72-4514-ac3d-a7940ca35c95');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', '5e8aa22b-1485-40f2-a4a2-6996936bfe6e');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', 'c042da4a-7a6f-4a4d-8fa1-01da188e2ce4');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', '8e87c1f3-7aed-4634-85fd-7876297d9f2b');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', '4e67585a-0dbf-474c-9cd4-cbde6c872a99');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', 'd1d69d8d-5983-4c0b-8023-bad1ecd07e57');
INSERT INTO role_privileges VALUES ('da93a342-4594-4808-8574-3d83cbbb52c4', '5783789b-49b0-4cb9-84ce-502c426a2e74');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', '5d86ec9e-db92-4ed2-8b43-8821ad3658ec');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', '180cc629-2623-4884-99d1-f6f4ffae53a0');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', '974fbd56-ec79-4480-b258-a79cfdd9ebc2');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', 'bcc31888-85c1-4bc6-b405-8681eb0f0366');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', 'e09f868a-8a21-48af-9dde-8699ab77c52f');
INSERT INTO role_privileges VALUES ('b867c02b-5041-47ef-9f31-ae7a4844d16a', 'bffea6a5-002c-4e24-a450-500f3b198ed3');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', 'cc215d2e-0673-49a1-be2f-0ccb838b7fe1');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', 'ca5c1d5f-64c5-4316-aa83-3009b5b4d8eb');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', 'e7c41233-5a4b-443e-a2db-84e2477525e0');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', '6bb84fd0-c4a7-40ee-a6c0-21d09249bdb0');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', 'd4891120-1ea7-45db-8cbf-66bc2c5a0fd8');
INSERT INTO role_privileges VALUES ('8ce8697c-1dbc-4815-bb6c-99eac5305f41', '2e5c8ec7-8a11-4274-930f-e090efcd5b0e');
INSERT INTO acl VALUES ('6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a03', 'group', '/projects', 1, 1, NULL, '7afe8184-a839-4d7c-bec6-7a4c4c2a3b8a', '9605bd9a-65d7-4667-a878-530cde72abc4', '2026-11-01T12:00:02', '2026-11-01T12:00:02');
PRAGMA user_version = 1;
