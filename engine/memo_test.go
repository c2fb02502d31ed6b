package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

func memoNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("outbound|80||svc-%d.default.svc.cluster.local", i)
	}
	return out
}

// TestMemoTwoSubscriptions: proxies of one class in two subscription states
// (before and after ACKing a new cluster) both hit the memo, alternately.
func TestMemoTwoSubscriptions(t *testing.T) {
	cl := &class{}
	old, cur := memoNames(1000), memoNames(1001)
	resOld, resCur := []Resource{{Name: "old"}}, []Resource{{Name: "cur"}}
	cl.memoPut(memoVersion{snap: 7}, TypeEndpoint, old, false, resOld)
	cl.memoPut(memoVersion{snap: 7}, TypeEndpoint, cur, false, resCur)
	for range 3 {
		if r, ok := cl.memoGet(memoVersion{snap: 7}, TypeEndpoint, old, false); !ok || r[0].Name != "old" {
			t.Fatalf("old list: %v %v", r, ok)
		}
		if r, ok := cl.memoGet(memoVersion{snap: 7}, TypeEndpoint, cur, false); !ok || r[0].Name != "cur" {
			t.Fatalf("current list: %v %v", r, ok)
		}
	}
	if _, ok := cl.memoGet(memoVersion{snap: 7}, TypeEndpoint, memoNames(999), false); ok {
		t.Error("a list never generated hit the memo")
	}
	if _, ok := cl.memoGet(memoVersion{snap: 7}, TypeEndpoint, cur, true); ok {
		t.Error("a wildcard request hit a named entry")
	}
	if _, ok := cl.memoGet(memoVersion{snap: 8}, TypeEndpoint, cur, false); ok {
		t.Error("a newer snapshot hit an older entry")
	}
	// A newer snapshot drops the older entries; at most memoWays are kept.
	for i := range memoWays + 2 {
		cl.memoPut(memoVersion{snap: 8}, TypeEndpoint, memoNames(i+1), false, resCur)
	}
	if n := len(cl.memos[TypeEndpoint]); n != memoWays {
		t.Errorf("%d entries kept, want %d", n, memoWays)
	}
	if _, ok := cl.memoGet(memoVersion{snap: 8}, TypeEndpoint, memoNames(1), false); ok {
		t.Error("the oldest entry was not evicted")
	}
	if _, ok := cl.memoGet(memoVersion{snap: 8}, TypeEndpoint, memoNames(memoWays+2), false); !ok {
		t.Error("the newest entry missed")
	}
	// Replacing an entry with the same request keeps one copy.
	cl.memoPut(memoVersion{snap: 8}, TypeEndpoint, memoNames(memoWays+2), false, resOld)
	if r, _ := cl.memoGet(memoVersion{snap: 8}, TypeEndpoint, memoNames(memoWays+2), false); r[0].Name != "old" {
		t.Error("a re-put entry did not replace the old one")
	}
	if n := len(cl.memos[TypeEndpoint]); n != memoWays {
		t.Errorf("%d entries after a re-put, want %d", n, memoWays)
	}
}

// TestResponseStats: the first proxy of a class builds its responses, the
// second of the same class copies them from the memo, and ResponseStats
// counts both, with their resources.
func TestResponseStats(t *testing.T) {
	m := newTestMesh(t)
	m.setEndpoints(m.svcA, 2)
	e := New(m.w, Options{Cache: encode.NewCache()})
	for i, pod := range []string{"p1", "p2"} {
		c, err := e.Connect(context.Background(), sidecarNode(t, fmt.Sprintf("10.1.0.%d", i+1), pod, "a"), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Generate(TypeCluster, nil, true, nil); err != nil {
			t.Fatal(err)
		}
	}
	var cds ResponseStats
	for _, s := range e.ResponseStats() {
		if s.Type == TypeCluster {
			cds = s
		} else if s.MemoHits+s.Builds != 0 {
			t.Errorf("%s counted without a request: %+v", s.Type, s)
		}
	}
	if cds.Builds != 1 || cds.MemoHits != 1 {
		t.Fatalf("CDS: %d builds, %d memo hits; want 1 and 1", cds.Builds, cds.MemoHits)
	}
	if cds.BuiltResources == 0 || cds.MemoResources != cds.BuiltResources {
		t.Errorf("CDS resources: built %d, from the memo %d; want equal and non-zero", cds.BuiltResources, cds.MemoResources)
	}
}
