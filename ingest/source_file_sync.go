package ingest

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// sync is Sync; quiet says no file event came for a debounce interval, so a
// file written recently is complete (every write raises an event) and is
// read now rather than one more interval later. recheck asks for another
// sync one debounce interval later (a file was too recent or read empty).
//
// A sync runs in three steps: files that are gone give up their objects;
// changed files are read in path order, each putting at once the objects it
// is the definition of; then every object whose definition may have moved
// is settled, re-reading a file that became an object's definition (it was
// a conflict's loser) if it was not read in this sync.
func (s *FileSource) sync(quiet bool) (cs *index.ChangeSet, recheck bool, err error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	entries, err := walkManifests(s.opts.Dir, s.displayPath)
	if err != nil {
		return nil, false, fmt.Errorf("file source: %w", err)
	}
	var b index.Batch
	touched := map[ObjectKey]bool{}

	seen := make(map[string]bool, len(entries))
	var lostDirs []string // directories that could not be read: keep their files
	for _, e := range entries {
		seen[e.path] = true
		if e.dir {
			lostDirs = append(lostDirs, e.path+string(os.PathSeparator))
		}
	}
	for path := range s.files {
		if !seen[path] && !underAny(path, lostDirs) {
			s.removeFileLocked(path, touched)
		}
	}

	read := map[string]bool{}
	for _, e := range entries {
		if e.err != nil {
			s.problemLocked(e.path, e.err)
			continue
		}
		st := s.files[e.path]
		if st != nil && st.info != nil && os.SameFile(st.info, e.info) &&
			st.info.Size() == e.info.Size() && st.info.ModTime().Equal(e.info.ModTime()) {
			continue
		}
		if age := time.Since(e.info.ModTime()); s.synced.Load() && !quiet && age >= 0 && age < s.opts.Debounce {
			// Written within the debounce interval: it may still be being
			// written. Read it once it has been quiet that long. (The first
			// Sync reads everything: readiness means all files are in.)
			recheck = true
			continue
		}
		read[e.path] = true
		recheck = s.readLocked(&b, e.path, false, touched) || recheck
	}

	recheck = s.settleLocked(&b, touched, read) || recheck
	s.publishLocked()
	cs = s.w.Apply(&b)
	s.releaseLocked()
	s.synced.Store(true)
	return cs, recheck, nil
}

// settleLocked settles every touched object. A file whose object it now
// defines but whose definition is not in the index is read again (each
// file once per sync, read naming those read already; one that still
// fails is left for the next sync). It reports whether a sync is needed
// soon.
func (s *FileSource) settleLocked(b *index.Batch, touched map[ObjectKey]bool, read map[string]bool) (recheck bool) {
	for len(touched) > 0 {
		var again []string
		for k := range touched {
			switch file := s.resolveLocked(b, k, nil); {
			case file == "" || slices.Contains(again, file):
			case read[file]:
				recheck = true // it changed again since: the next sync settles k
			default:
				again = append(again, file)
			}
		}
		touched = map[ObjectKey]bool{}
		slices.SortFunc(again, comparePaths)
		for _, path := range again {
			read[path] = true
			recheck = s.readLocked(b, path, true, touched) || recheck
		}
	}
	return recheck
}

