package engine

import (
	"context"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// A WasmPlugin's image pull secret (the Secret's docker config) goes only
// to a stream whose caller was authenticated (istiod's VerifiedIdentity:
// the TLS port's client certificate or token), in a variant of the ECDS
// resource made for such streams (rules.WithPullSecrets); every other
// stream, and every plugin without a pull secret, keeps the shared bytes.

type verifiedKey struct{}

// WithVerifiedIdentity marks ctx, the stream's context passed to Connect,
// as that of an authenticated caller: its proxy may receive its
// WasmPlugins' image pull secrets.
func WithVerifiedIdentity(ctx context.Context) context.Context {
	return context.WithValue(ctx, verifiedKey{}, true)
}

func verifiedFrom(ctx context.Context) bool {
	v, _ := ctx.Value(verifiedKey{}).(bool)
	return v
}

// withPullSecrets swaps in the pull-secret variants of res for a verified
// connection; res is the connection's own slice (never a memo's).
func (c *Conn) withPullSecrets(sc *rules.Scope, res []Resource) error {
	if !c.verified || len(res) == 0 {
		return nil
	}
	return rules.WithPullSecrets(sc, c.e.cache, res)
}

// pushPullSecrets pushes ECDS to the verified connections when a changed
// Secret is some WasmPlugin's pull secret (of the plugin's namespace); the
// stream sends only what changed.
func (e *Engine) pushPullSecrets(snap *index.Snapshot, keys map[index.ConfigKey]struct{}) {
	named := false
	rules.WasmPullSecretRefs(snap, func(ns index.Sym, name string) {
		if named {
			return
		}
		if sym, ok := snap.Symbols.Lookup(name); ok {
			_, named = keys[index.ConfigKey{Namespace: ns, Name: sym}]
		}
	})
	if !named {
		return
	}
	e.mu.Lock()
	targets := make([]*Conn, 0, len(e.conns))
	for c := range e.conns {
		if c.verified {
			targets = append(targets, c)
		}
	}
	e.mu.Unlock()
	push := Push{Types: []string{TypeExtensionConfig}, Reason: "secret"}
	for _, c := range targets {
		if c.enqueue(push) {
			e.queue.add(c)
		}
	}
	e.metrics.PushQueued(push.Reason, len(targets))
}
