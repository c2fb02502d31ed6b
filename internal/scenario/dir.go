package scenario

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir is the directory of the scenario files every target runs:
// internal/scenario/testdata, found from the test's working directory.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "scenario", "testdata")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("scenario: no go.mod above the working directory")
		}
		dir = parent
	}
}
