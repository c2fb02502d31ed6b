package loadgen

import (
	"github.com/puzpuzpuz/xsync/v4"
	"hash/maphash"
	"sync"
)

// symtab interns resource names to small integer IDs shared by every
// simulated proxy of a run, so that a proxy's state holds 4-byte IDs instead
// of strings: 2,000 proxies holding the same 1,000 cluster names share one
// copy of each name.
//
// It is sharded by a hash of the name so that proxies decoding responses on
// both cores rarely touch the same lock. An ID is (shard << shardShift) |
// local, local starting at 1, so 0 is never a valid ID and IDs stay below
// 1<<30: the top bit of a ref is free for its kind (see refCluster).
type symtab struct {
	seed    maphash.Seed
	shards  [numShards]symShard
	encoded *xsync.Map[namesKey, *encodedNames] // encodeNames' shared lists
}

const (
	shardBits  = 6
	numShards  = 1 << shardBits
	shardShift = 24
	localMask  = 1<<shardShift - 1
)

type symShard struct {
	mu    sync.RWMutex
	ids   map[string]uint32 // guarded by mu
	names []string          // guarded by mu; names[local], names[0] unused
	_     [40]byte          // keep neighbouring shards' locks off one cache line
}

func newSymtab() *symtab {
	s := &symtab{seed: maphash.MakeSeed(), encoded: newEncodedNames()}
	for i := range s.shards {
		s.shards[i].ids = make(map[string]uint32)
		s.shards[i].names = []string{""}
	}
	return s
}

// id returns the ID of name, interning it on first sight. It does not
// allocate for a name already interned.
func (s *symtab) id(name []byte) uint32 {
	sh := uint32(maphash.Bytes(s.seed, name) & (numShards - 1))
	shard := &s.shards[sh]
	shard.mu.RLock()
	id, ok := shard.ids[string(name)]
	shard.mu.RUnlock()
	if ok {
		return id
	}
	shard.mu.Lock()
	defer shard.mu.Unlock()
	if id, ok := shard.ids[string(name)]; ok {
		return id
	}
	local := uint32(len(shard.names))
	if local > localMask {
		panic("loadgen: symbol table shard full (more than 16M distinct resource names)")
	}
	str := string(name)
	shard.names = append(shard.names, str)
	id = sh<<shardShift | local
	shard.ids[str] = id
	return id
}

// idString is id for a string.
func (s *symtab) idString(name string) uint32 {
	return s.id([]byte(name))
}

// name returns the name of id; "" for 0.
func (s *symtab) name(id uint32) string {
	id &^= refCluster
	if id == 0 {
		return ""
	}
	shard := &s.shards[id>>shardShift]
	shard.mu.RLock()
	n := shard.names[id&localMask]
	shard.mu.RUnlock()
	return n
}

// names appends the names of ids to dst.
func (s *symtab) names(dst []string, ids []uint32) []string {
	for _, id := range ids {
		dst = append(dst, s.name(id))
	}
	return dst
}

// size returns the number of interned names.
func (s *symtab) size() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.RLock()
		n += len(s.shards[i].names) - 1
		s.shards[i].mu.RUnlock()
	}
	return n
}
