package meshconfig_test

import (
	"errors"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// FuzzParse: any input parses or fails with a *Problem wrapping
// ErrInvalid; never a panic, and a config that parses validates.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "rootNamespace: x\n", "defaultConfig:\n  proxyMetadata: {A: b}\n",
		"outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n", "connectTimeout: 1s\nfoo: [1, {a: b}]\n",
		"discoverySelectors:\n- matchLabels: {a: b}\n", "a: &x {b: *x}\n", "trustDomainAliases: [a, b]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mc, warns, err := meshconfig.Parse(data)
		for _, w := range warns {
			if !errors.Is(w, meshconfig.ErrUnknownField) {
				t.Fatalf("warning %v", w)
			}
		}
		if err != nil {
			if !errors.Is(err, meshconfig.ErrInvalid) || len(meshconfig.Problems(err)) == 0 {
				t.Fatalf("error %v", err)
			}
			return
		}
		if probs := meshconfig.Validate(mc); len(probs) > 0 {
			t.Fatalf("parsed but invalid: %v", probs[0])
		}
		_, _ = meshconfig.ParseNetworks(data)
	})
}
