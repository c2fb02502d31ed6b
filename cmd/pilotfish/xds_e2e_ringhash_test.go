package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ringHashPolicy = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: shop}
spec:
  host: echo.shop.svc.cluster.local
  trafficPolicy:
    loadBalancer:
      consistentHash: {httpHeaderName: x-user}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`

func TestE2EProxylessGRPCRingHash(t *testing.T) {
	e := newE2E(t)
	// No VirtualService: the default route spreads over both versions, and
	// the ring hash pins each user to one.
	if err := os.Remove(filepath.Join(e.dir, "routing.yaml")); err != nil {
		t.Fatal(err)
	}
	e.write("dr.yaml", ringHashPolicy)
	// Move the DestinationRule out of mesh.yaml: dr.yaml replaces it.
	mesh, _ := os.ReadFile(filepath.Join(e.dir, "mesh.yaml"))
	e.write("mesh.yaml", strings.Split(string(mesh), "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule")[0])
	users := map[string]string{}
	e.waitFor("ring hash pins users", func() bool {
		for u := 0; u < 32; u++ {
			user := fmt.Sprintf("user-%d", u)
			first, err := e.call(false, "x-user", user)
			if err != nil {
				return false
			}
			for i := 0; i < 5; i++ {
				if who, err := e.call(false, "x-user", user); err != nil || who != first {
					return false
				}
			}
			users[user] = first
		}
		return true
	})
	seen := map[string]bool{}
	for _, v := range users {
		seen[v] = true
	}
	// 32 users hashed over two equal endpoints all landing on one has
	// probability 2^-31: a ring that ignores the header would do that.
	if len(seen) != 2 {
		t.Fatalf("32 users all hashed to one version: %v", users)
	}
}
