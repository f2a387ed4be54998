// Package access is the controller's access model, GNS3 3.x's: users,
// groups of users, roles (named sets of privileges) and the ACL, whose
// entries (ACEs) give a user or a group a role on a resource path such
// as /projects or /projects/{id}. It answers the questions every request
// asks: who is this (Authenticate, AuthenticateToken) and may they do
// this (Allowed).
//
// Everything is kept in a SQLite database (WAL, foreign keys on) whose
// schema is migrated forward at Open; every change is one transaction.
// Reads are served from an in-memory copy of the tables, rebuilt after
// each change, so Allowed and a cached Authenticate touch no disk.
package access

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	_ "github.com/mattn/go-sqlite3" // the "sqlite3" database/sql driver
	"golang.org/x/crypto/bcrypt"
)

// Errors. Each error the package returns is an *Error whose Kind is one
// of these, and whose message is the text GNS3 3.x sends for the case.
var (
	ErrNotFound        = errors.New("not found")       // an unknown id
	ErrExists          = errors.New("already exists")  // a name or email taken
	ErrForbidden       = errors.New("forbidden")       // built-in objects, the super admin
	ErrInvalid         = errors.New("invalid")         // a value out of its bounds
	ErrUnauthenticated = errors.New("unauthenticated") // bad credentials or token
	ErrBadPath         = errors.New("bad path")        // an ACE path naming nothing
)

// Error is an error of the access model: Kind says which (ErrNotFound...),
// Msg is the message for the client.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Config configures a Service. Path is required; the rest has defaults.
type Config struct {
	// Path is the SQLite database file, created (mode 0600) if missing.
	Path string
	// SecretFile holds the key tokens are signed with: 64 hex characters
	// (32 random bytes), made at first start with mode 0600. "" keeps it
	// next to the database as access_jwt_secret.
	SecretFile string
	// TokenTTL is how long a token lasts; 0 means DefaultTokenTTL.
	TokenTTL time.Duration
	// BcryptCost is the cost passwords are hashed with; 0 means 12 (GNS3's).
	BcryptCost int
	// CacheTTL is how long a verified Basic credential is remembered; 0
	// means 5 minutes.
	CacheTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultTokenTTL is how long a token lasts unless Config.TokenTTL says.
const DefaultTokenTTL = time.Hour

// Service is the access model over its database. It is safe for
// concurrent use; Close releases the database.
type Service struct {
	cfg    Config
	db     *sql.DB
	log    *slog.Logger
	secret []byte
	cache  *credCache
	dummy  []byte // a hash compared against when the user is unknown

	// mu orders the changes: each runs its transaction and publishes the
	// new state under it, so states are published in commit order.
	mu    sync.Mutex
	state atomic.Pointer[state]

	hashes atomic.Int64 // password hash computations, for tests
	hook   func(step string) error
}

// Open opens (or creates) the database at cfg.Path, migrates its schema,
// seeds the built-in privileges, roles and groups once, and loads it.
func Open(ctx context.Context, cfg Config) (*Service, error) {
	return open(ctx, cfg, nil)
}

func open(ctx context.Context, cfg Config, hook func(string) error) (*Service, error) {
	if cfg.Path == "" {
		return nil, errors.New("access: no database path")
	}
	if strings.ContainsAny(cfg.Path, "?#%") {
		// The driver takes the path as a URI, where these are not literal.
		return nil, fmt.Errorf("access: database path %q: must not contain '?', '#' or '%%'", cfg.Path)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = 12
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 5 * time.Minute
	}
	if cfg.SecretFile == "" {
		cfg.SecretFile = filepath.Join(filepath.Dir(cfg.Path), "access_jwt_secret")
	}
	secret, err := loadSecret(cfg.SecretFile)
	if err != nil {
		return nil, err
	}
	// The database holds password hashes: made private before SQLite
	// creates it (its -wal and -shm files take the same mode).
	f, err := os.OpenFile(cfg.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	f.Close()
	dsn := "file:" + cfg.Path + "?_foreign_keys=on&_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_synchronous=FULL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("access: open %s: %w", cfg.Path, err)
	}
	// One connection: writes are serialised by mu anyway, and reads are
	// served from memory.
	db.SetMaxOpenConns(1)
	s := &Service{cfg: cfg, db: db, log: cfg.Logger, secret: secret, hook: hook,
		cache: newCredCache(cfg.CacheTTL)}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("access: %s: %w", cfg.Path, err)
	}
	s.dummy, err = bcrypt.GenerateFromPassword([]byte("labtap dummy password"), cfg.BcryptCost)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("access: %w", err)
	}
	return s, nil
}

func (s *Service) init(ctx context.Context) error {
	if err := migrate(ctx, s.db, 0, s.hook); err != nil {
		return err
	}
	if err := s.seed(ctx); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return s.reload(ctx)
}

// Close closes the database.
func (s *Service) Close() error { return s.db.Close() }

