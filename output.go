package lockgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/mod/modfile"
	gomodule "golang.org/x/mod/module"

	"github.com/lockgen/lockgen/templates"
)

// generatedHeader is the first line of every file lockgen writes. A file
// is lockgen's to replace only when it starts with exactly this line.
const generatedHeader = "// " + templates.Header

// module is the Go module that holds a spec.
type module struct {
	dir  string // directory of go.mod, as reached from the spec's directory
	real string // the same directory with symbolic links resolved
	path string // module path from go.mod, e.g. example.com/shop
}

// NoModuleError is returned when a spec is not inside a Go module: lockgen
// takes the generated package's import path, and the user types of key
// params, from the module.
type NoModuleError struct {
	Spec string // the spec's path as given
	Dir  string // the spec's directory, absolute
}

func (e *NoModuleError) Error() string {
	return fmt.Sprintf("%s is not inside a Go module: there is no go.mod in %s or any directory above it.\n"+
		"lockgen takes the import path of the generated package from the module. Make the directory that holds\n"+
		"your Go code a module and run lockgen again:\n"+
		"\tcd <that directory> && go mod init example.com/yourapp", e.Spec, e.Dir)
}

// findModule returns the module that holds dir (absolute), or nil.
func findModule(dir string) (*module, error) {
	for d := dir; ; {
		gomod := filepath.Join(d, "go.mod")
		data, err := os.ReadFile(gomod)
		switch {
		case err == nil:
			real, err := filepath.EvalSymlinks(d)
			if err != nil {
				return nil, err
			}
			return &module{dir: d, real: real, path: modfile.ModulePath(data)}, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		up := filepath.Dir(d)
		if up == d {
			return nil, nil
		}
		d = up
	}
}

// checkOutputPath reports, at the output field, an output file that lockgen
// must not write: one outside the spec's module (through .. or a symbolic
// link), in a nested module, a symbolic link itself, a directory, or an
// existing file that lockgen did not generate, or generated from another
// spec (generatedFrom). It reports whether the path is safe to write.
func checkOutputPath(s *Spec, mod *module, file string, e *errs) (ok bool) {
	at, path := s.outputAt()
	shown := s.Output
	fail := func(format string, args ...any) bool {
		e.add(at, path, format, args...)
		return false
	}
	if !inModule(mod.dir, file) {
		return fail("%q leads outside the module %s that holds this spec: lockgen writes only inside the spec's module (write a path inside it, e.g. %s)",
			shown, mod.path, DefaultOutput)
	}
	existing, link, linkTo, err := linkEscape(mod, file)
	switch {
	case err != nil:
		return fail("%q cannot be checked: %v", shown, err)
	case existing == file:
		info, _ := os.Lstat(file)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(file)
			return fail("%q is a symbolic link (to %s): lockgen does not write through links, which can lead out of the module (point output at a regular file)", shown, target)
		case info.IsDir():
			return fail("%q is a directory (name the Go file to generate, e.g. %s)", shown, filepath.ToSlash(filepath.Join(s.Output, DefaultOutput)))
		case !info.Mode().IsRegular():
			return fail("%q exists and is not a regular file (point output at a new file such as %s)", shown, DefaultOutput)
		}
	case !isDir(existing):
		return fail("%q cannot be written: %s is not a directory (point output at a file in a directory, e.g. %s)", shown, s.relToSpec(existing), DefaultOutput)
	}
	if link != "" {
		return fail("%q leads outside the module %s through a symbolic link (%s is a link to %s): lockgen writes only inside the spec's module (point output at a directory of the module itself)",
			shown, mod.path, s.relToSpec(link), filepath.ToSlash(linkTo))
	}
	if why := importPathProblem(mod, filepath.Dir(file)); why != "" {
		return fail("%q is in a directory the go command cannot import: %s (use a directory of lower-case ASCII letters, digits and -._~, e.g. %s)", shown, why, DefaultOutput)
	}
	// A go.mod between the module root and the output makes the output part
	// of another module.
	for d := filepath.Dir(file); inModule(mod.dir, d) && d != mod.dir; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return fail("%q is in another module (%s has its own go.mod): lockgen writes only inside the spec's module %s (move the spec into that module, or point output elsewhere)",
				shown, s.relToSpec(d), mod.path)
		}
	}
	if err := ownedByLockgen(file, s.relToSpec(file)); err != nil {
		return fail("%s", err.Error())
	}
	own := specFromOutput(s, target{dir: filepath.Dir(file)})
	if from := generatedFrom(file); from != "" && from != own {
		fix := "point output at a file of its own"
		base := filepath.Base(s.File)
		if other := strings.TrimSuffix(base, filepath.Ext(base)) + "_gen.go"; other != filepath.Base(file) {
			fix += ", e.g. " + filepath.ToSlash(filepath.Join(filepath.Dir(s.Output), other))
		}
		return fail("%q was generated from another spec, %s (this one is %s): two specs writing one file would overwrite each other's locks (%s; or delete that file if %s is gone)",
			shown, from, own, fix, from)
	}
	return true
}

