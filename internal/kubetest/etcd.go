package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// CompactEtcd compacts etcd's history up to its current revision and
// returns that revision. With RestartAPIServer after it (the restart
// empties the apiserver's watch cache, which outlives compaction), a watch
// from a resourceVersion older than the revision ends in 410 Gone ("too
// old resource version") and its client must relist. It uses etcd's JSON
// gateway, so the harness needs no etcd client module.
func (c *Cluster) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// A range over one absent key answers with the store's revision.
	c.etcdCall(t, "/v3/kv/range", map[string]any{"key": "a3ViZXRlc3Q="}, &rng)
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("kubetest: etcd revision %q: %v", rng.Header.Revision, err)
	}
	c.etcdCall(t, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
	return rev
}

func (c *Cluster) etcdCall(t testing.TB, path string, req, resp any) {
	t.Helper()
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.EtcdURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("kubetest: etcd %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("kubetest: etcd %s: %s %s", path, res.Status, b)
	}
	if resp != nil {
		if err := json.Unmarshal(b, resp); err != nil {
			t.Fatalf("kubetest: etcd %s: %v (%s)", path, err, fmt.Sprintf("%.200s", b))
		}
	}
}
