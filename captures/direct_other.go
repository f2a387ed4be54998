//go:build !linux

package captures

import "os"

// oDirect is 0 where direct I/O is not opened this way: every write then
// goes through the page cache.
const oDirect = 0

// allocBlock returns memory for a block from the Go heap.
func allocBlock() (b []byte, release func()) { return heapBlock(), func() {} }

// directHandle is never called: there is no direct handle without oDirect.
func directHandle(f *os.File) fileHandle { return f }

// totalMemory returns 0: unknown here.
func totalMemory() int64 { return 0 }

// dupFile opens f's file (at path) again, for reading.
func dupFile(_ *os.File, path string) (*os.File, error) { return os.Open(path) }