// importPathProblem says why directory dir of mod cannot be a package the
// generated code's users import, or "": its import path must be valid and
// outside vendor/, whose packages the go command reads as vendored copies.
func importPathProblem(mod *module, dir string) string {
	rel, err := filepath.Rel(mod.dir, dir)
	if err != nil || rel == "." {
		return ""
	}
	rel = filepath.ToSlash(rel)
	if slices.Contains(strings.Split(rel, "/"), "vendor") {
		return "vendor/ holds copies of other modules' packages, and ./... patterns skip it"
	}
	if err := gomodule.CheckImportPath(mod.path + "/" + rel); err != nil {
		return err.Error()
	}
	return ""
}

// isDir reports whether path is a directory, following links.
func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// inModule reports whether path p lies inside directory root (by its
// text: no .., no absolute path elsewhere).
func inModule(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && filepath.IsLocal(rel)
}

// linkEscape resolves the symbolic links of the part of file that exists
// (file inside mod by its text). It returns that existing part and, when
// the resolved path leaves the module, the link that leads out and its
// target.
func linkEscape(mod *module, file string) (existing, link, linkTo string, err error) {
	existing, rest := file, ""
	for {
		_, err := os.Lstat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", "", "", err
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = filepath.Dir(existing)
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", "", "", err
	}
	if inModule(mod.real, filepath.Join(real, rest)) {
		return existing, "", "", nil
	}
	link = existing
	for d := existing; inModule(mod.dir, d) && d != mod.dir; d = filepath.Dir(d) {
		if t, err := os.Readlink(d); err == nil {
			link, linkTo = d, t
		}
	}
	return existing, link, linkTo, nil
}

// generatedFrom is the spec a file lockgen generated says it was generated
// from, relative to the file's directory (the "declared in <spec>," of its
// package doc), or "" when the file is absent or does not say.
func generatedFrom(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	for _, line := range strings.Split(string(head[:n]), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if !strings.HasPrefix(line, "//") {
			continue
		}
		if _, rest, ok := strings.Cut(line, " declared in "); ok {
			if from, _, ok := strings.Cut(rest, ", generated by lockgen."); ok {
				return from
			}
			if from, ok := strings.CutSuffix(rest, ","); ok {
				return from
			}
		}
	}
	return ""
}

// notOursError says why an existing file is not lockgen's to replace.
type notOursError struct {
	shown     string // the output as written in the spec
	firstLine string
}

func (e *notOursError) Error() string {
	first := e.firstLine
	if len(first) > 60 {
		first = first[:57] + "..."
	}
	what := "it is empty"
	if e.firstLine != "" {
		what = fmt.Sprintf("its first line is %q", first)
	}
	return fmt.Sprintf("%s exists and was not generated by lockgen (%s, not %q); lockgen never overwrites a file it did not generate (point output at a new file such as %s, or move that file away if it really is to be replaced)",
		e.shown, what, generatedHeader, DefaultOutput)
}

// ownedByLockgen returns nil when file is absent or starts with lockgen's
// generated-code header line, and a *notOursError (shown names the file)
// when it holds anything else.
func ownedByLockgen(file, shown string) error {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	head = head[:n]
	if isGenerated(head) {
		return nil
	}
	first, _, _ := bytes.Cut(head, []byte("\n"))
	return &notOursError{shown: shown, firstLine: strings.TrimSuffix(string(first), "\r")}
}

// isGenerated reports whether src starts with lockgen's header line.
func isGenerated(src []byte) bool {
	line, _, ok := bytes.Cut(src, []byte("\n"))
	return ok && string(bytes.TrimSuffix(line, []byte("\r"))) == generatedHeader
}

// outputAt is where errors about the output file point: the output value,
// or the top of the spec when output is left at its default.
func (s *Spec) outputAt() (Pos, string) {
	if s.outputPos.Line > 0 {
		return s.outputPos, "output"
	}
	return s.firstPos, "output"
}

// relToSpec shows an absolute path p relative to the spec's directory,
// joined to the spec's path as given, so it reads like the spec's own
// name in messages (locks.yaml, ../other/x.go).
func (s *Spec) relToSpec(p string) string {
	specDir, err := filepath.Abs(filepath.Dir(s.File))
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(specDir, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(filepath.Join(filepath.Dir(s.File), rel))
}
