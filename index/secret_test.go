package index_test

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestSecretChangeKeepsConfigVersion: a batch of Secrets (with or without
// endpoints) publishes a new snapshot with its Secret rows but keeps the
// ConfigVersion, so proxy scopes are reused; the same Secret with other
// config moves it.
func TestSecretChangeKeepsConfigVersion(t *testing.T) {
	w := index.NewWriter()
	sy := w.Symbols()
	ns := sy.Intern("gw")
	svc := index.ServiceKey{Host: sy.Intern("a.gw.svc.cluster.local"), Namespace: ns}
	secret := func(v string) index.Config {
		return index.Config{Kind: index.ConfigSecret, Key: index.ConfigKey{Namespace: ns, Name: sy.Intern("gw-cert")},
			Spec: map[string][]byte{"tls.crt": []byte(v)}, Hash: uint64(len(v))}
	}
	var b index.Batch
	b.PutService(index.Service{Key: svc, Ports: []index.Port{{Number: 80}}})
	w.Apply(&b)
	base := w.Snapshot()

	apply := func(what string, fill func(*index.Batch), wantBump bool) {
		t.Helper()
		before := w.Snapshot()
		var b index.Batch
		fill(&b)
		w.Apply(&b)
		after := w.Snapshot()
		if after.Version == before.Version {
			t.Fatalf("%s: no new snapshot", what)
		}
		if bumped := after.ConfigVersion != before.ConfigVersion; bumped != wantBump {
			t.Fatalf("%s: ConfigVersion %d -> %d, want a new one: %v", what, before.ConfigVersion, after.ConfigVersion, wantBump)
		}
	}
	apply("create a Secret", func(b *index.Batch) { b.PutConfig(secret("one")) }, false)
	apply("rotate it with endpoints", func(b *index.Batch) {
		b.PutConfig(secret("two!"))
		b.PutEndpoints(svc, index.EndpointGroup{Source: sy.Intern("s"), Endpoints: []index.Endpoint{{}}})
	}, false)
	if c, ok := w.Snapshot().Config(index.ConfigSecret, index.ConfigKey{Namespace: ns, Name: sy.Intern("gw-cert")}); !ok ||
		string(c.Spec.(map[string][]byte)["tls.crt"]) != "two!" {
		t.Fatal("the snapshot does not hold the rotated Secret")
	}
	if w.Snapshot().ConfigVersion != base.ConfigVersion {
		t.Fatal("Secret changes moved the ConfigVersion")
	}
	apply("delete it", func(b *index.Batch) {
		b.DeleteConfig(index.ConfigSecret, index.ConfigKey{Namespace: ns, Name: sy.Intern("gw-cert")})
	}, false)
	apply("a Secret with a service", func(b *index.Batch) {
		b.PutConfig(secret("three"))
		b.PutService(index.Service{Key: svc, Ports: []index.Port{{Number: 8080}}})
	}, true)
}
