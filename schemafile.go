package lockgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ErrForeignFile is wrapped by the error of WriteSchema for a file that
// lockgen did not write, which it never replaces.
var ErrForeignFile = errors.New("not written by lockgen")

// SchemaFile is the name lockgen init gives the JSON Schema it writes
// beside a spec.
const SchemaFile = "locks.schema.json"

// schemaID identifies lockgen's schema: a file whose $id is this is
// lockgen's to replace.
const schemaID = "https://raw.githubusercontent.com/lockgen/lockgen/main/locks.schema.json"

// modelineRE matches the yaml-language-server modeline that names a
// spec's schema.
var modelineRE = regexp.MustCompile(`(?m)^#\s*yaml-language-server:\s*\$schema=(\S+)\s*$`)

// LocalSchema returns the path of the schema file that the spec at
// specPath (with contents src) names in its yaml-language-server modeline,
// joined to the spec's directory, or "" when the modeline is absent or
// names a URL rather than a file.
func LocalSchema(specPath string, src []byte) string {
	ref, _ := modeline(src)
	if ref == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(specPath), filepath.FromSlash(ref))
}

// modeline returns the local schema file that src's modeline names, as
// written, and where; "" when there is none or it names a URL.
func modeline(src []byte) (ref string, at Pos) {
	m := modelineRE.FindSubmatchIndex(src)
	if m == nil {
		return "", Pos{}
	}
	ref = string(src[m[2]:m[3]])
	if strings.Contains(ref, "://") || !strings.HasSuffix(ref, ".json") || filepath.IsAbs(ref) {
		return "", Pos{}
	}
	lineStart := bytes.LastIndexByte(src[:m[2]], '\n') + 1
	at = Pos{Line: bytes.Count(src[:m[2]], []byte("\n")) + 1, Col: utf8.RuneCount(src[lineStart:m[2]]) + 1}
	return ref, at
}

// checkSchemaPath reports, at the modeline, a schema file that generate
// must not write (it refreshes that file after the Go file): one outside
// the spec's module, through .. or a symbolic link, or below a file that
// is not a directory. It runs before anything is written, so a bad
// modeline leaves no partial output.
func checkSchemaPath(s *Spec, mod *module, specDir string, e *errs) {
	if s.schemaRef == "" {
		return
	}
	file := filepath.Join(specDir, filepath.FromSlash(s.schemaRef))
	fail := func(format string, args ...any) {
		e.add(s.schemaPos, "$schema", format, args...)
	}
	if !inModule(mod.dir, file) {
		fail("%q leads outside the module %s that holds this spec: lockgen keeps the schema it names current, and writes only inside the spec's module (name a file inside it, e.g. $schema=%s)", s.schemaRef, mod.path, SchemaFile)
		return
	}
	if info, err := os.Lstat(file); err == nil && !info.Mode().IsRegular() {
		return // a link or a directory: WriteSchema leaves it alone
	}
	existing, link, linkTo, err := linkEscape(mod, file)
	switch {
	case err != nil:
		fail("%q cannot be checked: %v", s.schemaRef, err)
	case link != "":
		fail("%q leads outside the module %s through a symbolic link (%s is a link to %s): lockgen writes only inside the spec's module (name a file in a directory of the module itself)",
			s.schemaRef, mod.path, s.relToSpec(link), filepath.ToSlash(linkTo))
	case existing != file && !isDir(existing):
		fail("%q cannot be written: %s is not a directory (name a file such as $schema=%s)", s.schemaRef, s.relToSpec(existing), SchemaFile)
	}
}

// SchemaState is what a schema file holds.
type SchemaState int

// The states of a schema file.
const (
	SchemaAbsent  SchemaState = iota // no file
	SchemaCurrent                    // exactly this lockgen's schema
	SchemaStale                      // lockgen's schema from another version
	SchemaForeign                    // anything else: lockgen never replaces it
)

// CheckSchema says what the file at path holds.
func CheckSchema(path string) (SchemaState, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return SchemaAbsent, nil
	}
	if err != nil {
		return 0, err
	}
	if !info.Mode().IsRegular() {
		return SchemaForeign, nil
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if bytes.Equal(old, Schema) {
		return SchemaCurrent, nil
	}
	var doc struct {
		ID string `json:"$id"`
	}
	if json.Unmarshal(old, &doc) != nil || doc.ID != schemaID {
		return SchemaForeign, nil
	}
	return SchemaStale, nil
}

// WriteSchema writes the schema to path when its bytes differ, through a
// temporary file and a rename, and reports whether it changed the file.
// It replaces only an absent file or a lockgen schema (a regular file
// whose $id is lockgen's); for anything else it returns an error wrapping
// ErrForeignFile and writes nothing.
func WriteSchema(path string) (changed bool, err error) {
	state, err := CheckSchema(path)
	switch {
	case err != nil:
		return false, err
	case state == SchemaCurrent:
		return false, nil
	case state == SchemaForeign:
		return false, &foreignError{fmt.Sprintf("%s exists and is not lockgen's JSON Schema (a regular file whose $id is %s): lockgen never overwrites it (remove it, or write the schema elsewhere)", path, schemaID)}
	}
	if err := replaceFile(path, Schema); err != nil {
		return false, err
	}
	return true, nil
}

// foreignError is a refusal to replace a file lockgen did not write.
type foreignError struct{ msg string }

func (e *foreignError) Error() string { return e.msg }
func (e *foreignError) Unwrap() error { return ErrForeignFile }