// releaseLocked tells the Precedence which objects no file defines any
// more, now that the batch removing them is applied.
func (s *FileSource) releaseLocked() {
	s.opts.Precedence.releaseLocked(s.released, func(k ObjectKey) bool { return len(s.claims[k]) > 0 })
	s.released = s.released[:0]
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// problemLocked records why a path is not read. A file read before keeps
// what it defined: a path that cannot be read is not an empty file.
func (s *FileSource) problemLocked(path string, err error) {
	st := s.files[path]
	if st == nil {
		st = &fileState{}
		s.files[path] = st
	}
	if len(st.problems) != 1 || st.problems[0].Error() != err.Error() {
		s.log.Warn("config path not read; what it defined before (if anything) is kept", "err", err.Error())
	}
	st.info, st.hash, st.problems = nil, 0, []error{err}
}

// readLocked reads one file, records what it defines and puts each object
// it is the definition of; every object whose definition may have changed
// is added to touched. force reads the objects even if the content did not
// change (the file has become an object's definition). It returns whether
// the file must be read again soon.
func (s *FileSource) readLocked(b *index.Batch, path string, force bool, touched map[ObjectKey]bool) (recheck bool) {
	st := s.files[path]
	if st == nil {
		st = &fileState{}
		s.files[path] = st
	}
	shown := s.displayPath(path)
	data, info, err := readManifest(path, shown)
	if err != nil {
		s.problemLocked(path, err)
		return false
	}
	h := xxhash.Sum64(data)
	if !force && st.hash != 0 && h == st.hash {
		st.info = info // touched, not changed
		return false
	}
	// An editor that saves in place truncates the file first: a file that
	// had objects and reads empty is most likely mid-write. Its objects are
	// deleted only if it is still empty one debounce interval later.
	if len(bytes.TrimSpace(data)) == 0 && len(st.defs) > 0 {
		if st.emptySince.IsZero() {
			st.emptySince = time.Now()
		}
		if time.Since(st.emptySince) < s.opts.Debounce {
			st.info = nil // read it again on the next Sync
			return true
		}
	}
	st.emptySince = time.Time{}
	st.info, st.hash = info, h

	objs, errs, warns := DecodeWithWarnings(shown, data)
	// An Istio object labelled for another revision is not this control
	// plane's config: as if the file did not define it (revision.go).
	objs, warns, skipped := dropOtherRevisions(objs, warns, s.opts.Revision)
	warns = append(warns, skipped...)
	defs, errs := fileDefinitions(objs, errs)
	// An error naming no object (a syntax error) could hide any object, so
	// then nothing the file defined before is dropped.
	dropAbsent := true
	for _, err := range errs {
		if _, ok := errorObjectKey(err); !ok {
			dropAbsent = false
		}
	}
	present := make(map[ObjectKey]bool, len(defs))
	if st.defs == nil {
		st.defs = make(map[ObjectKey]fileDef, len(defs))
	}
	for _, d := range defs {
		present[d.key] = true
		def := fileDef{line: d.pos.Line}
		if d.valid {
			def.hash = d.obj.Hash
		}
		old, had := st.defs[d.key]
		st.defs[d.key] = def
		if !had {
			s.claimLocked(d.key, path)
		}
		if !had || old.hash != def.hash || force {
			touched[d.key] = true
		}
		if d.valid && s.claims[d.key][0] == path {
			s.resolveLocked(b, d.key, d.obj)
		}
	}
	for k := range st.defs {
		if !present[k] && dropAbsent {
			delete(st.defs, k)
			s.unclaimLocked(k, path)
			touched[k] = true
		}
	}
	for _, err := range errs {
		s.log.Warn("rejected config; the last good version is kept", "err", err.Error())
	}
	for _, w := range warns {
		s.log.Warn("config ignored", "warning", w.Error())
	}
	st.problems = append(errs, warns...)
	return false
}

// removeFileLocked forgets a file that is gone; its objects are settled
// later in the sync (deleted, or taken over by another definition).
func (s *FileSource) removeFileLocked(path string, touched map[ObjectKey]bool) {
	st := s.files[path]
	for k := range st.defs {
		s.unclaimLocked(k, path)
		touched[k] = true
	}
	delete(s.files, path)
	if len(st.defs) > 0 {
		s.log.Info("file removed; its objects are deleted", "path", path)
	}
}

func (s *FileSource) claimLocked(k ObjectKey, path string) {
	files := s.claims[k]
	if len(files) == 0 {
		s.opts.Precedence.claimLocked(k)
	}
	i, found := slices.BinarySearchFunc(files, path, comparePaths)
	if !found {
		files = slices.Insert(files, i, path)
		s.claims[k] = files
	}
	if len(files) > 1 {
		s.conflicts[k] = true
	}
}

func (s *FileSource) unclaimLocked(k ObjectKey, path string) {
	files := s.claims[k]
	if i, found := slices.BinarySearchFunc(files, path, comparePaths); found {
		files = slices.Delete(files, i, i+1)
	}
	if len(files) < 2 {
		delete(s.conflicts, k)
	}
	if len(files) == 0 {
		delete(s.claims, k)
		if s.opts.Precedence != nil {
			s.released = append(s.released, k)
		}
		return
	}
	s.claims[k] = files
}

// resolveLocked makes the index hold k's definition: the first file's
// version if it is valid, its last good version (already in the index) if
// it is not, nothing if no file defines k or the definition is invalid and
// has no good version; nothing of the directory's if the API server
// defines k (precedence.go). obj, when not nil, is the first file's
// decoded object. It returns the file to read when the definition's object
// is needed and not at hand.
func (s *FileSource) resolveLocked(b *index.Batch, k ObjectKey, obj *Object) (needRead string) {
	cur, has := s.applied[k]
	files := s.claims[k]
	if len(files) == 0 {
		delete(s.shadowed, k)
		if has {
			s.conv.Delete(b, k)
			delete(s.applied, k)
		}
		return ""
	}
	first := files[0]
	if s.opts.Precedence.kubeDefinesLocked(k) {
		// The API server's version is served. If the index still holds
		// this source's (the API server's is not applied yet), the
		// KubeSource replaces it when it applies k.
		s.shadowLocked(k, first)
		return ""
	}
	if s.shadowed[k] {
		delete(s.shadowed, k)
		s.log.Info("the API server no longer defines the object; the directory's definition is used",
			"object", k.String(), "file", s.displayPath(first))
	}
	def := s.files[first].defs[k]
	switch {
	case def.hash == 0:
		// Invalid: keep its own last good version, never another file's.
		if has && cur.file != first {
			s.conv.Delete(b, k)
			delete(s.applied, k)
		}
	case has && cur == appliedObject{first, def.hash}:
	case obj == nil:
		return first
	default:
		if has && cur.file != first {
			s.log.Info("object now defined by another file", "object", k.String(), "file", s.displayPath(first), "was", s.displayPath(cur.file))
		}
		s.conv.Put(b, obj)
		s.applied[k] = appliedObject{first, def.hash}
	}
	return ""
}

// shadowLocked records that the API server's definition of k is served
// instead of the one in file (logged once, reported by Errors).
func (s *FileSource) shadowLocked(k ObjectKey, file string) {
	if !s.shadowed[k] {
		s.shadowed[k] = true
		s.log.Info("the API server defines the object too; its definition is used",
			"object", k.String(), "file", s.displayPath(file))
	}
}

// yieldLocked gives k up to the API server's definition: the KubeSource
// puts it in the same batch, b.
func (s *FileSource) yieldLocked(b *index.Batch, k ObjectKey) {
	if _, has := s.applied[k]; has {
		s.conv.Delete(b, k)
		delete(s.applied, k)
	}
	if files := s.claims[k]; len(files) > 0 {
		s.shadowLocked(k, files[0])
	}
}

// takeOverLocked applies the directory's definition of k into b, now that
// the KubeSource removed the API server's in b: the defining file is
// read again. It reports whether a sync is needed soon.
func (s *FileSource) takeOverLocked(b *index.Batch, k ObjectKey) (recheck bool) {
	return s.settleLocked(b, map[ObjectKey]bool{k: true}, map[string]bool{})
}

// publishLocked makes the files' problems and the conflicts what Errors
// returns.
func (s *FileSource) publishLocked() {
	var errs []error
	for _, st := range s.files {
		errs = append(errs, st.problems...)
	}
	for k := range s.conflicts {
		files := s.claims[k]
		at := func(path string) Position {
			return Position{File: s.displayPath(path), Line: s.files[path].defs[k].line}
		}
		first := at(files[0])
		for _, f := range files[1:] {
			errs = append(errs, conflictError(k, at(f), first))
		}
	}
	for k := range s.shadowed {
		if len(s.claims[k]) == 0 {
			continue // not reached: resolveLocked drops it first
		}
		f := s.claims[k][0]
		errs = append(errs, shadowError(k, Position{File: s.displayPath(f), Line: s.files[f].defs[k].line}))
	}
	sortErrors(errs)
	s.mu.Lock()
	s.errs = errs
	s.mu.Unlock()
}
