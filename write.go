package lockgen

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes the file when its bytes differ from what is on disk, via a
// temporary file in the same directory and a rename, so readers never see
// a partial file and an unchanged file keeps its mtime (and the build
// cache stays warm). It reports whether the file changed.
func (o *Output) Write() (changed bool, err error) {
	old, err := os.ReadFile(o.Path)
	if err == nil && bytes.Equal(old, o.Content) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	dir := filepath.Dir(o.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".lockgen-*.tmp")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(o.Content); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), o.Path); err != nil {
		return false, err
	}
	return true, nil
}
