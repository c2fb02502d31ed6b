package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// decodeResources unpacks each resource's Any into a fresh M and runs
// go-control-plane's ValidateAll on it and on every Any nested in it.
func decodeResources[M proto.Message](t testing.TB, rs []Resource, newM func() M) []M {
	t.Helper()
	out := make([]M, 0, len(rs))
	for _, r := range rs {
		out = append(out, xdstest.Decode(t, r.Name, r.Any, newM))
	}
	return out
}
