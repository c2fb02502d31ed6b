package loadgen

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMergeRefsModel checks the sorted-slice set operations of a proxy's
// state against a naive map model.
func TestMergeRefsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randRefs := func(n int) []ref {
		var out []ref
		for range n {
			out = append(out, ref{name: uint32(1 + rng.IntN(40)), ref: uint32(rng.IntN(3))})
		}
		slices.SortFunc(out, cmpRef)
		return slices.Compact(out)
	}
	randIDs := func(n int) []uint32 {
		var out []uint32
		for range n {
			out = append(out, uint32(1+rng.IntN(40)))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for range 2000 {
		have, entries, removed := randRefs(rng.IntN(30)), randRefs(rng.IntN(10)), randIDs(rng.IntN(5))
		// Model: name → set of refs.
		model := map[uint32]map[uint32]bool{}
		for _, r := range have {
			if model[r.name] == nil {
				model[r.name] = map[uint32]bool{}
			}
			model[r.name][r.ref] = true
		}
		for _, n := range removed {
			delete(model, n)
		}
		for _, r := range entries {
			delete(model, r.name)
		}
		for _, r := range entries {
			if model[r.name] == nil {
				model[r.name] = map[uint32]bool{}
			}
			model[r.name][r.ref] = true
		}
		var want []ref
		for n, refs := range model {
			for r := range refs {
				want = append(want, ref{n, r})
			}
		}
		slices.SortFunc(want, cmpRef)
		got := mergeRefs(slices.Clone(have), entries, removed)
		if !slices.Equal(got, want) {
			t.Fatalf("mergeRefs(%v, %v, %v) = %v, want %v", have, entries, removed, got, want)
		}
		if len(entries)+len(removed) <= smallMerge {
			if got := mergeSmall(slices.Clone(have), entries, removed); !slices.Equal(got, want) {
				t.Fatalf("mergeSmall(%v, %v, %v) = %v, want %v", have, entries, removed, got, want)
			}
		}

		names := randIDs(rng.IntN(20))
		kept := keepSubscribed(slices.Clone(have), names)
		var wantKept []ref
		for _, r := range have {
			if slices.Contains(names, r.name) {
				wantKept = append(wantKept, r)
			}
		}
		if !slices.Equal(kept, wantKept) {
			t.Fatalf("keepSubscribed(%v, %v) = %v, want %v", have, names, kept, wantKept)
		}
		all := true
		for _, n := range names {
			all = all && holds(have, n)
		}
		if holdsAll(have, names) != all {
			t.Fatalf("holdsAll(%v, %v) = %v", have, names, !all)
		}

		a, b := randIDs(rng.IntN(10)), randIDs(rng.IntN(10))
		added, gone := diffIDs(a, b)
		for _, n := range added {
			if slices.Contains(a, n) || !slices.Contains(b, n) {
				t.Fatalf("diffIDs(%v, %v) added %v", a, b, added)
			}
		}
		for _, n := range gone {
			if !slices.Contains(a, n) || slices.Contains(b, n) {
				t.Fatalf("diffIDs(%v, %v) removed %v", a, b, gone)
			}
		}
		union := unionIDs(a, b)
		wantUnion := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
		if !slices.Equal(union, wantUnion) {
			t.Fatalf("unionIDs(%v, %v) = %v", a, b, union)
		}
		if len(added)+len(a) != len(union) || len(gone)+len(b) != len(union) {
			t.Fatalf("diffIDs(%v, %v) = %v, %v", a, b, added, gone)
		}
	}
}

func TestRefIDs(t *testing.T) {
	have := []ref{{1, 0}, {2, 7}, {3, 7}, {3, 9 | refCluster}, {4, 5}}
	if got := refIDs(have, 0); !slices.Equal(got, []uint32{5, 7}) {
		t.Errorf("refIDs kind 0 = %v", got)
	}
	if got := refIDs(have, refCluster); !slices.Equal(got, []uint32{9 | refCluster}) {
		t.Errorf("refIDs cluster = %v", got)
	}
}

func TestSymtab(t *testing.T) {
	s := newSymtab()
	a, b := s.idString("outbound|80||a"), s.idString("outbound|80||b")
	if a == 0 || b == 0 || a == b || a&refCluster != 0 {
		t.Fatalf("ids %d %d", a, b)
	}
	if s.idString("outbound|80||a") != a || s.name(a) != "outbound|80||a" || s.name(a|refCluster) != "outbound|80||a" {
		t.Error("not stable")
	}
	if s.name(0) != "" || s.size() != 2 {
		t.Errorf("size %d", s.size())
	}
	name := []byte("outbound|80||a")
	if n := testing.AllocsPerRun(100, func() { s.id(name) }); n != 0 {
		t.Errorf("lookup of an interned name allocates %v", n)
	}
}

func TestHistogram(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	l := h.latency()
	if l.Count != 1000 {
		t.Fatalf("count %d", l.Count)
	}
	for _, c := range []struct {
		got, want float64
	}{{l.P50MS, 500}, {l.P90MS, 900}, {l.P99MS, 990}, {l.MaxMS, 1000}, {l.MinMS, 1}, {l.MeanMS, 500.5}} {
		if c.got < c.want*0.96 || c.got > c.want*1.04 {
			t.Errorf("got %v, want %v ±4%%", c.got, c.want)
		}
	}
	for i := range histBuckets - 1 {
		if histValue(i) >= histValue(i+1) {
			t.Fatalf("bucket values not increasing at %d", i)
		}
	}
	for _, us := range []uint64{0, 1, 15, 16, 17, 31, 32, 1000, 1 << 40} {
		v := histValue(histIndex(us))
		if float64(us) < v*0.96 || float64(us) > v*1.04 {
			t.Errorf("%dµs lands in a bucket of %vµs", us, v)
		}
	}
}

func TestLatencyOf(t *testing.T) {
	l := latencyOf([]time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond})
	if l.Count != 4 || l.MinMS != 1 || l.P50MS != 2 || l.P90MS != 4 || l.MaxMS != 4 || l.MeanMS != 2.5 {
		t.Errorf("%+v", l)
	}
	if l := latencyOf(nil); l.Count != 0 || l.CDFMS != nil {
		t.Error("empty")
	}
}

