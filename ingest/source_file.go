package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fsnotify/fsnotify"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// FileSourceOptions configure a FileSource.
type FileSourceOptions struct {
	// Dir is the directory to read, recursively (.yaml, .yml, .json).
	Dir string
	// DomainSuffix is the cluster DNS domain; default "cluster.local".
	DomainSuffix string
	// Debounce is how long to wait after a file event before re-reading, so
	// an editor's burst of writes applies once; default 100ms.
	Debounce time.Duration
	// Resync re-checks every file's size and modification time this often,
	// in case the platform dropped a watch event; 0 means 30s, <0 disables.
	Resync time.Duration
	Logger *slog.Logger
}

// FileSource applies a directory of manifests to the index and keeps it
// current as files change. A change to one file re-applies only that file's
// objects. Invalid objects are reported and skipped; the last good version
// of each is kept, and a file that cannot be read or parsed keeps all of its
// objects.
type FileSource struct {
	opts   FileSourceOptions
	w      *index.Writer
	conv   *Converter
	log    *slog.Logger
	synced atomic.Bool

	mu    sync.Mutex            // guards the fields below
	files map[string]*fileState // path → what was last applied from it
	owner map[ObjectKey]string  // object → the file that defines it
	errs  map[string][]error    // path → current problems
	dups  map[string]bool       // files with an object another file defines first
	// deleted: the current Sync deleted an object (duplicates may resolve).
	deleted bool
	// recheck: a file must be read again soon (it read empty mid-write).
	recheck bool
}

type fileState struct {
	size    int64
	modTime time.Time
	hash    uint64 // content hash of the last read
	// objects holds the hash of the last good version of each object: the
	// index holds the version itself, so the source keeps no decoded copy.
	objects map[ObjectKey]uint64
	// emptySince is when the file was first read empty while it still had
	// objects (see readFileLocked).
	emptySince time.Time
}

// NewFileSource returns a source for opts.Dir writing to w.
func NewFileSource(w *index.Writer, opts FileSourceOptions) *FileSource {
	if opts.DomainSuffix == "" {
		opts.DomainSuffix = "cluster.local"
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Resync == 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &FileSource{
		opts:  opts,
		w:     w,
		conv:  NewConverter(w, opts.DomainSuffix),
		log:   opts.Logger.With("source", "file", "dir", opts.Dir),
		files: map[string]*fileState{},
		owner: map[ObjectKey]string{},
		errs:  map[string][]error{},
		dups:  map[string]bool{},
	}
}

// Synced reports whether the first full read has been applied.
func (s *FileSource) Synced() bool { return s.synced.Load() }

// Errors returns the current problems of every file, sorted by file and line.
func (s *FileSource) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []error
	for _, errs := range s.errs {
		out = append(out, errs...)
	}
	sortErrors(out)
	return out
}

// Sync reads every file whose size, modification time or content changed
// since the last Sync, and applies the difference as one batch. It fails
// only when the directory itself cannot be walked.
func (s *FileSource) Sync() (*index.ChangeSet, error) { return s.sync(false) }

