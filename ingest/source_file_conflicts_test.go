package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// reviewsOn is testService with its port, to tell definitions apart.
func reviewsOn(port string) string {
	return strings.Replace(testService, "port: 9080", "port: "+port, 1)
}

// port is the port of the reviews service in w's index, 0 if absent.
func reviewsPort(w *index.Writer) uint32 {
	s, _, _ := w.Snapshot().LookupService("reviews.shop.svc.cluster.local", "shop")
	if s == nil {
		return 0
	}
	return s.Ports[0].Number
}

// restarted reads dir with a new source and index, as a restarted server
// (or another replica) does, and returns its port and errors.
func restarted(t *testing.T, dir string) (uint32, []string) {
	t.Helper()
	w := index.NewWriter()
	src := NewFileSource(w, FileSourceOptions{Dir: dir, Resync: -1})
	if _, err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	return reviewsPort(w), errorLines(src.Errors())
}

// TestFileSourceConflictsAreDeterministic: three files define one object.
// Whatever order they are written and read in, one sync per write, the
// running source serves the first file in path order ("b/x.yaml" sorts
// before "b-c.yaml", as a walk meets them), reports the others naming both
// files, and agrees with a restarted source on the winner and the errors.
// Deleting the winner hands the object to the next file; re-adding it
// takes it back.
func TestFileSourceConflictsAreDeterministic(t *testing.T) {
	files := map[string]string{"a.yaml": "1001", "b/x.yaml": "1002", "b-c.yaml": "1003"}
	orders := [][]string{
		{"a.yaml", "b/x.yaml", "b-c.yaml"}, {"a.yaml", "b-c.yaml", "b/x.yaml"},
		{"b/x.yaml", "a.yaml", "b-c.yaml"}, {"b/x.yaml", "b-c.yaml", "a.yaml"},
		{"b-c.yaml", "a.yaml", "b/x.yaml"}, {"b-c.yaml", "b/x.yaml", "a.yaml"},
	}
	for _, order := range orders {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			f := newSourceFixture(t)
			for _, name := range order {
				f.write(name, reviewsOn(files[name]))
				f.sync()
			}
			check := func(step string, wantPort uint32, wantErrs ...string) {
				t.Helper()
				running := errorLines(f.src.Errors())
				base := filepath.Base(f.dir) + "/"
				for i := range wantErrs {
					wantErrs[i] = base + wantErrs[i]
				}
				slices.Sort(wantErrs)
				if got := reviewsPort(f.w); got != wantPort {
					t.Errorf("%s: running source serves port %d, want %d", step, got, wantPort)
				}
				if !slices.Equal(running, wantErrs) {
					t.Errorf("%s: running source's errors:\n%s\nwant:\n%s", step, strings.Join(running, "\n"), strings.Join(wantErrs, "\n"))
				}
				port, errs := restarted(t, f.dir)
				if port != wantPort || !slices.Equal(errs, running) {
					t.Errorf("%s: restarted source serves %d with errors\n%s\nthe running one %d with\n%s", step, port, strings.Join(errs, "\n"), wantPort, strings.Join(running, "\n"))
				}
			}
			const used = ", which is used (the first definition in path order wins)"
			check("all three", 1001,
				"b/x.yaml:1: Service shop/reviews: also defined at "+filepath.Base(f.dir)+"/a.yaml:1"+used,
				"b-c.yaml:1: Service shop/reviews: also defined at "+filepath.Base(f.dir)+"/a.yaml:1"+used)

			// The winner goes: the next in path order takes over.
			if err := os.Remove(filepath.Join(f.dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			f.sync()
			check("a.yaml removed", 1002,
				"b-c.yaml:1: Service shop/reviews: also defined at "+filepath.Base(f.dir)+"/b/x.yaml:1"+used)

			// A loser's edit changes nothing served.
			f.write("b-c.yaml", "# edited\n"+reviewsOn("1004"))
			f.sync()
			check("b-c.yaml edited", 1002,
				"b-c.yaml:2: Service shop/reviews: also defined at "+filepath.Base(f.dir)+"/b/x.yaml:1"+used)

			// The winner drops the object: the next file takes over.
			f.write("b/x.yaml", testPod)
			f.sync()
			check("b/x.yaml dropped it", 1004)

			// The first file comes back and wins again.
			f.write("a.yaml", reviewsOn("1001"))
			f.sync()
			check("a.yaml back", 1001,
				"b-c.yaml:2: Service shop/reviews: also defined at "+filepath.Base(f.dir)+"/a.yaml:1"+used)
		})
	}
}

// TestFileSourceInvalidFirstDefinition: an invalid first definition still
// is the definition. The running source keeps its last good version (the
// rule for every invalid object); a restarted one has none to keep. Both
// report the same errors, and neither serves the later file's version.
func TestFileSourceInvalidFirstDefinition(t *testing.T) {
	f := newSourceFixture(t)
	f.write("a.yaml", reviewsOn("1001"))
	f.write("b.yaml", reviewsOn("1002"))
	f.sync()
	f.write("a.yaml", reviewsOn("99999"))
	f.sync()
	if got := reviewsPort(f.w); got != 1001 {
		t.Errorf("running source serves %d, want a.yaml's last good 1001", got)
	}
	port, errs := restarted(t, f.dir)
	if port != 0 {
		t.Errorf("restarted source serves %d, want nothing (a.yaml's definition is invalid)", port)
	}
	if running := errorLines(f.src.Errors()); !slices.Equal(running, errs) || len(errs) != 2 {
		t.Errorf("errors differ or are not a.yaml's and the conflict:\nrunning:\n%s\nrestarted:\n%s", strings.Join(running, "\n"), strings.Join(errs, "\n"))
	}
	// Fixing the first file serves it; deleting it hands over to b.yaml.
	f.write("a.yaml", reviewsOn("1003"))
	f.sync()
	if got := reviewsPort(f.w); got != 1003 {
		t.Errorf("after the fix: %d, want 1003", got)
	}
	if err := os.Remove(filepath.Join(f.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := reviewsPort(f.w); got != 1002 {
		t.Errorf("after removing a.yaml: %d, want b.yaml's 1002", got)
	}
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Errorf("errors after the conflict was resolved: %v", errs)
	}
}

// TestFileSourceDuplicateInOneFile: the first document wins, the second
// is reported, as across files.
func TestFileSourceDuplicateInOneFile(t *testing.T) {
	f := newSourceFixture(t)
	f.write("a.yaml", reviewsOn("1001")+"---\n"+reviewsOn("1002"))
	f.sync()
	if got := reviewsPort(f.w); got != 1001 {
		t.Errorf("serves %d, want the first document's 1001", got)
	}
	want := []string{filepath.Base(f.dir) + "/a.yaml:12: Service shop/reviews: also defined at " + filepath.Base(f.dir) + "/a.yaml:1, which is used (the first definition in path order wins)"}
	if got := errorLines(f.src.Errors()); !slices.Equal(got, want) {
		t.Errorf("errors %q, want %q", got, want)
	}
}
