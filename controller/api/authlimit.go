package api

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// Failed Basic authentication is throttled per client address: after
// authFailures failures within authWindow, the address gets 429 until the
// oldest of them is authWindow old. Other addresses are not affected.
const (
	authFailures = 10
	authWindow   = 10 * time.Second
	// authClients bounds the addresses remembered; past it, those whose
	// failures have all expired are forgotten.
	authClients = 4096
)

// authLimiter counts failed authentications by client address and logs
// them, at most once a second per address. It is safe for concurrent use.
type authLimiter struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	clients map[string]*authClient
}

type authClient struct {
	failures []time.Time // within the window, oldest first
	logged   time.Time
	unlogged int // failures since the last log line
}

func newAuthLimiter(log *slog.Logger) *authLimiter {
	return &authLimiter{log: log, now: time.Now, clients: make(map[string]*authClient)}
}

// blocked says how long ip must wait before trying again; 0 if it may.
func (l *authLimiter) blocked(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[ip]
	if c == nil {
		return 0
	}
	now := l.now()
	c.expire(now)
	if len(c.failures) < authFailures {
		return 0
	}
	return c.failures[0].Add(authWindow).Sub(now)
}

// failed records a failed attempt by ip, for user.
func (l *authLimiter) failed(ip, user string) {
	l.mu.Lock()
	now := l.now()
	c := l.clients[ip]
	if c == nil {
		if len(l.clients) >= authClients {
			for k, other := range l.clients {
				if other.expire(now); len(other.failures) == 0 {
					delete(l.clients, k)
				}
			}
		}
		c = &authClient{}
		l.clients[ip] = c
	}
	c.expire(now)
	c.failures = append(c.failures, now)
	c.unlogged++
	logIt := now.Sub(c.logged) >= time.Second
	n, recent := c.unlogged, len(c.failures)
	if logIt {
		c.logged, c.unlogged = now, 0
	}
	l.mu.Unlock()
	if logIt {
		l.log.Warn("authentication failed", "client", ip, "user", user, "failures", n, "in_last_10s", recent)
	}
}

func (c *authClient) expire(now time.Time) {
	i := 0
	for i < len(c.failures) && now.Sub(c.failures[i]) >= authWindow {
		i++
	}
	c.failures = c.failures[i:]
}

// retryAfter is a Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