// sync is Sync; quiet says no file event came for a debounce interval, so a
// file written recently is complete (every write raises an event) and is
// read now rather than one more interval later.
func (s *FileSource) sync(quiet bool) (*index.ChangeSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recheck = false
	seen := map[string]bool{}
	var b index.Batch
	err := filepath.WalkDir(s.opts.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == s.opts.Dir {
				return err
			}
			s.log.Warn("cannot read", "path", path, "err", err)
			return nil
		}
		if d.IsDir() {
			if path != s.opts.Dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // .git and editors' folders
			}
			return nil
		}
		if !isManifest(path) {
			return nil
		}
		seen[path] = true
		info, err := d.Info()
		if err != nil {
			return nil // removed while walking: the next event handles it
		}
		st := s.files[path]
		if st != nil && st.size == info.Size() && st.modTime.Equal(info.ModTime()) {
			return nil
		}
		if age := time.Since(info.ModTime()); s.synced.Load() && !quiet && age >= 0 && age < s.opts.Debounce {
			// Written within the debounce interval: it may still be being
			// written. Read it once it has been quiet that long. (The first
			// Sync reads everything: readiness means all files are in.)
			s.recheck = true
			return nil
		}
		s.readFileLocked(&b, path, info)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	for path := range s.files {
		if !seen[path] {
			s.removeFileLocked(&b, path)
		}
	}
	// A file that lost a duplicate to another file is read again once an
	// object was deleted: the other file may have dropped it (a move, or
	// the first definition's file removed).
	if s.deleted {
		for path := range s.dups {
			if info, err := os.Stat(path); err == nil && s.files[path] != nil {
				s.files[path].hash = 0
				s.readFileLocked(&b, path, info)
			}
		}
		s.deleted = false
	}
	cs := s.w.Apply(&b)
	s.synced.Store(true)
	return cs, nil
}

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readFileLocked re-reads one file and adds the difference to b.
func (s *FileSource) readFileLocked(b *index.Batch, path string, info fs.FileInfo) {
	st := s.files[path]
	if st == nil {
		st = &fileState{objects: map[ObjectKey]uint64{}}
		s.files[path] = st
	}
	data, err := os.ReadFile(path)
	if err != nil {
		// Keep everything the file had: an unreadable file is not an empty one.
		s.errs[path] = []error{&Error{Pos: Position{File: path}, Message: err.Error(), cause: ErrSyntax}}
		s.log.Warn("cannot read file; keeping its last good objects", "path", path, "err", err)
		return
	}
	st.size, st.modTime = info.Size(), info.ModTime()
	h := xxhash.Sum64(data)
	if st.hash != 0 && h == st.hash {
		return // touched, not changed
	}
	// An editor that saves in place truncates the file first: a file that
	// had objects and reads empty is most likely mid-write. Its objects are
	// deleted only if it is still empty one debounce interval later.
	if len(bytes.TrimSpace(data)) == 0 && len(st.objects) > 0 {
		if st.emptySince.IsZero() {
			st.emptySince = time.Now()
		}
		if time.Since(st.emptySince) < s.opts.Debounce {
			st.size = -1 // read it again on the next Sync
			s.recheck = true
			return
		}
	}
	st.emptySince = time.Time{}
	st.hash = h
	delete(s.dups, path)
	objs, errs := Decode(s.displayPath(path), data)
	// Objects named by an error are present but invalid: keep their last
	// good version. An error naming no object (a syntax error) could hide
	// any object, so then nothing of the file is deleted.
	keep := map[ObjectKey]bool{}
	deleteAbsent := true
	for _, err := range errs {
		if k, ok := errorObjectKey(err); ok {
			keep[k] = true
		} else {
			deleteAbsent = false
		}
	}
	present := map[ObjectKey]bool{}
	for i := range objs {
		o := &objs[i]
		k := o.Key()
		present[k] = true
		if other, ok := s.owner[k]; ok && other != path {
			s.dups[path] = true
			errs = append(errs, &Error{Pos: o.Pos, Kind: k.Kind.String(), Namespace: k.Namespace, Name: k.Name,
				Message: "also defined in " + s.displayPath(other) + "; the first definition is used", cause: ErrInvalid})
			continue
		}
		if verrs := Validate(o); len(verrs) > 0 {
			errs = append(errs, verrs...)
			keep[k] = true
			continue
		}
		if old, ok := st.objects[k]; ok && old == o.Hash {
			continue
		}
		s.conv.Put(b, o)
		st.objects[k] = o.Hash
		s.owner[k] = path
	}
	for k := range st.objects {
		if present[k] || keep[k] || !deleteAbsent {
			continue
		}
		s.conv.Delete(b, k)
		delete(st.objects, k)
		delete(s.owner, k)
		s.deleted = true
	}
	sortErrors(errs)
	s.setErrsLocked(path, errs)
}

