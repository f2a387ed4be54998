package access

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The schema's versions are the files of migrations/, named
// NNNN_what.sql and applied in order. The database's version is SQLite's
// user_version: each migration and the version it leads to are committed
// in one transaction (SQLite's DDL is transactional), so a crash leaves
// the schema at one version or the next, never between. A small table of
// our own rather than a migration library: the files are embedded, there
// is one driver and no down migrations, and this is all a library would
// run for us.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema step: the SQL that takes the schema from
// version-1 to version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations reads the embedded migration files, in version order; the
// versions must run 1, 2, 3... with no gap.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	ms := make([]migration, 0, len(names))
	for i, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d first in its name", base, i+1)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// SchemaVersion is the schema version this build migrates databases to.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings db's schema to version upTo (0: the newest), one
// transaction per migration. A database newer than this build is refused: an older
// binary must not write a schema it does not know. hook, when not nil, runs
// inside each migration's transaction after its SQL (tests make it fail).
func migrate(ctx context.Context, db *sql.DB, upTo int, hook func(step string) error) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var current int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this build's %d", current, len(ms))
	}
	if upTo > 0 && upTo < len(ms) {
		ms = ms[:upTo]
	}
	for _, m := range ms[min(current, len(ms)):] {
		err := inTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if hook != nil {
				if err := hook("migration " + m.name); err != nil {
					return err
				}
			}
			// PRAGMA takes no bound parameter; the version is our own integer.
			_, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(m.version))
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// inTx runs f in one transaction: committed if f returns nil, rolled back
// otherwise.
func inTx(ctx context.Context, db *sql.DB, f func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
