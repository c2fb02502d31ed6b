package ingest

import (
	"sync"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Precedence decides which source's definition of an object the index
// holds when a config directory and an API server, feeding one writer,
// both define it (same kind, namespace and name): the API server's. It is
// the cluster's record; the directory adds to it. The rule depends only on
// what each source defines, never on which applied first, so a running
// server, a restarted one and every replica serve the same version.
//
// While the API server defines an object (its informer holds it, valid or
// not, or the index still holds its version), the directory's definition
// is not applied and is reported by FileSource.Errors. When the API server
// stops defining it, the directory's version is applied in the same batch
// that removes the API server's; when the directory stops defining it or
// changes it, the API server's rows are untouched. istiod's aggregate
// config store does the same with its ordered stores (the first store
// that has an object wins), here with a fixed order.
//
// How it stays consistent: at most one source's Converter holds an
// object's rows, and every change of hands happens in one batch under the
// file source's syncMu. The KubeSource applies objects the directory does
// not define holding mu only (the common case: nothing waits for the
// directory), and a batch with any object the directory defines holding
// the FileSource's syncMu, through which it removes or re-reads the
// directory's version. The FileSource claims an object (adds it to
// defined) before it applies it and gives it up only after the batch
// that removed it is applied, so the KubeSource can never apply an object
// between the directory's decision about it and that decision's batch.
//
// Lock order: FileSource.syncMu, then mu, then KubeSource.mu; the index
// writer's lock is innermost. The KubeSource never waits for syncMu while
// holding mu.
//
// Cost: one map entry per object the directory defines; a KubeSource
// batch takes one lock and, for each object of a kind the
// directory defines, one map lookup.
type Precedence struct {
	file *FileSource // set by NewFileSource, before either source runs
	kube *KubeSource // set by NewKubeSource, before either source runs

	mu sync.Mutex
	// defined: the objects the directory defines, and those whose removal
	// is in a batch not yet applied. Written holding file.syncMu and mu;
	// read holding either.
	defined map[ObjectKey]struct{}
	// kinds counts defined by kind: a batch of kinds the directory does
	// not define (EndpointSlices, usually) looks nothing up.
	kinds [numKinds]int
}

// NewPrecedence returns the arbiter of a FileSource and a KubeSource that
// write to one index: pass it to both (FileSourceOptions.Precedence,
// KubeSourceOptions.Precedence).
func NewPrecedence() *Precedence {
	return &Precedence{defined: map[ObjectKey]struct{}{}}
}

// claimLocked records that the directory defines k. The caller holds
// file.syncMu.
func (p *Precedence) claimLocked(k ObjectKey) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if _, ok := p.defined[k]; !ok {
		p.defined[k] = struct{}{}
		p.kinds[k.Kind]++
	}
	p.mu.Unlock()
}

// releaseLocked forgets the objects of keys that the directory no longer
// defines, once the batch that removed them is applied. The caller holds
// file.syncMu.
func (p *Precedence) releaseLocked(keys []ObjectKey, stillDefined func(ObjectKey) bool) {
	if p == nil || len(keys) == 0 {
		return
	}
	p.mu.Lock()
	for _, k := range keys {
		if _, ok := p.defined[k]; ok && !stillDefined(k) {
			delete(p.defined, k)
			p.kinds[k.Kind]--
		}
	}
	p.mu.Unlock()
}

// kubeDefinesLocked reports whether the API server defines k, so the
// directory's definition must not be applied. The caller holds
// file.syncMu: the KubeSource's converter then changes only in the
// KubeSource's own goroutine (the caller itself) or holding mu.
func (p *Precedence) kubeDefinesLocked(k ObjectKey) bool {
	if p == nil || p.kube == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kube.defines(k)
}

// lockForKube takes what a KubeSource flush of pending needs and says
// which: mu alone when the directory defines none of the objects (and no
// Node changed while the directory defines anything: a Node re-puts Pods
// and EndpointSlices that are not pending); otherwise file.syncMu, and
// the flush settles the objects both define (applyShared). unlockKube
// undoes it.
func (p *Precedence) lockForKube(pending map[ObjectKey]any, nodes bool) (shared bool) {
	if p == nil || p.file == nil {
		return false
	}
	p.mu.Lock()
	shared = nodes && len(p.defined) > 0
	if !shared && len(p.defined) > 0 {
		for k := range pending {
			if p.kinds[k.Kind] == 0 {
				continue
			}
			if _, ok := p.defined[k]; ok {
				shared = true
				break
			}
		}
	}
	if !shared {
		return false
	}
	p.mu.Unlock()
	p.file.syncMu.Lock()
	return true
}

// unlockKube releases what lockForKube took.
func (p *Precedence) unlockKube(shared bool) {
	switch {
	case p == nil || p.file == nil:
	case shared:
		p.file.syncMu.Unlock()
	default:
		p.mu.Unlock()
	}
}

// definedLocked reports whether the directory defines k; the caller holds
// file.syncMu.
func (p *Precedence) definedLocked(k ObjectKey) bool {
	_, ok := p.defined[k]
	return ok
}

// applyShared applies the API server's latest state of k, an object the
// directory defines, holding file.syncMu: a definition (valid or not)
// replaces the directory's version; a deletion hands k back to the
// directory, whose version is re-read into the same batch. It reports
// whether the file source must sync again soon (a file it re-read was
// mid-write).
func (p *Precedence) applyShared(b *index.Batch, k ObjectKey, obj any, apply func(*index.Batch, ObjectKey, any)) (recheck bool) {
	if obj != nil {
		p.file.yieldLocked(b, k)
		apply(b, k, obj)
		return false
	}
	apply(b, k, nil)
	return p.file.takeOverLocked(b, k)
}

// kubeApplied finishes a shared flush once its batch is applied: the file
// source publishes its errors (a shadowed definition) and gives up what
// its re-reads removed. The caller holds file.syncMu.
func (p *Precedence) kubeApplied(recheck bool) {
	p.file.publishLocked()
	p.file.releaseLocked()
	if recheck {
		p.file.kick()
	}
}
