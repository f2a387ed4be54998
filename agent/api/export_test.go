package api

import (
	"net/http"
	"slices"
)

// Routes are the patterns ("METHOD /path/{name}") of a handler NewHandler
// returned, in the order they were registered.
func Routes(h http.Handler) []string { return slices.Clone(h.(*guarded).patterns) }
