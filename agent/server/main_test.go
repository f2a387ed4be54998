package server

import (
	"os"
	"testing"

	"github.com/labtap/labtap/pcapfilter"
)

// TestMain lets this test binary compile link filters: CompileAll runs it
// as its compiling child.
func TestMain(m *testing.M) {
	pcapfilter.Main()
	os.Exit(m.Run())
}
