package encode

import (
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/puzpuzpuz/xsync/v4"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Kind is the type of a cached resource, or of a part a container is
// assembled from (a virtual host, a filter chain).
type Kind uint8

const (
	KindCluster Kind = iota
	KindEndpoint
	KindListener
	KindRoute
	KindSecret
	KindNameTable
	KindVirtualHost
	KindFilterChain
	// KindGatewayRoutes: the routes of a gateway virtual host, shared by
	// the virtual hosts of one VirtualService on several ports.
	KindGatewayRoutes
	// KindExtension: an ECDS extension config (a WasmPlugin's filter).
	KindExtension
	numKinds
)

var kindNames = [...]string{"cluster", "endpoint", "listener", "route", "secret", "nametable", "virtualhost", "filterchain", "gatewayroutes", "extension"}

func (k Kind) String() string { return kindNames[k] }

// Entry is one cached resource: marshaled once, shared by every proxy whose
// key matches. Entries are immutable once stored.
type Entry struct {
	Name string
	// Version is the xxhash of Bytes in hex: it names the content, so two
	// keys that produce the same bytes (an input changed that this resource
	// turned out not to use) give the same version, and SotW set digests
	// and Delta versions do not announce a change that is not one.
	Version string
	// Bytes is the resource encoded as google.protobuf.Any for whole
	// resources, or the bare message encoding for parts (see Cache.Part).
	Bytes []byte
	// Digest is ResourceDigest(Name, Version), for set digests; 0 for a
	// transient entry (see Cache.Transient), which callers must not keep.
	Digest uint64
	// lastUsed is the cache epoch of the last hit, for Sweep.
	lastUsed atomic.Uint64
	// kind is the kind of key that made the entry, for Stats.
	kind Kind
}

// cacheKey is a key's hash mixed with its kind: a uint64 map key hashes
// faster than a (kind, hash) struct, and the mix keeps keys of different
// kinds apart as well as the hash keeps keys of one kind apart.
type cacheKey uint64

func keyOf(kind Kind, h uint64) cacheKey {
	return cacheKey(h ^ (uint64(kind)+1)*0x9e3779b97f4a7c15)
}

// Cache holds pre-marshaled resources under their key hashes. Gets are
// lock-free; concurrent misses of one key may both generate (the results are
// identical by construction and one wins), which is cheaper than a lock on
// the hot path.
type Cache struct {
	m      *xsync.Map[cacheKey, *Entry]
	epoch  atomic.Uint64
	verify bool
	stats  [numKinds]kindStats
	// rec, when set, sees every key used (see Recording).
	rec Recorder
	// noStore: a transient view (see Transient); transient is c's.
	noStore   bool
	transient *Cache
	// failures logs EnvoyFilter patches that failed to apply
	// (envoyfilter.go): &failLog of the cache the views are of.
	failures *patchFailureLog
	failLog  patchFailureLog
}

// Recorder receives each key a build looks up: the kind, the name of the
// resource or part it made, and the key itself.
type Recorder func(kind Kind, name string, key Key)

// Recording returns a cache sharing c's entries that reports every key
// looked up through it to rec. It keeps its own hit and miss counts, so
// debug builds (/debug/keyz) do not show in c's statistics.
func (c *Cache) Recording(rec Recorder) *Cache {
	r := &Cache{m: c.m, verify: c.verify, rec: rec, failures: c.failures}
	r.epoch.Store(c.epoch.Load())
	r.transient = &Cache{m: r.m, verify: r.verify, rec: rec, noStore: true, failures: c.failures}
	return r
}

// Transient returns a view of c that generates every resource and stores
// none: for names no configuration defines. A client may invent any number
// of them (istiod answers each with an empty resource), so caching their
// answers would let a client grow the cache; a transient answer lives only
// as long as the response that carries it. Its entries have Digest 0,
// which tells the engine's per-class memo not to keep the response either.
// Verify mode checks direct encodings against their references as usual.
func (c *Cache) Transient() *Cache {
	if c.noStore {
		return c
	}
	return c.transient
}

// record reports k to the recorder, if any.
func record[K Key](c *Cache, kind Kind, e *Entry, k K) {
	if c.rec != nil && e != nil {
		c.rec(kind, e.Name, k)
	}
}

type kindStats struct {
	hits, misses atomic.Uint64
}

// NewCache returns an empty cache. With PILOTFISH_VERIFY_CACHE=1 in the
// environment every hit regenerates the resource and panics if it differs
// from the cached one: a key that does not capture all of its generator's
// inputs is a bug that verify mode turns into a crash in tests.
func NewCache() *Cache {
	v := VerifyFromEnv()
	c := &Cache{m: xsync.NewMap[cacheKey, *Entry](), verify: v}
	c.failures = &c.failLog
	c.transient = &Cache{m: c.m, verify: v, noStore: true, failures: c.failures}
	return c
}

// VerifyFromEnv reports whether PILOTFISH_VERIFY_CACHE asks for verify
// mode: the default of new caches, and of the engine's memo checks.
func VerifyFromEnv() bool {
	s := os.Getenv("PILOTFISH_VERIFY_CACHE")
	if s == "" {
		return false // without ParseBool's error: a new scope asks
	}
	v, _ := strconv.ParseBool(s)
	return v
}

// Verifying reports whether verify mode is on.
func (c *Cache) Verifying() bool { return c.verify }

// SetVerify turns verify mode on or off.
func (c *Cache) SetVerify(on bool) {
	c.verify = on
	if c.transient != nil {
		c.transient.verify = on
	}
}

// Key is implemented by every generator key type, and only by them: the
// unexported marker keeps key types in this package, where the reflection
// test (keys_test.go) finds each one and checks that it holds values only.
type Key interface {
	Hash() uint64
	key()
}

func (c *Cache) get(kind Kind, h uint64, build func() (string, []byte, error), decode func([]byte) proto.Message) (*Entry, error) {
	if c.noStore {
		name, b, err := build()
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", kind, name, err)
		}
		e := newEntry(name, b, kind)
		e.Digest = 0 // transient
		return e, nil
	}
	ck := keyOf(kind, h)
	epoch := c.epoch.Load()
	if e, ok := c.m.Load(ck); ok {
		c.stats[kind].hits.Add(1)
		if e.lastUsed.Load() != epoch {
			e.lastUsed.Store(epoch)
		}
		if c.verify {
			c.verifyHit(kind, e, build, decode)
		}
		return e, nil
	}
	c.stats[kind].misses.Add(1)
	name, b, err := build()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", kind, name, err)
	}
	e := newEntry(name, b, kind)
	e.lastUsed.Store(epoch)
	actual, _ := c.m.LoadOrStore(ck, e)
	return actual, nil
}

