package ingest

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// JWKSSource is a key set RequestAuthentication rules need the control
// plane to fetch: a jwksUri, or an issuer's OpenID discovery (URI empty).
type JWKSSource struct {
	Issuer, URI string
	// Timeout is the rule's timeout (0: unset, the fetcher's default).
	Timeout time.Duration
}

// JWKSKeySet is a key set fetched for a source.
type JWKSKeySet struct {
	Issuer, URI, JWKS string
}

// JWKSInputOptions configure a JWKSInput.
type JWKSInputOptions struct {
	// FetchURIs makes the control plane fetch rules' jwksUri
	// (PILOT_JWT_ENABLE_REMOTE_JWKS istiod, the default, or hybrid); without
	// it (envoy) only rules with an issuer and neither jwksUri nor jwks are
	// fetched, through OpenID discovery, as istiod does.
	FetchURIs bool
	// Want receives the sources the index's RequestAuthentications need,
	// each time they change. It is called from the index writer's
	// subscriber: it must not block nor apply to the index.
	Want func([]JWKSSource)
}

// JWKSInput connects the fetcher of key sets (package jwks, wired by cmd)
// to the index: it tells the fetcher which sources the
// RequestAuthentications in the index name, and writes the key sets
// fetched as ConfigJWKS rows, so that a new or changed key set reaches the
// generators, and pushes, like any other config change.
type JWKSInput struct {
	w    *index.Writer
	opts JWKSInputOptions

	// Lock order: applyMu, then the writer's lock, then mu (want runs in
	// the writer's subscriber, under its lock).
	applyMu sync.Mutex   // serializes Apply
	mu      sync.Mutex   // guards last
	last    []JWKSSource // the sources last wanted; guarded by mu
}

// NewJWKSInput subscribes to w's changes of RequestAuthentications and
// hands the sources of the current snapshot to Want at once.
func NewJWKSInput(w *index.Writer, opts JWKSInputOptions) *JWKSInput {
	in := &JWKSInput{w: w, opts: opts}
	w.Subscribe(func(snap *index.Snapshot, cs *index.ChangeSet) {
		if len(cs.Configs[index.ConfigRequestAuthentication]) > 0 {
			in.want(snap)
		}
	})
	in.want(w.Snapshot())
	return in
}

// want hands Want the sources of snap's RequestAuthentications when they
// differ from the last ones.
func (in *JWKSInput) want(snap *index.Snapshot) {
	srcs := JWKSSources(snap, in.opts.FetchURIs)
	in.mu.Lock()
	same := slices.Equal(srcs, in.last)
	in.last = srcs
	in.mu.Unlock()
	if !same && in.opts.Want != nil {
		in.opts.Want(srcs)
	}
}

// JWKSSources lists the sources the RequestAuthentications of snap need
// fetched, sorted and without repeats: every JWT rule without inline jwks
// that names a jwksUri (with fetchURIs) or an issuer only.
func JWKSSources(snap *index.Snapshot, fetchURIs bool) []JWKSSource {
	var out []JWKSSource
	snap.Configs(index.ConfigRequestAuthentication, func(c *index.Config) bool {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			return true
		}
		for _, r := range ra.GetJwtRules() {
			if r.GetJwks() != "" || r.GetJwksUri() == "" && r.GetIssuer() == "" || r.GetJwksUri() != "" && !fetchURIs {
				continue
			}
			out = append(out, JWKSSource{Issuer: r.GetIssuer(), URI: r.GetJwksUri(), Timeout: r.GetTimeout().AsDuration()})
		}
		return true
	})
	slices.SortFunc(out, func(a, b JWKSSource) int {
		return cmp.Or(cmp.Compare(a.Issuer, b.Issuer), cmp.Compare(a.URI, b.URI), cmp.Compare(b.Timeout, a.Timeout))
	})
	// One per source, with its longest timeout (the first of its run).
	return slices.CompactFunc(out, func(a, b JWKSSource) bool { return a.Issuer == b.Issuer && a.URI == b.URI })
}

// Apply makes the index's ConfigJWKS rows the key sets given (the
// fetcher's full list): new and changed sets are put, sets not listed are
// deleted, in one batch; nothing is applied when nothing changed.
func (in *JWKSInput) Apply(sets []JWKSKeySet) {
	in.applyMu.Lock()
	defer in.applyMu.Unlock()
	syms := in.w.Symbols()
	snap := in.w.Snapshot()
	var b index.Batch
	keep := make(map[index.ConfigKey]bool, len(sets))
	for _, s := range sets {
		key := index.ConfigKey{Namespace: syms.Intern(s.Issuer), Name: syms.Intern(s.URI)}
		keep[key] = true
		d := xxhash.New()
		for _, f := range [...]string{s.Issuer, s.URI, s.JWKS} {
			_, _ = d.WriteString(f)
			_, _ = d.WriteString("\x00")
		}
		h := d.Sum64()
		if cur, ok := snap.Config(index.ConfigJWKS, key); ok && cur.Hash == h {
			continue
		}
		b.PutConfig(index.Config{Kind: index.ConfigJWKS, Key: key, Hash: h,
			Spec: index.JWKS{Issuer: s.Issuer, URI: s.URI, Keys: s.JWKS}})
	}
	snap.Configs(index.ConfigJWKS, func(c *index.Config) bool {
		if !keep[c.Key] {
			b.DeleteConfig(index.ConfigJWKS, c.Key)
		}
		return true
	})
	if b.Len() > 0 {
		in.w.Apply(&b)
	}
}
