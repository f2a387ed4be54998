package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"hash"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
)

// Messages of the authentication failures, as GNS3 3.x sends them.
const (
	msgLoginFailed = "Authentication was unsuccessful."
	msgBadToken    = "Could not validate credentials"
	msgInactive    = "Not an active user"
)

// maxCached bounds the credential cache; when full it starts afresh.
const maxCached = 4096

// credCache remembers verified Basic credentials, so that a client
// sending them on every request costs one hash, not one a request. A
// credential is kept as a MAC under a key made for this process, never in
// clear, and is dropped when it expires, when its user changes its
// password, username or state, or when it no longer matches the user.
type credCache struct {
	key  [32]byte
	ttl  time.Duration
	macs sync.Pool // of hash.Hash, HMACs under key: hmac.New costs more than the MAC
	mu   sync.Mutex
	m    map[[sha256.Size]byte]credEntry
}

type credEntry struct {
	userID, hash string
	version      int
	expires      time.Time
}

func newCredCache(ttl time.Duration) *credCache {
	c := &credCache{ttl: ttl, m: map[[sha256.Size]byte]credEntry{}}
	rand.Read(c.key[:])
	c.macs.New = func() any { return hmac.New(sha256.New, c.key[:]) }
	return c
}

func (c *credCache) mac(user, pass string) [sha256.Size]byte {
	h := c.macs.Get().(hash.Hash)
	h.Reset()
	var buf [256]byte // user and password are bounded; longer ones are written as they are
	b := append(append(append(buf[:0], user...), 0), pass...)
	h.Write(b)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	c.macs.Put(h)
	return k
}

func (c *credCache) get(k [sha256.Size]byte, now time.Time) (credEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if ok && !now.Before(e.expires) {
		delete(c.m, k)
		return credEntry{}, false
	}
	return e, ok
}

func (c *credCache) put(k [sha256.Size]byte, e credEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[k] = e
}

func (c *credCache) dropUser(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.userID == id {
			delete(c.m, k)
		}
	}
}

// Authenticate checks a username and password (HTTP Basic, a login) and
// returns the user. It fails alike for an unknown user, a wrong password
// and an inactive user, and takes as long for each (a hash is compared
// even for an unknown user); a credential verified in the last
// Config.CacheTTL is not hashed again.
func (s *Service) Authenticate(ctx context.Context, username, password string) (User, error) {
	fail := func() error { return errorf(ErrUnauthenticated, msgLoginFailed) }
	if len(username) > MaxNameLen || len(password) > MaxPasswordLen {
		return User{}, fail()
	}
	now := s.cfg.Now()
	k := s.cache.mac(username, password)
	st := s.state.Load()
	u, known := st.byName[username]
	if e, ok := s.cache.get(k, now); ok {
		if known && e.userID == u.ID && e.hash == u.hash && e.version == u.TokenVersion && (u.Active || u.Superadmin) {
			return copyUser(u), nil
		}
		s.cache.dropUser(e.userID)
	}
	hash := s.dummy
	if known {
		hash = []byte(u.hash)
	}
	s.hashes.Add(1)
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	if !known || err != nil || !u.Active && !u.Superadmin {
		return User{}, fail()
	}
	s.cache.put(k, credEntry{userID: u.ID, hash: u.hash, version: u.TokenVersion, expires: now.Add(s.cfg.CacheTTL)})
	return copyUser(u), nil
}

// claims are a token's: sub is the user's id, ver its token version.
type claims struct {
	Ver int `json:"ver"`
	jwt.RegisteredClaims
}

// Login authenticates a user as Authenticate does, notes the login time,
// and returns a new token for the user.
func (s *Service) Login(ctx context.Context, username, password string) (string, error) {
	u, err := s.Authenticate(ctx, username, password)
	if err != nil {
		return "", err
	}
	err = s.change(ctx, func(tx *sql.Tx, _ *state) error {
		_, err := tx.ExecContext(ctx, "UPDATE users SET last_login = ? WHERE user_id = ?", s.stamp(), u.ID)
		return err
	})
	if err != nil {
		return "", err
	}
	return s.Token(u)
}

// Token signs a token for u, valid for Config.TokenTTL or until u's
// token version changes.
func (s *Service) Token(u User) (string, error) {
	now := s.cfg.Now()
	c := claims{Ver: u.TokenVersion, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   u.ID,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(s.cfg.TokenTTL)),
		ID:        uuid.NewString(),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
}

// tokenLeeway is how far clocks may disagree on a token's expiry.
const tokenLeeway = 30 * time.Second

// maxTokenLen bounds a token: ours are about 250 bytes.
const maxTokenLen = 4096

// AuthenticateToken checks a token (signature, HS256 only, expiry,
// revocation) and returns its user. A token's subject is the user's id,
// not its name (GNS3's), so a token never passes to a later user of the
// same name.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (User, error) {
	bad := errorf(ErrUnauthenticated, msgBadToken)
	if len(token) > maxTokenLen {
		return User{}, bad
	}
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(s.cfg.Now))
	if err != nil || c.Subject == "" {
		return User{}, bad
	}
	st := s.state.Load()
	u, ok := st.users[c.Subject]
	if !ok {
		return User{}, bad
	}
	if c.Ver != u.TokenVersion {
		return User{}, errorf(ErrUnauthenticated, "Token has been revoked for '%s'", u.Username)
	}
	if !u.Active && !u.Superadmin {
		return User{}, errorf(ErrUnauthenticated, msgInactive)
	}
	return copyUser(u), nil
}
