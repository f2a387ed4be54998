package access

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/v1.sql from a database at schema version 1")

const fixturePassword = "fixture-password"

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func userVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// writeV1Fixture writes testdata/v1.sql, a database at schema version 1
// as the first release left it (seeded, a super admin, a user in a group,
// an ACE): TestMigrateFromV1 calls it when run with -update-fixture.
func writeV1Fixture(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	db := openRaw(t, filepath.Join(t.TempDir(), "v1.db"))
	if err := migrate(ctx, db, 1, nil); err != nil {
		t.Fatal(err)
	}
	s := &Service{db: db, cfg: Config{Now: func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }}}
	if err := s.seed(ctx); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte(fixturePassword), bcrypt.MinCost)
	stmts := []string{
		fmt.Sprintf(`INSERT INTO users VALUES ('6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a01', 'admin', NULL, 'Super Administrator', '%s', 1, 1, NULL, '2026-11-01T12:00:00', '2026-11-01T12:00:00')`, hash),
		fmt.Sprintf(`INSERT INTO users VALUES ('6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a02', 'alice', 'alice@example.com', 'Alice', '%s', 1, 0, NULL, '2026-11-01T12:00:01', '2026-11-01T12:00:01')`, hash),
		`INSERT INTO user_group_members SELECT user_group_id, '6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a02' FROM user_groups WHERE name = 'Users'`,
		`INSERT INTO acl SELECT '6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0a03', 'group', '/projects', 1, 1, NULL, user_group_id,
			(SELECT role_id FROM roles WHERE name = 'User'), '2026-11-01T12:00:02', '2026-11-01T12:00:02' FROM user_groups WHERE name = 'Users'`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString("-- A labtap access database at schema version 1 (written by TestWriteV1Fixture).\n")
	b.WriteString("-- The users' password is " + fixturePassword + ".\n")
	rows, err := db.Query("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'index', rowid")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name, q string
		rows.Scan(&name, &q)
		b.WriteString(q + ";\n")
		if !strings.HasPrefix(q, "CREATE INDEX") {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, table := range tables {
		rows, err := db.Query("SELECT * FROM " + table + " ORDER BY rowid")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			lits := make([]string, len(vals))
			for i, v := range vals {
				switch v := v.(type) {
				case nil:
					lits[i] = "NULL"
				case int64:
					lits[i] = fmt.Sprint(v)
				case []byte:
					lits[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
				default:
					lits[i] = "'" + strings.ReplaceAll(fmt.Sprint(v), "'", "''") + "'"
				}
			}
			fmt.Fprintf(&b, "INSERT INTO %s VALUES (%s);\n", table, strings.Join(lits, ", "))
		}
		rows.Close()
	}
	b.WriteString("PRAGMA user_version = 1;\n")
	if err := os.WriteFile("testdata/v1.sql", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateFromEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.db")
	s, err := Open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := openRaw(t, path)
	if v := userVersion(t, db); v != SchemaVersion() || v < 2 {
		t.Errorf("schema version %d, want %d", v, SchemaVersion())
	}
	var mode string
	db.QueryRow("PRAGMA journal_mode").Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal mode %q, want wal", mode)
	}
	for _, f := range []string{path, filepath.Join(filepath.Dir(path), "access_jwt_secret")} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	// Opening again migrates nothing and seeds nothing twice.
	s, err = Open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Privileges()); n != 45 {
		t.Errorf("after a second Open: %d privileges", n)
	}
}

func TestMigrateFromV1(t *testing.T) {
	if *updateFixture {
		writeV1Fixture(t)
	}
	fixture, err := os.ReadFile("testdata/v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "access.db")
	db := openRaw(t, path)
	if _, err := db.Exec(string(fixture)); err != nil {
		t.Fatal(err)
	}
	if v := userVersion(t, db); v != 1 {
		t.Fatalf("fixture at version %d", v)
	}
	db.Close()
	s, err := Open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice, err := s.Authenticate(context.Background(), "alice", fixturePassword)
	if err != nil {
		t.Fatalf("alice after migration: %v", err)
	}
	if alice.TokenVersion != 0 || alice.Email != "alice@example.com" {
		t.Errorf("alice = %+v", alice)
	}
	if g := s.UserGroups(alice.ID); len(g) != 1 || g[0].Name != "Users" {
		t.Errorf("alice's groups = %+v", g)
	}
	if !s.Allowed(alice.ID, "Project.Audit", "/v3/projects/6a1b6f3e-2f0e-4c59-9a55-0b5d1c3f0aff") {
		t.Error("the fixture's ACE does not allow alice")
	}
	if n := len(s.Privileges()); n != 45 {
		t.Errorf("%d privileges, want the fixture's 45 (no second seeding)", n)
	}
	// Tokens work on the migrated schema (token_version came with version 2).
	if err := s.Logout(context.Background(), alice.ID); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationFailureLeavesNothing fails the second migration after its
// SQL ran, inside its transaction: the schema stays at version 1, whole,
// and the next Open finishes the job.
func TestMigrationFailureLeavesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.db")
	boom := errors.New("boom")
	_, err := open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost}, func(step string) error {
		if strings.HasPrefix(step, "migration 0002") {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Open = %v, want boom", err)
	}
	db := openRaw(t, path)
	if v := userVersion(t, db); v != 1 {
		t.Errorf("schema version %d after the failed migration, want 1", v)
	}
	if _, err := db.Exec("SELECT token_version FROM users"); err == nil {
		t.Error("the failed migration's column is there")
	}
	db.Close()
	s, err := Open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestSeedFailureLeavesNothing fails the seeding halfway through the
// privileges: none is kept, and the next Open seeds them all.
func TestSeedFailureLeavesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.db")
	boom := errors.New("boom")
	_, err := open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost}, func(step string) error {
		if step == "seed privileges" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Open = %v, want boom", err)
	}
	db := openRaw(t, path)
	var n int
	db.QueryRow("SELECT count(*) FROM privileges").Scan(&n)
	if n != 0 {
		t.Errorf("%d privileges kept from the failed seeding", n)
	}
	db.Close()
	s, err := Open(context.Background(), Config{Path: path, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Privileges()); n != 45 {
		t.Errorf("%d privileges after reopening, want 45", n)
	}
}

func TestOpenRefusesAPathTheDriverWouldReadAsAURI(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a?mode=ro", "a#b", "a%20b"} {
		if s, err := Open(context.Background(), Config{Path: filepath.Join(dir, name), BcryptCost: bcrypt.MinCost}); err == nil {
			s.Close()
			t.Errorf("Open(%q) worked", name)
		}
	}
}