func TestIdentity(t *testing.T) {
	cfg, err := Config{XDS: "x:1", Proxies: 300, Namespaces: 3, Apps: 4}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.node(257)
	if want := "sidecar~10.10.1.2~pod-257.load-2~load-2.svc.cluster.local"; n.GetId() != want {
		t.Errorf("node id %q, want %q", n.GetId(), want)
	}
	md := n.GetMetadata().GetFields()
	for k, want := range map[string]string{
		"NAMESPACE": "load-2", "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": "10.10.1.2",
		"WORKLOAD_NAME": "load-1", "NAME": "pod-257",
	} {
		if got := md[k].GetStringValue(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := md["LABELS"].GetStructValue().GetFields()["app"].GetStringValue(); got != "load-1" {
		t.Errorf("app label %q", got)
	}
	if _, ok := md["GENERATOR"]; ok {
		t.Error("sidecar has GENERATOR")
	}

	cfg.Type, cfg.Labels = Router, map[string]string{"istio.io/benchmark": "true"}
	n = cfg.node(0)
	if !strings.HasPrefix(n.GetId(), "router~10.10.0.1~pod-0.load-0~") {
		t.Errorf("router id %q", n.GetId())
	}
	labels := n.GetMetadata().GetFields()["LABELS"].GetStructValue().GetFields()
	if labels["istio"].GetStringValue() != "ingressgateway" || labels["istio.io/benchmark"].GetStringValue() != "true" {
		t.Errorf("router labels %v", labels)
	}

	cfg.Type = GRPC
	n = cfg.node(0)
	if n.GetMetadata().GetFields()["GENERATOR"].GetStringValue() != "grpc" || !strings.HasPrefix(n.GetId(), "sidecar~") {
		t.Errorf("grpc node %v", n)
	}
	if got := addIP(netip.MustParseAddr("10.10.255.255"), 1); got.String() != "10.11.0.0" {
		t.Errorf("carry: %v", got)
	}
	if got := addIP(netip.MustParseAddr("fd00::"), 65537); got.String() != "fd00::1:1" {
		t.Errorf("ipv6: %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{XDS: "127.0.0.1:15010", Proxies: 1}
	cases := map[string]func(c *Config){
		"no address":      func(c *Config) { c.XDS = "" },
		"no proxies":      func(c *Config) { c.Proxies = 0 },
		"type":            func(c *Config) { c.Type = "mesh" },
		"grpc no targets": func(c *Config) { c.Type = GRPC },
		"mode":            func(c *Config) { c.Mode = "incremental" },
		"decode":          func(c *Config) { c.Decode = "partial" },
		"nack rate":       func(c *Config) { c.NackRate = 1.5 },
		"both changes":    func(c *Config) { c.ChangeCmd = "true"; c.ChangeFunc = func(context.Context) error { return nil } },
		"changes no cmd":  func(c *Config) { c.Changes = 2 },
		"expect":          func(c *Config) { c.ExpectResource = "clusters/x" },
		"expect no name":  func(c *Config) { c.ExpectResource = "cds/" },
		"negative ramp":   func(c *Config) { c.Ramp = -1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := ok
			mutate(&c)
			if _, err := c.withDefaults(); !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
	c, err := Config{XDS: "a:1", Proxies: 1, ChangeCmd: "true"}.withDefaults()
	if err != nil || c.Changes != 1 || c.StreamsPerConn != 1 || c.Type != Sidecar || c.Mode != SotW || c.Decode != Lazy {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

func TestParseExpect(t *testing.T) {
	e, err := parseExpect("!cds/outbound|80||svc-{i}.default.svc.cluster.local", 3)
	if err != nil || !e.negate || e.t != typeCDS || e.name != "outbound|80||svc-3.default.svc.cluster.local" {
		t.Fatalf("%+v %v", e, err)
	}
	if e.String() != "!cds/outbound|80||svc-3.default.svc.cluster.local" {
		t.Errorf("String %q", e.String())
	}
	e, err = parseExpect("rds/80/with/slashes", 1)
	if err != nil || e.t != typeRDS || e.name != "80/with/slashes" {
		t.Errorf("%+v %v", e, err)
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{0.5: "500µs", 12.34: "12.3ms", 250: "250ms", 4560: "4.56s", 123000: "2m03s"} {
		if got := fmtMS(v); got != want {
			t.Errorf("fmtMS(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[int64]string{12: "12 B", 2048: "2.0 KiB", 3 << 30: "3.0 GiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
