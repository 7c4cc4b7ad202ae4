package runtime_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// verifyNoLeak ignores the goroutines of go-redis' PubSub.Channel, which
// a closed Sentinel client may leave behind for the rest of the process.
// That hides none of lockgen's own only while the runtime never reads a
// PubSub through Channel (it uses ReceiveTimeout): checked here, on the
// package's source and the packages under it.
func TestRuntimeNeverReadsPubSubThroughChannel(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Channel", "ChannelSize", "ChannelWithSubscriptions":
					t.Errorf("%s: %s call: verifyNoLeak ignores go-redis' Channel goroutines, so a leak of this one would go unseen", fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no source file found")
	}
}
