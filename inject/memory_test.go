package inject

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// heapAfterGC is the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestInjectorConfigMemory measures the heap the injector's config holds
// (the issue asks for it; docs/injection.md, "Performance"): the chart's
// injector ConfigMap and mesh config parsed (every template compiled),
// then every template folded over them, then one rendered template's
// overlay cache entry. The bounds are generous (several times what was
// measured): they catch a config held twice, not noise.
func TestInjectorConfigMemory(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "chart", "default", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfgText, valsText, meshText := read("config.yaml"), read("values.json"), read("mesh.yaml")
	pod := foldPods(t)[0].pod
	// Process-wide caches (reflection, encoding/json's, the typed
	// diff's) are filled by a first injector, not counted.
	func() {
		warm, err := New(foldSettings(t)["default"], nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := warm.Inject(Request{Pod: pod, Namespace: "default"}); err != nil {
			t.Fatal(err)
		}
	}()
	base := heapAfterGC()

	cfg, err := ParseConfig(cfgText)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := ParseValues(valsText)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := ParseMesh(meshText)
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(&Settings{Config: cfg, Values: vals, Mesh: mesh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed := heapAfterGC()

	st := in.cur.Load()
	for _, n := range cfg.TemplateNames() {
		st.template(n)
	}
	folded := heapAfterGC()

	res, err := in.Inject(Request{Pod: pod, Namespace: "default"})
	if err != nil || !res.Injected {
		t.Fatalf("injection: %v", err)
	}
	res = Result{}
	entry := heapAfterGC()
	runtime.KeepAlive(in)
	runtime.KeepAlive(pod)

	p, f, e := int64(parsed-base), int64(folded-parsed), int64(entry-folded)
	t.Logf("injector config (%d KiB of ConfigMap text, %d templates): parsed %d KiB; all templates folded +%d KiB; one overlay cache entry +%d KiB (at most %d entries)",
		(len(cfgText)+len(valsText)+len(meshText))>>10, len(cfg.TemplateNames()), p>>10, f>>10, e>>10, overlayCacheEntries)
	if p > 16<<20 || f > 16<<20 || e > 1<<20 {
		t.Errorf("injector config holds %d bytes parsed, %d folded, %d per overlay entry: more than the bounds", p, f, e)
	}
}
