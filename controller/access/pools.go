package access

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Resource pools, GNS3 3.x's: a named set of projects, used as an ACE
// target (an ACE on /pools/{id} gives its role on every project of the
// pool) and here also as a quota's scope. Where GNS3 3.x is weak this
// differs: taking a project out of one pool leaves it in the others, and
// a pool ACE is one more ACE at the project's path, not a walk of its own
// that ignores the project's other ACEs.

// MaxPoolNameLen bounds a pool's name, in bytes.
const MaxPoolNameLen = 64

// Pool is a resource pool.
type Pool struct {
	ID, Name         string
	Created, Updated time.Time
}

// Resource is a project in a pool. Name is the project's name when it
// was added.
type Resource struct {
	ID, Type, Name   string
	Created, Updated time.Time
}

// poolState is the published copy of the pools, the projects' owners and
// the quotas.
type poolState struct {
	pools        map[string]*Pool
	poolOrder    []*Pool
	resources    map[string][]Resource // pool id -> its projects, by addition
	projectPools map[string][]string   // project id -> pool ids
	owners       map[string]string     // project id -> user id
	owned        map[string][]string   // user id -> project ids
	quotas       map[string]Limits     // quotaKey -> limits
}

func loadPools(ctx context.Context, db *sql.DB, st *state) error {
	ps := poolState{pools: map[string]*Pool{}, resources: map[string][]Resource{}, projectPools: map[string][]string{},
		owners: map[string]string{}, owned: map[string][]string{}, quotas: map[string]Limits{}}
	err := eachRow(ctx, db, "SELECT resource_pool_id, name, created_at, updated_at FROM resource_pools ORDER BY created_at, rowid", func(r *sql.Rows) error {
		var p Pool
		var created, updated sql.NullString
		if err := r.Scan(&p.ID, &p.Name, &created, &updated); err != nil {
			return err
		}
		p.Created, p.Updated = parseTime(created), parseTime(updated)
		ps.pools[p.ID] = &p
		ps.poolOrder = append(ps.poolOrder, &p)
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, db, `SELECT resource_pool_id, resource_id, resource_type, name, created_at, updated_at
		FROM pool_resources ORDER BY created_at, rowid`, func(r *sql.Rows) error {
		var pool string
		var res Resource
		var name, created, updated sql.NullString
		if err := r.Scan(&pool, &res.ID, &res.Type, &name, &created, &updated); err != nil {
			return err
		}
		res.Name, res.Created, res.Updated = name.String, parseTime(created), parseTime(updated)
		ps.resources[pool] = append(ps.resources[pool], res)
		ps.projectPools[res.ID] = append(ps.projectPools[res.ID], pool)
		return nil
	})
	if err != nil {
		return err
	}
	err = eachRow(ctx, db, "SELECT project_id, user_id FROM project_owners ORDER BY created_at, rowid", func(r *sql.Rows) error {
		var p, u string
		if err := r.Scan(&p, &u); err != nil {
			return err
		}
		ps.owners[p] = u
		ps.owned[u] = append(ps.owned[u], p)
		return nil
	})
	if err != nil {
		return err
	}
	// A project with no recorded maker belongs to the first user given
	// the built-in User role on it alone (what a class's copies and a
	// project made before owners were recorded have).
	for _, a := range st.aces {
		id, ok := strings.CutPrefix(a.Path, "/projects/")
		if !ok || strings.Contains(id, "/") || a.Type != ACEUser || !a.Allowed || ps.owners[id] != "" {
			continue
		}
		if r := st.roles[a.RoleID]; r != nil && r.Builtin && r.Name == RoleUser {
			ps.owners[id] = a.UserID
			ps.owned[a.UserID] = append(ps.owned[a.UserID], id)
		}
	}
	err = eachRow(ctx, db, `SELECT subject_type, subject_id, max_nodes, max_running_nodes, max_ram_mb, max_capture_bytes
		FROM quotas`, func(r *sql.Rows) error {
		var kind, id string
		var v [4]sql.NullInt64
		if err := r.Scan(&kind, &id, &v[0], &v[1], &v[2], &v[3]); err != nil {
			return err
		}
		l := Limits{}
		for i, p := range []*int64{&l.Nodes, &l.RunningNodes, &l.RAMMB, &l.CaptureBytes} {
			*p = NoLimit
			if v[i].Valid {
				*p = v[i].Int64
			}
		}
		ps.quotas[quotaKey(kind, id)] = l
		return nil
	})
	if err != nil {
		return err
	}
	st.pools = ps
	return nil
}

// Pools lists the resource pools, oldest first.
func (s *Service) Pools() []Pool {
	st := s.state.Load()
	out := make([]Pool, 0, len(st.pools.poolOrder))
	for _, p := range st.pools.poolOrder {
		out = append(out, *p)
	}
	return out
}

// Pool returns the pool id.
func (s *Service) Pool(id string) (Pool, error) {
	p, ok := s.state.Load().pools.pools[id]
	if !ok {
		return Pool{}, errorf(ErrNotFound, "Resource pool '%s' not found", id)
	}
	return *p, nil
}

func checkPoolName(name string) error {
	if name == "" {
		return errorf(ErrInvalid, "name must not be empty")
	}
	return checkText("name", name, MaxPoolNameLen)
}

func (st *state) poolNamed(name, except string) error {
	for _, p := range st.pools.pools {
		if p.Name == name && p.ID != except {
			return errorf(ErrExists, "Resource pool '%s' already exists", name)
		}
	}
	return nil
}

// CreatePool adds a pool.
func (s *Service) CreatePool(ctx context.Context, name string) (Pool, error) {
	if err := checkPoolName(name); err != nil {
		return Pool{}, err
	}
	id := uuid.NewString()
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if err := st.poolNamed(name, ""); err != nil {
			return err
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, "INSERT INTO resource_pools (resource_pool_id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
			id, name, now, now)
		return err
	})
	if err != nil {
		return Pool{}, err
	}
	return s.Pool(id)
}

