package lockgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes the file when its bytes differ from what is on disk, via a
// temporary file in the same directory and a rename, so readers never see
// a partial file and an unchanged file keeps its mtime (and the build
// cache stays warm). It reports whether the file changed.
//
// Write never replaces a file that lockgen did not generate: when o.Path
// holds anything but a file starting with the generated-code header line,
// it writes nothing and returns an ErrorList pointing at the spec's output
// field (Generate already checked; Write checks again right before it
// writes). Nor does it write through a symbolic link.
func (o *Output) Write() (changed bool, err error) {
	old, err := os.ReadFile(o.Path)
	if err == nil && bytes.Equal(old, o.Content) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := o.owned(); err != nil {
		return false, err
	}
	if err := replaceFile(o.Path, o.Content); err != nil {
		return false, err
	}
	return true, nil
}

// replaceFile writes content to path through a temporary file in the same
// directory and a rename, so that readers never see a partial file.
func replaceFile(path string, content []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".lockgen-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// owned returns an error unless o.Path is absent or a regular file that
// lockgen generated: an ErrorList at the spec's output field when o came
// from Generate.
func (o *Output) owned() error {
	shown := o.Path
	if o.guard != nil {
		shown = o.guard.Msg
	}
	var refusal error
	if info, err := os.Lstat(o.Path); err == nil && !info.Mode().IsRegular() {
		refusal = fmt.Errorf("%s is not a regular file (a link, a directory or a device): lockgen writes only regular files it generated", shown)
	} else if err := ownedByLockgen(o.Path, shown); err != nil {
		var notOurs *notOursError
		if !errors.As(err, &notOurs) {
			return err // could not read it
		}
		refusal = err
	}
	if refusal == nil {
		return nil
	}
	if o.guard == nil {
		return refusal
	}
	e := *o.guard
	e.Msg = refusal.Error()
	return ErrorList{&e}
}
