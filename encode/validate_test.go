package encode_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// mustValidate runs go-control-plane's generated validation (ValidateAll)
// on m and on every message packed in an Any inside it (typed configs,
// transport sockets, protocol options), which ValidateAll itself does not
// open. Every test of a generator calls it on what it produced.
func mustValidate(t testing.TB, m proto.Message) {
	t.Helper()
	if err := xdstest.Validate(m); err != nil {
		t.Fatalf("invalid %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
}