// entryAlloc is an entry with room for its version's text: one allocation
// per entry instead of two. The version string then keeps the entry (and
// its bytes) reachable: hold versions with their resources, as Resource
// does, or as hashes (serve's Delta state).
type entryAlloc struct {
	e   Entry
	ver [16]byte // a uint64 in hex
}

// newEntry returns the entry of a resource's bytes: its version is the
// xxhash of the bytes in hex.
func newEntry(name string, b []byte, kind Kind) *Entry {
	a := &entryAlloc{}
	v := strconv.AppendUint(a.ver[:0], xxhash.Sum64(b), 16)
	version := unsafe.String(unsafe.SliceData(v), len(v)) // a.ver is never written again
	a.e = Entry{Name: name, Version: version, Bytes: b, Digest: ResourceDigest(name, version), kind: kind}
	return &a.e
}

// verifyHit regenerates a cached entry and panics when the new encoding
// differs in content. Bytes may differ where the marshaler iterates a map
// (google.protobuf.Struct), so a byte mismatch is settled by proto.Equal.
func (c *Cache) verifyHit(kind Kind, e *Entry, build func() (string, []byte, error), decode func([]byte) proto.Message) {
	name, b, err := build()
	if err != nil {
		panic(fmt.Sprintf("encode: verify: regenerating %s %s failed: %v", kind, e.Name, err))
	}
	if name == e.Name && string(b) == string(e.Bytes) {
		return
	}
	if name == e.Name && proto.Equal(decode(b), decode(e.Bytes)) {
		return
	}
	panic(fmt.Sprintf("encode: verify: cached %s %q (version %s) differs from a fresh generation %q: its key misses an input", kind, e.Name, e.Version, name))
}

// NextEpoch starts a new epoch; entries not used since an older epoch can be
// swept. The engine advances it once per push cycle.
func (c *Cache) NextEpoch() uint64 { return c.epoch.Add(1) }

// Sweep drops entries last used before epoch and returns how many. Stale
// generations become unreachable when their inputs change (the key hash
// changes); Sweep reclaims them without a global lock.
func (c *Cache) Sweep(before uint64) int {
	n := 0
	c.m.Range(func(k cacheKey, e *Entry) bool {
		if e.lastUsed.Load() < before {
			c.m.Delete(k)
			n++
		}
		return true
	})
	return n
}

// Stats is a snapshot of the cache's counters for one kind.
type Stats struct {
	Kind    string
	Entries int
	Bytes   int
	Hits    uint64
	Misses  uint64
}

// Stats returns per-kind counters, for /debug/cachez and metrics.
func (c *Cache) Stats() []Stats {
	out := make([]Stats, numKinds)
	for k := range out {
		out[k] = Stats{Kind: Kind(k).String(), Hits: c.stats[k].hits.Load(), Misses: c.stats[k].misses.Load()}
	}
	c.m.Range(func(k cacheKey, e *Entry) bool {
		out[e.kind].Entries++
		out[e.kind].Bytes += len(e.Bytes)
		return true
	})
	return out
}

// Len returns the number of cached entries.
func (c *Cache) Len() int { return c.m.Size() }

// anyPrefixes holds, per type URL, the start of an encoded Any: type_url,
// then the tag of value. Read-only once stored.
var anyPrefixes sync.Map // string → []byte

func anyPrefix(typeURL string) []byte {
	if p, ok := anyPrefixes.Load(typeURL); ok {
		return p.([]byte)
	}
	p := protowire.AppendTag(nil, anyTypeURL, protowire.BytesType)
	p = protowire.AppendString(p, typeURL)
	p = protowire.AppendTag(p, anyValue, protowire.BytesType)
	p = p[:len(p):len(p)]
	anyPrefixes.Store(typeURL, p)
	return p
}

// ResourceDigest hashes a resource's name and version for set digests: a
// SotW response's version_info sums them, so it must be the same function
// on every replica (xxhash, no seed).
func ResourceDigest(name, version string) uint64 {
	h := xxhash.Sum64String(name) ^ bits.RotateLeft64(xxhash.Sum64String(version), 31)
	return h * 0xbf58476d1ce4e5b9
}
