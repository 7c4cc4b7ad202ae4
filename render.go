package lockgen

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen/templates"
)

// Output is one generated file.
type Output struct {
	Path    string // where the file goes (absolute)
	Content []byte // gofmt'd Go source

	// guard describes the output field of the spec, so that Write can
	// report a file that turned out not to be lockgen's as a spec error.
	guard *Error
}

// Generate reads, validates and renders the spec at path. It writes
// nothing: call Output.Write (or Output.Diff) on the result.
//
// Spec problems come back together as an ErrorList; any other error (the
// file cannot be read, the go command fails) is returned as is.
func Generate(path string) (*Output, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	spec, err := Parse(path, src)
	if err != nil {
		return nil, err
	}
	return Render(spec)
}

// Render resolves the spec's Go types and output package (loading Go
// packages from the spec's directory) and renders the generated file.
func Render(s *Spec) (*Output, error) {
	e := errs{file: s.File}
	t, err := resolve(s, &e)
	if err != nil {
		return nil, err
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	others := packageFiles(fset, t.dir, t.file, s.Package)
	f := templates.File{
		Path:         t.path,
		Package:      s.Package,
		Source:       specFromOutput(s, t),
		Imports:      map[string]string{},
		DocElsewhere: hasPackageDoc(others),
	}
	for _, l := range s.Locks {
		f.Locks = append(f.Locks, lockModel(l))
		for _, p := range l.Params {
			if p.Type.Path != "" && p.Type.Path != t.path {
				f.Imports[p.Type.Path] = p.Type.pkgName
			}
		}
	}
	src, err := templates.Emit(f)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", s.File, err)
	}
	checkCollisions(s, fset, others, t.file, src, &e)
	if err := e.err(); err != nil {
		return nil, err
	}
	at, path := s.outputAt()
	return &Output{Path: t.file, Content: src, guard: &Error{File: s.File, Pos: at, Path: path, Msg: s.relToSpec(t.file)}}, nil
}

// specFromOutput is the spec's path relative to the generated file's
// directory, with / separators: how the generated docs name it.
func specFromOutput(s *Spec, t target) string {
	abs, err := filepath.Abs(s.File)
	if err != nil {
		return filepath.Base(s.File)
	}
	rel, err := filepath.Rel(t.dir, abs)
	if err != nil {
		return filepath.Base(s.File)
	}
	return filepath.ToSlash(rel)
}

// lockModel converts a validated lock to the templates' model.
func lockModel(l *Lock) templates.Lock {
	key := l.key()
	m := templates.Lock{
		Name:         l.Name,
		Doc:          l.Doc,
		Kind:         string(l.Kind),
		Key:          key.Text,
		SyncReplicas: l.SyncReplicas,
		Fenced:       l.Fenced,
		Permits:      l.Permits,
		Count:        l.Count,
	}
	for _, s := range key.Segments {
		m.Segments = append(m.Segments, templates.Segment{Lit: s.Lit, Param: s.Param})
	}
	for _, p := range l.Params {
		m.Params = append(m.Params, paramModel(p))
	}
	if !l.Lease.Watchdog {
		m.Lease = l.Lease.Fixed
	}
	m.WaitTime = l.WaitTime.D
	if l.WaitTime.Forever {
		m.WaitTime = -1
	}
	switch l.Kind {
	case Fair:
		m.QueueTimeout = l.QueueTimeout()
	case ReadWrite:
		m.WritersFirst = l.WritersFirst()
	case Red:
		m.Quorum = l.Quorum.N
	case Multi:
		// The params are the union of the members': in member order, each
		// member's in its own order, a shared param where it first appears.
		m.Atomic = l.Atomic
		seen := map[string]bool{}
		for _, leaf := range l.leaves {
			lm := lockModel(leaf)
			m.Members = append(m.Members, lm)
			for _, p := range lm.Params {
				if !seen[p.Name] {
					seen[p.Name] = true
					m.Params = append(m.Params, p)
				}
			}
		}
	}
	return m
}

func paramModel(p *Param) templates.Param {
	tp := templates.Param{Name: p.Name, Render: p.Type.render}
	if p.Type.Basic != "" {
		tp.TypeName, tp.Basic = p.Type.Basic, true
	} else {
		tp.TypePath, tp.TypeName = p.Type.Path, p.Type.Name
	}
	return tp
}
