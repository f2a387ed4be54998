package node

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods bounds the methods of one type in this package: a type
// that does more is split along what it owns (node.Qemu had 49, for its
// process, QMP, console, command line, disks, config disk, swtpm, OVMF
// and saved state).
const maxMethods = 25

// No type of the package grows past maxMethods, so a change to one part
// of a node has one place to go.
func TestNoNodeTypeHasOverTwentyFiveMethods(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	count := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				count[recvName(fd.Recv.List[0].Type)]++
			}
		}
	}
	if len(count) == 0 {
		t.Fatal("no methods found: the test reads the wrong folder")
	}
	for name, n := range count {
		if n > maxMethods {
			t.Errorf("%s has %d methods, over %d: split it along what it owns", name, n, maxMethods)
		}
	}
}

// recvName is a method receiver's type name (T, *T, T[P]).
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
