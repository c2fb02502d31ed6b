package ingest

import (
	"os"
)

// Report is the outcome of ValidatePaths.
type Report struct {
	// Files lists the files read, in the order they were checked.
	Files []string
	// Objects lists every object decoded, valid or not, in file order.
	Objects []ObjectKey
	// Errors holds every decode and validation error, each path that is
	// not read and why, and each conflicting definition (each an *Error),
	// sorted by file and line.
	Errors []error
	// Warnings holds what is ignored although it was likely meant to take
	// effect (see IsWarning), sorted by file and line.
	Warnings []error
}

// ValidatePaths decodes and validates every manifest under paths, with the
// file source's rules, so that what it reports for a directory is exactly
// what `pilotfish serve --config-dir` reports in /debug/config_errors: a
// directory is walked by the same walker (walk.go: *.yaml, *.yml and
// *.json regular files, links resolved, hidden entries skipped, at most
// MaxFileSize bytes), and an object defined more than once is used from
// its first definition in path order (conflicts.go), every later one being
// an error. A file named explicitly is read whatever its extension, with
// the same checks. Problems with the manifests and the paths go in the
// Report; the error is for a path given that does not exist.
func ValidatePaths(paths ...string) (Report, error) {
	var r Report
	var files []walkEntry
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return r, err
		}
		if !info.IsDir() {
			files = append(files, walkEntry{path: root, info: info})
			continue
		}
		found, err := walkManifests(root, func(p string) string { return p })
		if err != nil {
			return r, err
		}
		files = append(files, found...)
	}
	first := map[ObjectKey]Position{}
	for _, f := range files {
		if f.err != nil {
			r.add(f.err)
			continue
		}
		data, _, err := readManifest(f.path, f.path)
		if err != nil {
			r.add(err)
			continue
		}
		r.Files = append(r.Files, f.path)
		objs, errs, warns := DecodeWithWarnings(f.path, data)
		r.Warnings = append(r.Warnings, warns...)
		for i := range objs {
			r.Objects = append(r.Objects, objs[i].Key())
		}
		defs, errs := fileDefinitions(objs, errs)
		r.Errors = append(r.Errors, errs...)
		for _, d := range defs {
			if pos, dup := first[d.key]; dup {
				r.Errors = append(r.Errors, conflictError(d.key, d.pos, pos))
			} else {
				first[d.key] = d.pos
			}
		}
	}
	sortErrors(r.Errors)
	sortErrors(r.Warnings)
	return r, nil
}

func (r *Report) add(err error) {
	if IsWarning(err) {
		r.Warnings = append(r.Warnings, err)
	} else {
		r.Errors = append(r.Errors, err)
	}
}

// Problems returns the errors and warnings together, sorted by file and
// line, as `pilotfish validate` prints them.
func (r *Report) Problems() []error {
	out := append(append(make([]error, 0, len(r.Errors)+len(r.Warnings)), r.Errors...), r.Warnings...)
	sortErrors(out)
	return out
}
