package api

import (
	"slices"
	"time"
)

// SetWriteGrace shortens how long a notification stream waits for a client
// that reads nothing, for a test; it returns the function that restores it.
func SetWriteGrace(d time.Duration) (restore func()) {
	old := writeGrace
	writeGrace = d
	return func() { writeGrace = old }
}

// OnStreamCut calls f each time a notification stream ends because a write
// to its client failed, for a test; it returns the function that restores
// the previous hook.
func OnStreamCut(f func()) (restore func()) {
	old := streamCut
	streamCut = f
	return func() { streamCut = old }
}

// Routes are the registered routes, in the order they were registered.
func (a *API) Routes() []Route { return slices.Clone(a.routes) }

// SetDistributeFault makes a distribution fail before the copy for the
// member f names (f returns an error for it), for a test; set it before
// any request.
func (a *API) SetDistributeFault(f func(member string) error) { a.classes.fault = f }

// HasPermission reports whether route r has its entry in the table of
// permissions.
func HasPermission(r Route) bool { _, ok := permissions[r]; return ok }

// UncheckPermission makes route r ask only for a login, as if its entry
// were forgotten, for a test that must see a route left unchecked; it
// returns the function that puts the entry back. Call it before New.
func UncheckPermission(r Route) (restore func()) {
	p, ok := permissions[r]
	permissions[r] = permission{}
	return func() {
		if ok {
			permissions[r] = p
		} else {
			delete(permissions, r)
		}
	}
}
