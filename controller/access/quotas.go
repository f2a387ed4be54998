package access

import (
	"context"
	"database/sql"
	"slices"
)

// Quotas. A user, a group or a pool may carry limits on what its projects
// hold and run: nodes, running nodes, RAM of running QEMU/docker nodes,
// capture bytes on disk. A user's projects are those it owns (SetOwner);
// a group's, those its members own (but its administrators); a pool's,
// those in it. A change in a
// project must keep its owner's quota, the quota of each of its owner's
// groups (unless the owner is an administrator: an administrator is
// limited only by a quota set on itself) and the quota of each of its
// pools. The counting and the refusing are controller/project's.

// NoLimit is a Limits member that limits nothing.
const NoLimit = -1

// Quota subjects.
const (
	QuotaUser  = "user"
	QuotaGroup = "group"
	QuotaPool  = "pool"
)

// Bounds of a limit.
const (
	MaxQuotaNodes        = 1 << 20
	MaxQuotaRAMMB        = 1 << 30 // 1 PiB
	MaxQuotaCaptureBytes = 1 << 50
)

// Limits are a quota's limits; NoLimit members limit nothing.
type Limits struct {
	Nodes, RunningNodes, RAMMB, CaptureBytes int64
}

// Unlimited limits nothing.
func Unlimited() Limits { return Limits{NoLimit, NoLimit, NoLimit, NoLimit} }

func quotaKey(kind, id string) string { return kind + "/" + id }

func (l Limits) check() error {
	for _, m := range []struct {
		name string
		v    int64
		max  int64
	}{
		{"max_nodes", l.Nodes, MaxQuotaNodes},
		{"max_running_nodes", l.RunningNodes, MaxQuotaNodes},
		{"max_ram_mb", l.RAMMB, MaxQuotaRAMMB},
		{"max_capture_bytes", l.CaptureBytes, MaxQuotaCaptureBytes},
	} {
		if m.v != NoLimit && (m.v < 0 || m.v > m.max) {
			return errorf(ErrInvalid, "%s must be null (no limit) or 0 to %d", m.name, m.max)
		}
	}
	return nil
}

// subject checks that the subject of a quota exists.
func (st *state) subject(kind, id string) error {
	switch kind {
	case QuotaUser:
		if _, ok := st.users[id]; !ok {
			return errorf(ErrNotFound, "User '%s' not found", id)
		}
	case QuotaGroup:
		if _, ok := st.groups[id]; !ok {
			return errorf(ErrNotFound, "User group '%s' not found", id)
		}
	case QuotaPool:
		if _, ok := st.pools.pools[id]; !ok {
			return errorf(ErrNotFound, "Resource pool '%s' not found", id)
		}
	default:
		return errorf(ErrInvalid, "a quota is a user's, a group's or a pool's")
	}
	return nil
}

// Quota returns the limits of a user, group or pool (Unlimited when none
// is set).
func (s *Service) Quota(kind, id string) (Limits, error) {
	st := s.state.Load()
	if err := st.subject(kind, id); err != nil {
		return Limits{}, err
	}
	if l, ok := st.pools.quotas[quotaKey(kind, id)]; ok {
		return l, nil
	}
	return Unlimited(), nil
}

// SetQuota sets the limits of a user, group or pool; Unlimited removes
// the quota.
func (s *Service) SetQuota(ctx context.Context, kind, id string, l Limits) error {
	if err := l.check(); err != nil {
		return err
	}
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.subject(kind, id); err != nil {
			return err
		}
		if l == Unlimited() {
			_, err := tx.ExecContext(ctx, "DELETE FROM quotas WHERE subject_type = ? AND subject_id = ?", kind, id)
			return err
		}
		v := func(n int64) any {
			if n == NoLimit {
				return nil
			}
			return n
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO quotas (subject_type, subject_id, max_nodes, max_running_nodes, max_ram_mb, max_capture_bytes, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (subject_type, subject_id) DO UPDATE SET max_nodes = excluded.max_nodes,
			max_running_nodes = excluded.max_running_nodes, max_ram_mb = excluded.max_ram_mb,
			max_capture_bytes = excluded.max_capture_bytes, updated_at = excluded.updated_at`,
			kind, id, v(l.Nodes), v(l.RunningNodes), v(l.RAMMB), v(l.CaptureBytes), s.stamp())
		return err
	})
}

// QuotaScope is one quota a change in a project must keep: Max over
// Projects. Scope names it for a refusal ("user alice").
type QuotaScope struct {
	Scope    string
	Projects []string
	Max      Limits
}

// QuotaProjects are the projects whose usage counts against the quota of
// a user, group or pool.
func (s *Service) QuotaProjects(kind, id string) []string {
	return s.state.Load().quotaProjects(kind, id)
}

func (st *state) quotaProjects(kind, id string) []string {
	switch kind {
	case QuotaUser:
		return slices.Clone(st.pools.owned[id])
	case QuotaGroup:
		// An administrator's projects are not its groups' to count, as
		// its groups' quotas do not limit it.
		var out []string
		for _, m := range st.members[id] {
			if !st.administrator(m) {
				out = append(out, st.pools.owned[m]...)
			}
		}
		return out
	case QuotaPool:
		var out []string
		for _, r := range st.pools.resources[id] {
			out = append(out, r.ID)
		}
		return out
	}
	return nil
}

// QuotasFor lists the quotas a change in project projectID must keep.
func (s *Service) QuotasFor(projectID string) []QuotaScope {
	st := s.state.Load()
	var out []QuotaScope
	add := func(kind, id, name string) {
		if l, ok := st.pools.quotas[quotaKey(kind, id)]; ok {
			out = append(out, QuotaScope{Scope: kind + " " + name, Projects: st.quotaProjects(kind, id), Max: l})
		}
	}
	if uid, ok := st.pools.owners[projectID]; ok {
		if u := st.users[uid]; u != nil {
			add(QuotaUser, uid, u.Username)
			if !st.administrator(uid) {
				for _, gid := range st.userGroups[uid] {
					add(QuotaGroup, gid, st.groups[gid].Name)
				}
			}
		}
	}
	for _, pid := range st.pools.projectPools[projectID] {
		add(QuotaPool, pid, st.pools.pools[pid].Name)
	}
	return out
}

// administrator is Service.Administrator on a state.
func (st *state) administrator(userID string) bool {
	u, ok := st.users[userID]
	if !ok {
		return false
	}
	if u.Superadmin {
		return true
	}
	id := st.roleID(RoleAdministrator)
	return id != "" && u.Active && len(st.rolePrivs[id]) > 0 && st.holdsRole(userID, id, "/")
}
