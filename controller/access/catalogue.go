package access

// The built-in privileges and roles, as GNS3 3.x seeds them: names and
// descriptions are wire data, kept byte for byte, and the privileges are
// in GNS3's seeding order (the order GET /v3/access/privileges lists them).

// privilegeSeed is one built-in privilege.
type privilegeSeed struct{ name, description string }

var builtinPrivileges = []privilegeSeed{
	{"User.Allocate", "Create or delete a user"},
	{"User.Audit", "View a user"},
	{"User.Modify", "Update a user"},
	{"Group.Allocate", "Create or delete a group"},
	{"Group.Audit", "View a group"},
	{"Group.Modify", "Update a group"},
	{"Role.Allocate", "Create or delete a role"},
	{"Role.Audit", "View a role"},
	{"Role.Modify", "Update a role"},
	{"ACE.Allocate", "Create or delete an ACE"},
	{"ACE.Audit", "View an ACE"},
	{"ACE.Modify", "Update an ACE"},
	{"Pool.Allocate", "Create or delete a resource pool"},
	{"Pool.Audit", "View a resource pool"},
	{"Pool.Modify", "Update a resource pool"},
	{"Template.Allocate", "Create or delete a template"},
	{"Template.Audit", "View a template"},
	{"Template.Modify", "Update a template"},
	{"Project.Allocate", "Create or delete a project"},
	{"Project.Audit", "View a project"},
	{"Project.Modify", "Update a project"},
	{"Snapshot.Allocate", "Create or delete project snapshots"},
	{"Snapshot.Restore", "Restore a snapshot"},
	{"Snapshot.Audit", "View a snapshot"},
	{"Node.Allocate", "Create or delete a node"},
	{"Node.Audit", "View a node"},
	{"Node.Modify", "Update a node"},
	{"Node.Console", "Console access to a node"},
	{"Node.PowerMgmt", "Power management for a node"},
	{"Link.Allocate", "Create or delete a link"},
	{"Link.Audit", "View a link"},
	{"Link.Modify", "Update a link"},
	{"Link.Capture", "Capture packets on a link"},
	{"Drawing.Allocate", "Create or delete a drawing"},
	{"Drawing.Audit", "View a drawing"},
	{"Drawing.Modify", "Update a drawing"},
	{"Symbol.Allocate", "Create or delete a symbol"},
	{"Symbol.Audit", "View a symbol"},
	{"Image.Allocate", "Create or delete an image"},
	{"Image.Audit", "View an image"},
	{"Compute.Allocate", "Create or delete a compute"},
	{"Compute.Modify", "Update a compute"},
	{"Compute.Audit", "View a compute"},
	{"Appliance.Allocate", "Install an appliance"},
	{"Appliance.Audit", "View an appliance"},
}

// roleSeed is one built-in role; privileges nil means every privilege.
type roleSeed struct {
	name, description string
	privileges        []string
}

// NoAccess is the built-in role with no privilege. GNS3 loads a deny ACE
// only for the privileges of its role, so there a deny with No Access
// denies nothing; here a deny whose role holds no privilege denies every
// privilege, which is what the role's name promises.
const NoAccess = "No Access"

var builtinRoles = []roleSeed{
	{"Administrator", "Administrator role", nil},
	{"User", "User role", []string{
		"Template.Audit",
		"Project.Allocate", "Project.Audit", "Project.Modify",
		"Snapshot.Allocate", "Snapshot.Restore", "Snapshot.Audit",
		"Node.Allocate", "Node.Audit", "Node.Modify", "Node.Console", "Node.PowerMgmt",
		"Link.Allocate", "Link.Audit", "Link.Modify", "Link.Capture",
		"Drawing.Allocate", "Drawing.Audit", "Drawing.Modify",
		"Symbol.Audit", "Image.Audit", "Compute.Audit",
		"Appliance.Allocate", "Appliance.Audit",
	}},
	{"Auditor", "Role with read only access", []string{
		"Template.Audit", "Project.Audit", "Snapshot.Audit", "Node.Audit", "Link.Audit",
		"Drawing.Audit", "Symbol.Audit", "Image.Audit", "Compute.Audit", "Appliance.Audit",
	}},
	{"Template manager", "Role to manage templates", []string{
		"Template.Allocate", "Template.Audit", "Template.Modify",
		"Symbol.Allocate", "Symbol.Audit", "Image.Allocate", "Image.Audit",
		"Appliance.Allocate", "Appliance.Audit",
	}},
	{"User manager", "Role to manage users and groups", []string{
		"User.Allocate", "User.Audit", "User.Modify", "Group.Allocate", "Group.Audit", "Group.Modify",
	}},
	{"ACL manager", "Role to manage other roles and the ACL", []string{
		"Role.Allocate", "Role.Audit", "Role.Modify", "ACE.Allocate", "ACE.Audit", "ACE.Modify",
	}},
	{NoAccess, "Role with no privileges (used to forbid access)", []string{}},
}

// builtinGroups are the groups a new database has, with no member.
var builtinGroups = []string{"Administrators", "Users"}