// loadSecret reads the token key from path, or makes one there.
func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		raw := make([]byte, 32)
		rand.Read(raw)
		key := hex.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("access: token key: %w", err)
		}
		if _, err := f.WriteString(key + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("access: token key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("access: token key: %w", err)
		}
		return []byte(key), nil
	}
	if err != nil {
		return nil, fmt.Errorf("access: token key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("access: token key %s is readable by others: %w", path, err)
		}
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 32 {
		return nil, fmt.Errorf("access: token key %s: %d characters, want at least 32", path, len(key))
	}
	// The key's bytes are the string's, as GNS3 uses its key file.
	return []byte(key), nil
}

// timeFormat is how times are stored and sent: UTC, to the second,
// without offset, as GNS3 sends them.
const timeFormat = "2006-01-02T15:04:05"

func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Second) }

func (s *Service) stamp() string { return s.now().Format(timeFormat) }

// seed fills a new database's privileges, roles and groups, once: when
// there is no privilege yet. All in one transaction.
func (s *Service) seed(ctx context.Context) error {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM privileges").Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	now := s.stamp()
	return inTx(ctx, s.db, func(tx *sql.Tx) error {
		ids := make(map[string]string, len(builtinPrivileges))
		for i, p := range builtinPrivileges {
			id := uuid.NewString()
			ids[p.name] = id
			if _, err := tx.ExecContext(ctx, `INSERT INTO privileges (privilege_id, name, description, seq, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?)`, id, p.name, p.description, i, now, now); err != nil {
				return err
			}
			if i == len(builtinPrivileges)/2 && s.hook != nil {
				if err := s.hook("seed privileges"); err != nil {
					return err
				}
			}
		}
		for _, r := range builtinRoles {
			id := uuid.NewString()
			if _, err := tx.ExecContext(ctx, `INSERT INTO roles (role_id, name, description, is_builtin, created_at, updated_at)
				VALUES (?, ?, ?, 1, ?, ?)`, id, r.name, r.description, now, now); err != nil {
				return err
			}
			privs := r.privileges
			if privs == nil {
				for _, p := range builtinPrivileges {
					privs = append(privs, p.name)
				}
			}
			for _, p := range privs {
				if _, err := tx.ExecContext(ctx, "INSERT INTO role_privileges (role_id, privilege_id) VALUES (?, ?)", id, ids[p]); err != nil {
					return fmt.Errorf("role %s privilege %s: %w", r.name, p, err)
				}
			}
		}
		for _, g := range builtinGroups {
			if _, err := tx.ExecContext(ctx, `INSERT INTO user_groups (user_group_id, name, is_builtin, created_at, updated_at)
				VALUES (?, ?, 1, ?, ?)`, uuid.NewString(), g, now, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// change runs f in one transaction and, once it is committed, publishes
// the new state. f's error is returned as is; nothing of it is kept.
func (s *Service) change(ctx context.Context, f func(tx *sql.Tx, st *state) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := f(tx, st); err != nil {
			return err
		}
		if s.hook != nil {
			return s.hook("change")
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.reload(ctx)
}

// Bootstrap makes username, with password, the first super admin when
// the database has no user yet, and reports whether it did; a name or
// password out of bounds is then ErrInvalid. When there are users
// already it changes nothing: it warns when username is not a super
// admin there, or when password is not its password.
func (s *Service) Bootstrap(ctx context.Context, username, password string) (bool, error) {
	if len(s.state.Load().users) > 0 {
		u, ok := s.state.Load().byName[username]
		switch {
		case !ok || !u.Superadmin:
			s.log.Warn("access: the database has users already; the configured user is not its super admin and was not added", "user", username)
		case bcrypt.CompareHashAndPassword([]byte(u.hash), []byte(password)) != nil:
			s.log.Warn("access: the configured password differs from the super admin's in the database; the database's is kept", "user", username)
		}
		return false, nil
	}
	if err := checkUsername(username); err != nil {
		return false, err
	}
	if err := checkPassword(password); err != nil {
		return false, err
	}
	hash, err := s.hash(password)
	if err != nil {
		return false, err
	}
	created := false
	err = s.change(ctx, func(tx *sql.Tx, st *state) error {
		if len(st.users) > 0 {
			return nil
		}
		now := s.stamp()
		_, err := tx.ExecContext(ctx, `INSERT INTO users (user_id, username, full_name, hashed_password, is_active, is_superadmin, created_at, updated_at)
			VALUES (?, ?, 'Super Administrator', ?, 1, 1, ?, ?)`, uuid.NewString(), username, hash, now, now)
		created = err == nil
		return err
	})
	return created, err
}

// hash hashes a password (already checked for length) with bcrypt.
func (s *Service) hash(password string) (string, error) {
	s.hashes.Add(1)
	b, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
	if err != nil {
		return "", errorf(ErrInvalid, "password: %v", err)
	}
	return string(b), nil
}
