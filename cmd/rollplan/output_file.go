package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkOutputFile refuses, before anything is captured, an --output-file
// that cannot be written: its directory missing or not a directory, or the
// path a directory itself.
func checkOutputFile(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--output-file %s: directory %s does not exist: create it or pass a file in an existing directory", path, dir)
	case err != nil:
		return outputFileError(path, err)
	case !st.IsDir():
		return fmt.Errorf("--output-file %s: %s is not a directory: pass a file in an existing directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--output-file %s: is a directory: pass a file name", path)
	}
	return nil
}

// outputFileError is err writing the snapshot to path, naming path as the
// user gave it, never the temporary file beside it.
func outputFileError(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--output-file %s: directory %s does not exist: create it or pass a file in an existing directory", path, filepath.Dir(path))
	}
	return fmt.Errorf("--output-file %s: %w", path, err)
}
