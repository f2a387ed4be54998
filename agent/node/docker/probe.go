package docker

import (
	"context"
	"sync"
	"time"
)

// connectTimeout bounds the Probe's one attempt to reach the Engine.
const connectTimeout = 3 * time.Second

// Probe finds out, once, whether docker nodes can run here: it connects to
// the Docker Engine on first use, or says why it cannot. Safe for
// concurrent use; the first callers wait for the attempt (connectTimeout
// at most).
type Probe struct {
	off    string // why docker nodes are turned off; "" when they are not
	once   sync.Once
	engine *Engine
	why    string
}

// NewProbe returns a Probe. off, when not empty, says why docker nodes are
// turned off by the agent's configuration: the Probe then connects to
// nothing and gives that reason.
func NewProbe(off string) *Probe { return &Probe{off: off} }

// Engine returns the connected Engine, or nil and why docker nodes cannot
// run here: turned off, missing privileges, or no Engine answering.
func (p *Probe) Engine() (*Engine, string) {
	p.once.Do(func() {
		if p.off != "" {
			p.why = p.off
			return
		}
		if err := CheckPrivileges(); err != nil {
			p.why = err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		e, err := Connect(ctx)
		if err != nil {
			p.why = err.Error()
			return
		}
		p.engine = e
	})
	return p.engine, p.why
}

// Unavailable returns why docker nodes cannot run here, "" when they can.
func (p *Probe) Unavailable() string {
	_, why := p.Engine()
	return why
}
