package web

import "golang.org/x/sys/unix"

// limitMemory sets the address-space limit of the process pid to n bytes;
// a limit it cannot set is left (the timeout still bounds the process).
func limitMemory(pid int, n int64) {
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil)
}
