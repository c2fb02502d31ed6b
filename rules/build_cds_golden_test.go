package rules

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// The golden files of CDS and EDS live with the generators, in
// encode/testdata/golden/{cds,eds}; regenerate them with
//
//	go test ./engine -run Golden -update
//
// and review the diff like code.
const (
	cdsGoldenDir = "../encode/testdata/golden/cds"
	edsGoldenDir = "../encode/testdata/golden/eds"
)

// -update may be defined by another golden test of this package; define it
// only if nobody has.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// goldenResources renders resources as deterministic, indented JSON: one
// object per resource, in generation order, fields as protojson names them
// (keys sorted by encoding/json).
func goldenResources(t testing.TB, msgs []proto.Message) []byte {
	t.Helper()
	list := make([]any, 0, len(msgs))
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		list = append(list, v)
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		ctx := func(l []string) string { return strings.Join(l[max(0, i-3):min(len(l), i+3)], "\n") }
		t.Fatalf("%s differs at line %d (run with -update and review the diff)\n--- want\n%s\n--- got\n%s", path, i+1, ctx(wl), ctx(gl))
	}
}

type goldenScenario struct {
	name  string
	scope func(*index.Snapshot) *Scope
	// eds: request the scope's EDS clusters (wildcard).
	eds bool
	// names, for proxyless gRPC: the requested clusters.
	names []string
}

func runGolden(t *testing.T, snap *index.Snapshot, prefix string, scenarios []goldenScenario) {
	mesh := encode.DefaultMesh()
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			sc := s.scope(snap)
			rs, err := buildClusters(sc, mesh, verifyingCache(), s.names, s.names == nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []proto.Message
			for _, c := range decodeResources(t, rs, newCluster) {
				msgs = append(msgs, c)
			}
			checkGolden(t, filepath.Join(cdsGoldenDir, prefix+"."+s.name+".json"), goldenResources(t, msgs))
			if !s.eds {
				return
			}
			names := s.names
			if names == nil {
				names = clusterNamesForEDS(sc, mesh, nil)
			}
			ers, err := buildEndpoints(sc, mesh, verifyingCache(), names, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			msgs = msgs[:0]
			for _, c := range decodeResources(t, ers, newCLA) {
				msgs = append(msgs, c)
			}
			checkGolden(t, filepath.Join(edsGoldenDir, prefix+"."+s.name+".json"), goldenResources(t, msgs))
		})
	}
}

// TestGoldenHTTPWorkload: CDS and EDS for the istio-bench http workload at
// Services=10, built from index rows. TestClustersMatchIstiod compares the
// same output with istiod's, field by field: for this workload nothing
// differs (names, types, defaults, metadata, transport sockets, endpoint
// metadata), apart from the order of clusters, which is by hostname here
// and by creation time in istiod, and which Envoy ignores.
func TestGoldenHTTPWorkload(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	runGolden(t, snap, "http.s10", []goldenScenario{
		{name: "sidecar", eds: true, scope: func(s *index.Snapshot) *Scope { return sidecarScope(s, "default", "10.0.0.1") }},
		{name: "sidecar-1.1.1.1", scope: func(s *index.Snapshot) *Scope { return sidecarScope(s, "default", "1.1.1.1") }},
		{name: "router", eds: true, scope: func(s *index.Snapshot) *Scope {
			return classScope(s, &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: "istio-system", ClusterID: "Kubernetes"})
		}},
		{name: "grpc", eds: true, names: []string{"outbound|80||random-0.host.example"}, scope: func(s *index.Snapshot) *Scope {
			return classScope(s, &encode.ProxyClass{Type: encode.ProxyGRPC, Namespace: "default", ClusterID: "Kubernetes"})
		}},
	})
}

// TestGoldenExamples: CDS and EDS for proxies of the example mesh in
// examples/ (bookinfo, shop, the ingress gateway), loaded through ingest as
// `make run` serves it. It covers DestinationRule subsets, ISTIO_MUTUAL,
// connection pools, outlier detection with locality failover, and DNS
// ServiceEntries.
func TestGoldenExamples(t *testing.T) {
	snap := loadExamples(t)
	sidecar := func(ns, ip, locality string) func(*index.Snapshot) *Scope {
		return func(s *index.Snapshot) *Scope {
			sc := sidecarScope(s, ns, ip)
			sc.Class.Locality = locality
			return sc
		}
	}
	runGolden(t, snap, "examples", []goldenScenario{
		{name: "productpage", eds: true, scope: sidecar("bookinfo", "10.244.1.10", "us-west1/us-west1-a")},
		{name: "frontend", eds: true, scope: sidecar("shop", "10.244.1.20", "us-west1/us-west1-a")},
		{name: "ingressgateway", eds: true, scope: func(s *index.Snapshot) *Scope {
			return classScope(s, &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: "istio-system", ClusterID: "Kubernetes", Locality: "us-west1/us-west1-a"})
		}},
	})
}

// loadExamples reads examples/ through ingest's decoder and converter.
func loadExamples(t testing.TB) *index.Snapshot {
	t.Helper()
	w := index.NewWriter()
	conv := ingest.NewConverter(w, "cluster.local")
	var b index.Batch
	err := filepath.WalkDir("../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, errs := ingest.Decode(path, data)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", path, errs)
		}
		for i := range objs {
			conv.Put(&b, &objs[i])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Apply(&b)
	return w.Snapshot()
}