// UpdatePool renames a pool. A name another pool has is ErrExists (GNS3
// 3.x answers its database error, a 500).
func (s *Service) UpdatePool(ctx context.Context, id, name string) (Pool, error) {
	if err := checkPoolName(name); err != nil {
		return Pool{}, err
	}
	err := s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.pools.pools[id]; !ok {
			return errorf(ErrNotFound, "Resource pool '%s' not found", id)
		}
		if err := st.poolNamed(name, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE resource_pools SET name = ?, updated_at = ? WHERE resource_pool_id = ?", name, s.stamp(), id)
		return err
	})
	if err != nil {
		return Pool{}, err
	}
	return s.Pool(id)
}

// DeletePool removes a pool, its memberships and its quota; its projects
// stay, as they were before they joined it.
func (s *Service) DeletePool(ctx context.Context, id string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.pools.pools[id]; !ok {
			return errorf(ErrNotFound, "Resource pool '%s' not found", id)
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM resource_pools WHERE resource_pool_id = ?", id)
		return err
	})
}

// PoolResources lists a pool's projects; an unknown pool has none.
func (s *Service) PoolResources(id string) []Resource {
	return slices.Clone(s.state.Load().pools.resources[id])
}

// AddPoolResource puts project projectID (named name now) in a pool.
// That the project exists is the caller's to check.
func (s *Service) AddPoolResource(ctx context.Context, poolID, projectID, name string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		p, ok := st.pools.pools[poolID]
		if !ok {
			return errorf(ErrNotFound, "Resource pool '%s' not found", poolID)
		}
		if slices.Contains(st.pools.projectPools[projectID], poolID) {
			return errorf(ErrExists, "Resource '%s' is already in '%s'", projectID, p.Name)
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, `INSERT INTO pool_resources (resource_pool_id, resource_id, resource_type, name, created_at, updated_at)
			VALUES (?, ?, 'project', ?, ?, ?)`, poolID, projectID, nullable(name), now, now)
		return err
	})
}

// RemovePoolResource takes a project out of one pool.
func (s *Service) RemovePoolResource(ctx context.Context, poolID, projectID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.pools.projectPools[projectID]; !ok {
			return errorf(ErrNotFound, "Resource '%s' not found", projectID)
		}
		if _, ok := st.pools.pools[poolID]; !ok {
			return errorf(ErrNotFound, "Resource pool '%s' not found", poolID)
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM pool_resources WHERE resource_pool_id = ? AND resource_id = ?", poolID, projectID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errorf(ErrNotFound, "Resource '%s' is not in resource pool '%s'", projectID, poolID)
		}
		return nil
	})
}

// SetOwner records userID as the owner of project projectID (its maker):
// the project counts against userID's quotas and its groups'.
func (s *Service) SetOwner(ctx context.Context, projectID, userID string) error {
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, ok := st.users[userID]; !ok {
			return errorf(ErrNotFound, "User '%s' not found", userID)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO project_owners (project_id, user_id, created_at) VALUES (?, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET user_id = excluded.user_id`, projectID, userID, s.stamp())
		return err
	})
}

// Owner is the owner of a project, or "" when it has none (made before
// there were users, or by the open server).
func (s *Service) Owner(projectID string) string {
	return s.state.Load().pools.owners[projectID]
}

// ForgetProject drops what the database holds of a deleted project: its
// owner and its pool memberships.
func (s *Service) ForgetProject(ctx context.Context, projectID string) error {
	st := s.state.Load()
	if _, ok := st.pools.owners[projectID]; !ok && len(st.pools.projectPools[projectID]) == 0 {
		return nil
	}
	return s.change(ctx, func(tx *sql.Tx, st *state) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM project_owners WHERE project_id = ?", projectID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM pool_resources WHERE resource_id = ?", projectID)
		return err
	})
}
