package ingest

import (
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// TestKubeSourceWatchExpiryRelist: while the Services watch is broken,
// a Service is deleted and another created; the watch then ends with 410
// Gone (the API server compacted past its resourceVersion), client-go
// relists, and the index ends up exactly right: the deleted Service and
// its endpoints gone (a deletion seen only on relist), the new one present
// once, nothing duplicated.
func TestKubeSourceWatchExpiryRelist(t *testing.T) {
	var mu sync.Mutex
	var watchers []*watch.FakeWatcher
	cs := newKubeFixtureClient()
	cs.PrependWatchReactor("services", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(8, false)
		mu.Lock()
		watchers = append(watchers, w)
		mu.Unlock()
		return true, w, nil
	})
	f := newKubeFixtureWith(t, cs, false, kubeService, testKubeSlice)
	const oldHost, newHost = "reviews.shop.svc.cluster.local", "ratings.shop.svc.cluster.local"
	if _, _, ok := f.w.Snapshot().LookupService(oldHost, "shop"); !ok {
		t.Fatal("reviews not indexed after the initial sync")
	}
	// Behind the watch's back (the tracker, not the API, so no event).
	gvr := corev1.SchemeGroupVersion.WithResource("services")
	if err := cs.Tracker().Delete(gvr, "shop", "reviews"); err != nil {
		t.Fatal(err)
	}
	ratings := kubeService.DeepCopy()
	ratings.Name, ratings.Spec.ClusterIP = "ratings", "10.96.0.11"
	if err := cs.Tracker().Add(ratings); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	first := watchers[len(watchers)-1]
	mu.Unlock()
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version"})

	f.eventually("relist applied", func() bool {
		snap := f.w.Snapshot()
		_, _, oldOK := snap.LookupService(oldHost, "shop")
		_, _, newOK := snap.LookupService(newHost, "shop")
		return !oldOK && newOK
	})
	mu.Lock()
	n := len(watchers)
	mu.Unlock()
	if n < 2 {
		t.Fatalf("the source did not watch again after the 410 (%d watches)", n)
	}
	snap := f.w.Snapshot()
	sym, _ := snap.Symbols.Lookup(newHost)
	if got := len(snap.ServicesByHost(sym)); got != 1 {
		t.Fatalf("ratings indexed %d times after the relist", got)
	}
}
