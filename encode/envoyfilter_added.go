package encode

import (
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// AddedKey names one resource an EnvoyFilter ADD patch creates (a CLUSTER
// or LISTENER ADD): the Index-th of the set's added resources of that kind
// in Context. Every class with the same set shares it.
type AddedKey struct {
	Patches *envoypatch.Set
	Context envoypatch.Context
	Index   int
}

// Hash feeds every field.
func (k *AddedKey) Hash() uint64 {
	h := NewHasher("AddedKey")
	hashPatches(&h, k.Patches)
	h.U32(uint32(k.Context))
	h.Int(k.Index)
	return h.Sum()
}

func (k *AddedKey) key() {}

// Added resource generators: the resource is the patch's value as
// envoypatch builds it (a fresh message, so no patch applies to it again).
var (
	AddedClusterGen  = resourceGen(KindCluster, ClusterType, addedCluster)
	AddedListenerGen = resourceGen(KindListener, ListenerType, addedListener)
)

func addedCluster(_ index.Names, k *AddedKey) (string, proto.Message) {
	all := k.Patches.AddedClusters(k.Context)
	if k.Index >= len(all) || all[k.Index] == nil {
		return "", nil
	}
	return all[k.Index].GetName(), all[k.Index]
}

func addedListener(_ index.Names, k *AddedKey) (string, proto.Message) {
	all := k.Patches.AddedListeners(k.Context)
	if k.Index >= len(all) || all[k.Index] == nil {
		return "", nil
	}
	return all[k.Index].GetName(), all[k.Index]
}

// AddedCount is how many resources of applyTo (CLUSTER or LISTENER) the
// set's ADD patches create in ctx (the length of AddedClusters or
// AddedListeners, counted without building them): the keys a builder asks
// for.
func AddedCount(s *envoypatch.Set, ctx envoypatch.Context, applyTo networking.EnvoyFilter_ApplyTo) int {
	if s == nil {
		return 0
	}
	n := 0
	for _, p := range s.Patches {
		if p.ApplyTo == applyTo && p.Operation == networking.EnvoyFilter_Patch_ADD && addsIn(p, ctx) {
			n++
		}
	}
	return n
}

// addsIn is istiod's context rule for an ADD of a whole cluster or
// listener (envoypatch's AddedClusters and AddedListeners follow it): the
// patch's own context, or ANY for sidecars' outbound and gateways'.
func addsIn(p *envoypatch.Patch, ctx envoypatch.Context) bool {
	switch p.Match.GetContext() {
	case networking.EnvoyFilter_ANY:
		return ctx == envoypatch.Outbound || ctx == envoypatch.Gateway
	case networking.EnvoyFilter_SIDECAR_OUTBOUND:
		return ctx == envoypatch.Outbound
	case networking.EnvoyFilter_SIDECAR_INBOUND:
		return ctx == envoypatch.Inbound
	case networking.EnvoyFilter_GATEWAY:
		return ctx == envoypatch.Gateway
	}
	return false
}
