package engine

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// A Secret row feeds nothing but SDS (buildSecrets), so its change is not
// a full push: it pushes SDS only to the connections whose subscription
// reads that Secret, instead of every type to every proxy of the mesh.

// secretRef names a Secret by namespace and name.
type secretRef struct{ ns, name string }

// withoutSecrets returns cs without its Secret rows, adding their keys to
// *secrets; cs itself when it holds none (the ChangeSet is shared, so it is
// copied, not modified).
func withoutSecrets(cs *index.ChangeSet, secrets *map[index.ConfigKey]struct{}) (rest *index.ChangeSet, had bool) {
	keys := cs.Configs[index.ConfigSecret]
	if len(keys) == 0 {
		return cs, false
	}
	if *secrets == nil {
		*secrets = make(map[index.ConfigKey]struct{}, len(keys))
	}
	for _, k := range keys {
		(*secrets)[k] = struct{}{}
	}
	c := *cs
	c.Configs[index.ConfigSecret] = nil
	return &c, true
}

// noteSDSNames records which Secrets an SDS request reads: Secret NAME for
// kubernetes://NAME (or NS/NAME), and for NAME-cacert both Secret
// NAME-cacert and NAME (buildSecrets falls back to NAME's CA). Names are
// added, never dropped: a Delta request may name only what it adds, and a
// Secret the proxy no longer reads costs at most a push that sends
// nothing (serve sends only what changed). The names come from the client,
// so the set is bounded: past maxSDSRefs the connection is taken to read
// every Secret (a push to it may then send nothing), and the set is
// dropped.
func (c *Conn) noteSDSNames(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if c.sdsAll {
			return
		}
		ref, err := encode.ParseCredentialName(n, c.node.Namespace)
		if err != nil {
			continue // never served to this proxy, so never pushed
		}
		if c.sdsRefs == nil {
			c.sdsRefs = make(map[secretRef]struct{}, 2)
		}
		c.sdsRefs[secretRef{ref.Namespace, ref.Name}] = struct{}{}
		if ref.CA {
			c.sdsRefs[secretRef{ref.Namespace, ref.Name + encode.CredentialCASuffix}] = struct{}{}
		}
		if len(c.sdsRefs) > maxSDSRefs {
			c.sdsRefs, c.sdsAll = nil, true
		}
	}
}

// maxSDSRefs bounds the Secrets one connection is tracked as reading (a
// gateway reads one or two per TLS server).
const maxSDSRefs = 4096

// readsAnySecret reports whether the connection's SDS requests read one of
// refs.
func (c *Conn) readsAnySecret(refs []secretRef) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sdsAll {
		return true
	}
	for _, r := range refs {
		if _, ok := c.sdsRefs[r]; ok {
			return true
		}
	}
	return false
}

// pushSecrets pushes SDS to every connection reading one of the changed
// Secrets, and to no other. Symbols are never removed, so a deleted
// Secret's key still resolves to its names.
func (e *Engine) pushSecrets(snap *index.Snapshot, keys map[index.ConfigKey]struct{}) {
	refs := make([]secretRef, 0, len(keys))
	for k := range keys {
		refs = append(refs, secretRef{snap.String(k.Namespace), snap.String(k.Name)})
	}
	e.mu.Lock()
	targets := make([]*Conn, 0, len(e.conns))
	for c := range e.conns {
		targets = append(targets, c)
	}
	e.mu.Unlock()
	push := Push{Types: []string{TypeSecret}, Reason: "secret"}
	n := 0
	for _, c := range targets {
		if !c.readsAnySecret(refs) {
			continue
		}
		n++
		if c.enqueue(push) {
			e.queue.add(c)
		}
	}
	e.metrics.PushQueued(push.Reason, n)
}
