package ingest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is the outcome of ValidatePaths.
type Report struct {
	// Files lists the files read, in the order they were checked.
	Files []string
	// Objects lists every object decoded, valid or not, in file order.
	Objects []ObjectKey
	// Errors holds every decode and validation error (each an *Error),
	// sorted by file and line.
	Errors []error
}

// manifestExts are the extensions ValidatePaths reads in directories.
var manifestExts = []string{".yaml", ".yml", ".json"}

// ValidatePaths decodes and validates every manifest under paths. A
// directory is walked recursively for .yaml, .yml and .json files, skipping
// hidden entries (a ConfigMap volume's "..data" holds second copies); a
// file named explicitly is read whatever its extension. An object defined
// twice is an error at its second definition (the file source uses the
// first). Problems with the manifests go in the Report; the error is for
// paths that cannot be read.
func ValidatePaths(paths ...string) (Report, error) {
	var r Report
	var files []string
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return r, err
		}
		if !info.IsDir() {
			files = append(files, root)
			continue
		}
		var found []string
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || !slices.Contains(manifestExts, strings.ToLower(filepath.Ext(path))) {
				return nil
			}
			// Follow symlinks to files (ConfigMap volumes are made of them),
			// but not to directories, which could loop.
			if d.Type()&fs.ModeSymlink != 0 {
				if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
					return nil
				}
			}
			found = append(found, path)
			return nil
		})
		if err != nil {
			return r, fmt.Errorf("walking %s: %w", root, err)
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	first := map[ObjectKey]Position{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return r, err
		}
		r.Files = append(r.Files, f)
		objs, errs := Decode(f, data)
		r.Errors = append(r.Errors, errs...)
		for i := range objs {
			o := &objs[i]
			k := o.Key()
			r.Objects = append(r.Objects, k)
			r.Errors = append(r.Errors, Validate(o)...)
			if pos, dup := first[k]; dup {
				r.Errors = append(r.Errors, &Error{Pos: o.Pos, Kind: k.Kind.String(), Namespace: k.Namespace, Name: k.Name,
					Message: "also defined at " + pos.String() + "; the first definition is used", cause: ErrInvalid})
			} else {
				first[k] = o.Pos
			}
		}
	}
	sortErrors(r.Errors)
	return r, nil
}
