package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxFileSize is the largest manifest file the file source and `pilotfish
// validate` read: 16 MiB. A Kubernetes object is at most 1.5 MiB
// (maxObjectSize) and a ConfigMap, the usual way to mount a config
// directory, at most 1 MiB in all, so 16 MiB leaves room for a generated
// file of tens of thousands of small objects while bounding what one file
// can make the server hold (decoding takes a small multiple of the text).
// A larger file is reported and not read; it is a constant so that both
// commands always agree.
const MaxFileSize = 16 << 20

// The directory rules, shared by the file source and ValidatePaths (they
// must agree on every path):
//
//   - Directories are walked recursively, in path order (see comparePaths);
//     files named *.yaml, *.yml or *.json (any case) are manifests, other
//     names are not looked at.
//   - Entries whose name starts with "." are ignored, files and directories
//     alike: .git, editors' swap and lock files (emacs' ".#vs.yaml" is a
//     dangling link), and a Kubernetes ConfigMap or Secret volume's
//     "..data" link and "..2026_01_02_..." directory, which hold second
//     copies of the visible files. Those visible files are links into
//     "..data", so each is read once, through its own name.
//   - A symbolic link is resolved. To a regular file: read, under the
//     link's name. To a directory: not followed (a link to "/" or a loop
//     would make the walk unbounded), reported as a warning. A dangling
//     link or a link loop named like a manifest is an error.
//   - A manifest must be a regular file once links are resolved: a named
//     pipe, socket or device (a link to /dev/zero) is an error and is never
//     opened. It must be at most MaxFileSize bytes.
//   - A directory that cannot be read is an error; the file source keeps
//     what it had read from under it.

// walkEntry is one manifest path walkManifests found: a file to read, or a
// problem (err) that keeps it from being read.
type walkEntry struct {
	path string      // as found under the root: a link's own path
	info fs.FileInfo // of the file it resolves to; nil when err is set
	err  error       // *Error wrapping ErrFile, or ErrIgnored for a warning
	dir  bool        // the entry is a directory that could not be read
}

// walkManifests lists the manifests under root in path order, with a
// problem entry for each path that is skipped. Only a root that cannot be
// read is an error. display renders a path for messages.
func walkManifests(root string, display func(string) string) ([]walkEntry, error) {
	var out []walkEntry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			// WalkDir reports a directory it cannot list (or an entry that
			// vanished): skip it, and say so.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			out = append(out, walkEntry{path: path, dir: true,
				err: fileError(display(path), "cannot read directory: %s", reason(err))})
			return nil
		}
		if path == root {
			return nil
		}
		if hidden(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		manifest := isManifest(path)
		if d.Type()&fs.ModeSymlink != 0 {
			info, err := os.Stat(path)
			switch {
			case err != nil && manifest:
				out = append(out, walkEntry{path: path, err: linkError(path, display(path), err)})
			case err != nil:
			case info.IsDir():
				out = append(out, walkEntry{path: path, err: &Error{Pos: Position{File: display(path)},
					Message: "symbolic link to a directory, not followed: link its files, or the directory's parent, instead", cause: ErrIgnored}})
			case manifest:
				out = append(out, checkEntry(path, display(path), info))
			}
			return nil
		}
		if !manifest {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed while walking: the next walk sees it gone
		}
		out = append(out, checkEntry(path, display(path), info))
		return nil
	})
	return out, err
}

// checkEntry is the entry for a resolved manifest: to be read, or an error
// for a file that is not regular or is too large.
func checkEntry(path, shown string, info fs.FileInfo) walkEntry {
	if err := checkFile(shown, info); err != nil {
		return walkEntry{path: path, err: err}
	}
	return walkEntry{path: path, info: info}
}

func checkFile(shown string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fileError(shown, "not a regular file (%s); only regular files are read", modeName(info.Mode()))
	}
	if info.Size() > MaxFileSize {
		return fileError(shown, "file is %d bytes, over the limit of %d (16 MiB); not read", info.Size(), MaxFileSize)
	}
	return nil
}

// readManifest reads one manifest without ever blocking on something that
// is not a regular file: the path was checked by stat before (so a device
// is never even opened), it is opened non-blocking (a FIFO swapped in since
// does not wait for a writer) and checked again on the open descriptor,
// and at most MaxFileSize bytes are read (a file that grew since is
// refused). It returns the descriptor's FileInfo.
func readManifest(path, shown string) ([]byte, fs.FileInfo, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, linkError(path, shown, err)
	}
	if err := checkFile(shown, info); err != nil {
		return nil, nil, err
	}
	return readOpen(path, shown)
}

// readOpen is readManifest after the stat: what keeps a file swapped in
// since from blocking the read.
func readOpen(path, shown string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, fileError(shown, "cannot read: %s", reason(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fileError(shown, "cannot read: %s", reason(err))
	}
	if err := checkFile(shown, info); err != nil {
		return nil, nil, err
	}
	// Room for the whole file plus bytes.MinRead, so the buffer does not
	// grow (and copy) to find the end of a file that did not change.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, nil, fileError(shown, "cannot read: %s", reason(err))
	}
	if buf.Len() > MaxFileSize {
		return nil, nil, fileError(shown, "file is over the limit of %d bytes (16 MiB); not read", MaxFileSize)
	}
	return buf.Bytes(), info, nil
}

func fileError(shown, format string, args ...any) error {
	return &Error{Pos: Position{File: shown}, Message: fmt.Sprintf(format, args...), cause: ErrFile}
}

// linkError explains why a path does not resolve to a file.
func linkError(path, shown string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return fileError(shown, "symbolic link loop; not read")
	case errors.Is(err, fs.ErrNotExist):
		if target, lerr := os.Readlink(path); lerr == nil {
			return fileError(shown, "dangling symbolic link: its target %s does not exist", target)
		}
		return fileError(shown, "does not exist")
	}
	return fileError(shown, "cannot read: %s", reason(err))
}

// reason is err without the path a *PathError repeats.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func modeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// comparePaths orders paths as a directory walk meets them: component by
// component, so "a/z.yaml" comes before "a-b.yaml" (plain string order
// would put '-' before '/'). When several files define one object, the
// first in this order wins.
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		switch {
		case a[i] == filepath.Separator:
			return -1
		case b[i] == filepath.Separator:
			return 1
		case a[i] < b[i]:
			return -1
		default:
			return 1
		}
	}
	return len(a) - len(b)
}
