package project

import (
	"context"
	"sync"
	"sync/atomic"
)

// genRWMutex is a sync.RWMutex that counts its write locks. It is
// state.mu: whatever it guards changes only under Lock, so a reader that
// sees the same generation twice knows that nothing changed in between.
type genRWMutex struct {
	sync.RWMutex
	gen atomic.Uint64
}

// Lock takes the write lock and starts a new generation.
func (m *genRWMutex) Lock() {
	m.RWMutex.Lock()
	m.gen.Add(1)
}

// rendering is a link's rendering and the generation of its project's
// state it was made from.
type rendering struct {
	gen   uint64
	bytes []byte
}

// RenderedLink returns render(link) for the link a GET asks for, as
// LinkWithCounts would return it. The rendering of a link without a
// running capture is kept with the project (until the project closes) and
// made again only once the project changed: render must give the same
// bytes for the same link every time (the API's JSON encoding), and the
// caller must not change them. A running capture's counts change on their
// own, so its link is rendered each time.
func (s *Captures) RenderedLink(ctx context.Context, projectID, linkID string, render func(Link) ([]byte, error)) ([]byte, error) {
	st, err := s.core.opened(projectID)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	l, err := st.linkLocked(linkID)
	if err != nil {
		st.mu.RUnlock()
		return nil, err
	}
	if l.Capture.Active {
		st.mu.RUnlock()
		link, err := s.LinkWithCounts(ctx, projectID, linkID)
		if err != nil {
			return nil, err
		}
		return render(link)
	}
	gen := st.mu.gen.Load()
	if r, ok := st.rendered.Load(linkID); ok && r.(*rendering).gen == gen {
		st.mu.RUnlock()
		return r.(*rendering).bytes, nil
	}
	link := *l
	st.mu.RUnlock()
	b, err := render(link)
	if err != nil {
		return nil, err
	}
	st.rendered.Store(linkID, &rendering{gen, b})
	return b, nil
}
