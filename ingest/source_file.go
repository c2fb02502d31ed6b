package ingest

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// FileSourceOptions configure a FileSource.
type FileSourceOptions struct {
	// Dir is the directory to read, recursively: its *.yaml, *.yml and
	// *.json regular files (links resolved) of at most MaxFileSize bytes,
	// skipping hidden entries (walk.go has the rules).
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
	// Precedence, shared with a KubeSource writing to the same Writer,
	// makes the API server's definition of an object win over the
	// directory's (precedence.go); nil when this is the only source.
	Precedence *Precedence
	// Revision is the control plane's revision: an Istio object labelled
	// istio.io/rev with another value is not read (revision.go), and
	// each one is a warning at its line; "" reads them all. Discovery
	// selectors do not apply to the directory (KubeSource.SetDiscoverySelectors).
	Revision string
}

// FileSource applies a directory of manifests to the index and keeps it
// current as files change. A change to one file re-applies only that file's
// objects. Invalid objects are reported and skipped; the last good version
// of each is kept, and a file that cannot be read or parsed keeps all of its
// objects. When several files define one object, the first in path order
// wins (conflicts.go), whatever order they were read in; when an API
// server defines it too, the API server's definition wins (precedence.go).
//
// A Sync walks and reads files holding only syncMu; Errors takes only mu,
// which a Sync holds just to publish its result, so a slow or stuck read
// never stalls /debug/config_errors (and nothing it reads can block: see
// readManifest). A KubeSource sharing a Precedence takes syncMu too, to
// settle the objects both define with this source's state.
type FileSource struct {
	opts   FileSourceOptions
	w      *index.Writer
	conv   *Converter // guarded by syncMu
	log    *slog.Logger
	synced atomic.Bool

	syncMu sync.Mutex
	// files: path → what was last read from it, or why it was not.
	files map[string]*fileState // guarded by syncMu
	// claims: object → the files that define it, in path order; the
	// first is the definition.
	claims map[ObjectKey][]string // guarded by syncMu
	// applied: object → the version in the index and the file it came from.
	applied map[ObjectKey]appliedObject // guarded by syncMu
	// conflicts: the objects more than one file defines.
	conflicts map[ObjectKey]bool // guarded by syncMu
	// shadowed: the objects the directory defines whose API server
	// definition is served instead (precedence.go).
	shadowed map[ObjectKey]bool // guarded by syncMu
	// released: objects no file defines any more, to give up once the
	// batch that removed them is applied (Precedence.releaseLocked).
	released []ObjectKey // guarded by syncMu
	// wantSync asks Run for a sync soon: a file the KubeSource re-read on
	// its behalf was mid-write (buffered, 1).
	wantSync chan struct{}

	mu   sync.Mutex
	errs []error // guarded by mu: every current problem, sorted by file and line
}

type fileState struct {
	// info is the file last read (links resolved), to tell a change by
	// identity, size and modification time; nil forces a read.
	info fs.FileInfo
	hash uint64 // content hash of the last read
	// defs holds, for each object the file defines, where and the hash of
	// the definition (0 if it is invalid). The index holds the version
	// itself, so the source keeps no decoded copy.
	defs map[ObjectKey]fileDef
	// problems are the file's current errors and warnings (decode,
	// validation, or why it cannot be read); conflicts are added when
	// published.
	problems []error
	// emptySince is when the file was first read empty while it still had
	// objects (see readLocked).
	emptySince time.Time
}

type fileDef struct {
	line int
	hash uint64 // 0: invalid
}

type appliedObject struct {
	file string
	hash uint64
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
	s := &FileSource{
		opts:    opts,
		w:       w,
		conv:    NewConverter(w, opts.DomainSuffix),
		log:     opts.Logger.With("source", "file", "dir", opts.Dir),
		files:   map[string]*fileState{},
		claims:  map[ObjectKey][]string{},
		applied: map[ObjectKey]appliedObject{},

		conflicts: map[ObjectKey]bool{},
		shadowed:  map[ObjectKey]bool{},
		wantSync:  make(chan struct{}, 1),
	}
	if opts.Precedence != nil {
		opts.Precedence.file = s
	}
	return s
}

// Synced reports whether the first full read has been applied.
func (s *FileSource) Synced() bool { return s.synced.Load() }

// Errors returns the current problems of every file, sorted by file and
// line: decode and validation errors, paths that are not read (and why),
// conflicting definitions, and warnings (IsWarning).
func (s *FileSource) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// Sync reads every file whose identity, size, modification time or content
// changed since the last Sync, and applies the difference as one batch. It
// fails only when the directory itself cannot be walked.
func (s *FileSource) Sync() (*index.ChangeSet, error) {
	cs, _, err := s.sync(false)
	return cs, err
}

// displayPath is the path errors show: relative to the directory's parent,
// so messages read "examples/shop/vs.yaml:12".
func (s *FileSource) displayPath(path string) string {
	if rel, err := filepath.Rel(filepath.Dir(filepath.Clean(s.opts.Dir)), path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
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
		case <-s.wantSync:
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
	cs, again, err := s.sync(quiet)
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

// kick asks Run for a sync one debounce interval from now.
func (s *FileSource) kick() {
	select {
	case s.wantSync <- struct{}{}:
	default:
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
		if path != s.opts.Dir && hidden(d.Name()) {
			return filepath.SkipDir // as walkManifests does
		}
		if !slices.Contains(watched, path) {
			if err := w.Add(path); err != nil {
				s.log.Warn("cannot watch", "path", path, "err", err)
			}
		}
		return nil
	})
}
