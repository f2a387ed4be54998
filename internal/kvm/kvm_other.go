//go:build !(linux && amd64)

package kvm

import "time"

var guestCode []byte

func check(string, []byte, time.Duration) error { return ErrUnsupported }
