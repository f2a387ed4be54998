package pcapfilter

import (
	"os"
	"testing"
)

// TestMain lets this test binary compile: CompileAll runs it as its
// compiling child.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}
