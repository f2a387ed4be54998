package project

import (
	"errors"
	"fmt"
)

// Sentinel kinds of failure. Errors from this package match one of them
// with errors.Is; the API maps each to an HTTP status, once.
var (
	ErrInvalid   = errors.New("invalid request")   // 400
	ErrForbidden = errors.New("forbidden")         // 403: e.g. the project is closed
	ErrNotFound  = errors.New("not found")         // 404
	ErrConflict  = errors.New("conflict")          // 409
	ErrInternal  = errors.New("internal failure")  // 500
	ErrTooLarge  = errors.New("request too large") // 413
)

// Error is a failure whose message is meant for the API user as it is
// (GNS3 clients show it, some match it). It matches its Kind with errors.Is.
type Error struct {
	Kind error
	Msg  string
	Err  error // the cause, if any
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Messages GNS3 clients know, byte for byte.
func projectNotFound(id string) error {
	return errorf(ErrNotFound, "Project ID %s doesn't exist", id)
}

func nodeNotFound(id string) error {
	return errorf(ErrNotFound, "Node ID %s doesn't exist", id)
}

func linkNotFound(id string) error {
	return errorf(ErrNotFound, "Link ID %s doesn't exist", id)
}

func computeNotFound(id string) error {
	return errorf(ErrNotFound, "Compute ID %s doesn't exist", id)
}

var errNotOpened = &Error{Kind: ErrForbidden, Msg: "The project is not opened"}