// removeFileLocked deletes the objects of a file that is gone.
func (s *FileSource) removeFileLocked(b *index.Batch, path string) {
	for k := range s.files[path].objects {
		s.conv.Delete(b, k)
		delete(s.owner, k)
		s.deleted = true
	}
	delete(s.files, path)
	delete(s.dups, path)
	delete(s.errs, path)
	s.log.Info("file removed; its objects are deleted", "path", path)
}

func (s *FileSource) setErrsLocked(path string, errs []error) {
	if len(errs) == 0 {
		delete(s.errs, path)
		return
	}
	s.errs[path] = errs
	for _, err := range errs {
		s.log.Warn("rejected config; the last good version is kept", "err", err.Error())
	}
}

// displayPath is the path errors show: relative to the directory's parent,
// so messages read "examples/shop/vs.yaml:12".
func (s *FileSource) displayPath(path string) string {
	if rel, err := filepath.Rel(filepath.Dir(filepath.Clean(s.opts.Dir)), path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func errorObjectKey(err error) (ObjectKey, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Name == "" {
		return ObjectKey{}, false
	}
	for k := KindUnknown + 1; k < numKinds; k++ {
		if k.String() == e.Kind {
			return ObjectKey{Kind: k, Namespace: e.Namespace, Name: e.Name}, true
		}
	}
	return ObjectKey{}, false
}

// Run applies the directory, then watches it until ctx ends. It returns an
// error only if the first Sync fails (the directory is missing).
func (s *FileSource) Run(ctx context.Context) error {
	if _, err := s.Sync(); err != nil {
		return err
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("file watching unavailable; polling only", "err", err)
	} else {
		defer watcher.Close()
		s.watchTree(watcher)
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if watcher != nil {
		events, watchErrs = watcher.Events, watcher.Errors
	}
	var resync <-chan time.Time
	if s.opts.Resync > 0 {
		t := time.NewTicker(s.opts.Resync)
		defer t.Stop()
		resync = t.C
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// eventsLost is set by a watch error (a queue overflow drops events):
	// the next debounced sync cannot trust that a recent file is complete.
	eventsLost := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			if ev.Has(fsnotify.Create) && watcher != nil {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					s.watchTree(watcher) // a new folder: watch it too
				}
			}
			debounce.Reset(s.opts.Debounce)
		case err := <-watchErrs:
			s.log.Warn("file watch error; resyncing", "err", err)
			eventsLost = true
			debounce.Reset(s.opts.Debounce)
		case <-resync:
			s.syncAndLog(debounce, false)
		case <-debounce.C:
			s.syncAndLog(debounce, !eventsLost)
			eventsLost = false
		}
	}
}

func (s *FileSource) syncAndLog(debounce *time.Timer, quiet bool) {
	cs, err := s.sync(quiet)
	s.mu.Lock()
	again := s.recheck
	s.mu.Unlock()
	if again {
		debounce.Reset(s.opts.Debounce)
	}
	if err != nil {
		s.log.Error("sync failed; keeping the last good config", "err", err)
		return
	}
	if !cs.Empty() {
		s.log.Info("config applied", "version", cs.Version, "services", len(cs.Services),
			"endpoints", len(cs.Endpoints), "workloads", len(cs.Workloads))
	}
}

// watchTree adds a watch on every directory under Dir (fsnotify is not
// recursive). Adding an existing watch is a no-op.
func (s *FileSource) watchTree(w *fsnotify.Watcher) {
	watched := w.WatchList()
	_ = filepath.WalkDir(s.opts.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != s.opts.Dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !slices.Contains(watched, path) {
			if err := w.Add(path); err != nil {
				s.log.Warn("cannot watch", "path", path, "err", err)
			}
		}
		return nil
	})
}
