//go:build unix

package ingest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// within runs f and fails the test if it has not returned by the deadline:
// what these tests guard against is a read that blocks forever.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s blocked", what)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestReadOpenNeverBlocks: a FIFO that passed the stat (swapped in after
// it) is opened without waiting for a writer and refused on its descriptor.
func TestReadOpenNeverBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.yaml")
	mkfifo(t, fifo)
	within(t, "readOpen on a FIFO", func() {
		_, _, err := readOpen(fifo, "pipe.yaml")
		if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "pipe.yaml: not a regular file (a named pipe)") {
			t.Errorf("readOpen(FIFO) = %v, want a not-a-regular-file error", err)
		}
	})
	within(t, "readManifest on a link to /dev/zero", func() {
		link := filepath.Join(t.TempDir(), "zero.yaml")
		symlink(t, "/dev/zero", link)
		_, _, err := readManifest(link, "zero.yaml")
		if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "a character device") {
			t.Errorf("readManifest(/dev/zero) = %v", err)
		}
	})
}

// TestFileSourceSkipsWhatItMustNotRead: every kind of path the file source
// must not read, next to a good file. Nothing blocks, the good file
// serves, and each skipped path is reported once with its reason.
func TestFileSourceSkipsWhatItMustNotRead(t *testing.T) {
	f := newSourceFixture(t)
	f.write("good.yaml", testService)
	f.write(".hidden.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: hidden}\n")
	f.write(".git/objects.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: in-git}\n")
	f.write("notes.txt", "not a manifest")
	symlink(t, "/dev/zero", filepath.Join(f.dir, "zero.yaml"))
	mkfifo(t, filepath.Join(f.dir, "pipe.yaml"))
	symlink(t, "loop.yaml", filepath.Join(f.dir, "loop.yaml"))
	symlink(t, "missing.yaml", filepath.Join(f.dir, "dangling.yaml"))
	symlink(t, "..", filepath.Join(f.dir, "up")) // a directory loop, if it were followed
	big := filepath.Join(f.dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxFileSize+1); err != nil { // sparse: never read
		t.Fatal(err)
	}
	within(t, "Sync", func() { f.sync() })

	if f.service("reviews.shop.svc.cluster.local", "shop") == nil {
		t.Fatal("good.yaml was not applied")
	}
	f.w.Snapshot().Namespaces(func(*index.Namespace) bool {
		t.Error("a namespace was applied: a hidden file or directory was read")
		return false
	})
	base := filepath.Base(f.dir)
	want := []string{
		base + "/big.yaml: file is 16777217 bytes, over the limit of 16777216 (16 MiB); not read",
		base + "/dangling.yaml: dangling symbolic link: its target missing.yaml does not exist",
		base + "/loop.yaml: symbolic link loop; not read",
		base + "/pipe.yaml: not a regular file (a named pipe); only regular files are read",
		base + "/up: warning: symbolic link to a directory, not followed: link its files, or the directory's parent, instead",
		base + "/zero.yaml: not a regular file (a character device); only regular files are read",
	}
	if got := errorLines(f.src.Errors()); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, err := range f.src.Errors() {
		if strings.Contains(err.Error(), "/up:") != IsWarning(err) {
			t.Errorf("IsWarning(%v) = %v", err, IsWarning(err))
		}
	}

	// A file read before and replaced by a FIFO keeps its objects (a path
	// that cannot be read is not an empty file) and is reported.
	good := filepath.Join(f.dir, "good.yaml")
	if err := os.Remove(good); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, good)
	within(t, "Sync with good.yaml a FIFO", func() { f.sync() })
	if f.service("reviews.shop.svc.cluster.local", "shop") == nil {
		t.Error("good.yaml's service was deleted when the file became a FIFO")
	}
	if got := strings.Join(errorLines(f.src.Errors()), "\n"); !strings.Contains(got, base+"/good.yaml: not a regular file (a named pipe)") {
		t.Errorf("errors lack good.yaml's:\n%s", got)
	}
}

// TestFileSourceServesAroundAFIFO: the running source, with a FIFO in its
// directory, answers Errors and applies new files.
func TestFileSourceServesAroundAFIFO(t *testing.T) {
	f := newSourceFixture(t)
	f.src = NewFileSource(f.w, FileSourceOptions{Dir: f.dir, Debounce: 10 * time.Millisecond, Resync: 50 * time.Millisecond})
	mkfifo(t, filepath.Join(f.dir, "pipe.yaml"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()
	for !f.src.Synced() {
		if ctx.Err() != nil {
			t.Fatal("the source never synced with a FIFO in its directory")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.write("reviews.yaml", testService)
	for f.service("reviews.shop.svc.cluster.local", "shop") == nil {
		if ctx.Err() != nil {
			t.Fatal("a new file was not applied with a FIFO in the directory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	within(t, "Errors", func() {
		if got := strings.Join(errorLines(f.src.Errors()), "\n"); !strings.Contains(got, "pipe.yaml: not a regular file (a named pipe)") {
			t.Errorf("errors = %s", got)
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFileSourceConfigMapVolume: a ConfigMap volume's layout. The visible
// files are links into "..data", itself a link to a hidden timestamped
// directory; an update writes a new directory and swaps "..data". Each
// object is read once (no conflict with the hidden copy), and a swap is
// seen even when the new file has the old one's size and time: it is
// another file.
func TestFileSourceConfigMapVolume(t *testing.T) {
	f := newSourceFixture(t)
	stamp := time.Now().Add(-time.Hour)
	version := func(name, content string) {
		t.Helper()
		p := filepath.Join(f.dir, name, "reviews.yaml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	const v1, v2 = "..2026_01_02_03_04_05.000000001", "..2026_01_02_03_09_00.000000002"
	version(v1, testService)
	symlink(t, v1, filepath.Join(f.dir, "..data"))
	symlink(t, "..data/reviews.yaml", filepath.Join(f.dir, "reviews.yaml"))
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc == nil || svc.Ports[0].Number != 9080 {
		t.Fatalf("service = %+v", svc)
	}
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors %v: a file was read twice or skipped", errs)
	}

	// The kubelet's update: a new directory, "..data" swapped atomically.
	version(v2, strings.Replace(testService, "port: 9080", "port: 9081", 1))
	symlink(t, v2, filepath.Join(f.dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(f.dir, "..data_tmp"), filepath.Join(f.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.dir, v1)); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if svc := f.service("reviews.shop.svc.cluster.local", "shop"); svc == nil || svc.Ports[0].Number != 9081 {
		t.Fatalf("after the swap: service = %+v, want port 9081", svc)
	}
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors after the swap: %v", errs)
	}
}

// TestComparePathsIsWalkOrder: the conflict order is the order a walk
// meets files in.
func TestComparePathsIsWalkOrder(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a-b.yaml", "a/z.yaml", "a.yaml", "a0.yaml", "b/c/d.yaml", "b/c.yaml", "b.yaml", "B.yaml", "a/b/c.yaml"}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var walked []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			walked = append(walked, p)
		}
		return nil
	})
	sorted := slices.Clone(walked)
	slices.Reverse(sorted)
	slices.SortFunc(sorted, comparePaths)
	if !slices.Equal(sorted, walked) {
		t.Errorf("comparePaths order:\n%v\nwalk order:\n%v", sorted, walked)
	}
}

func errorLines(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	slices.Sort(out)
	return out
}
