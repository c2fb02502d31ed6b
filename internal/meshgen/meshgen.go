package meshgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Params size a generated mesh.
type Params struct {
	Services int
	// EndpointsPerService endpoints go into EndpointSlices of at most
	// SliceSize endpoints (default 100, Kubernetes' default).
	EndpointsPerService int
	SliceSize           int
	// Namespaces spreads services round-robin over ns-0..ns-K-1 (default 1).
	Namespaces int
	// Pods also writes a Pod per endpoint (labels, service account, IP).
	Pods bool
}

func (p Params) withDefaults() Params {
	if p.SliceSize <= 0 {
		p.SliceSize = 100
	}
	if p.Namespaces <= 0 {
		p.Namespaces = 1
	}
	return p
}

// Kubernetes renders the mesh as one multi-document YAML stream.
func Kubernetes(p Params) []byte {
	p = p.withDefaults()
	var b bytes.Buffer
	b.Grow(p.Services * (600 + p.EndpointsPerService*120))
	for i := 0; i < p.Services; i++ {
		writeService(&b, p, i)
	}
	return b.Bytes()
}

// WriteDir writes the mesh to dir, one file per namespace.
func WriteDir(dir string, p Params) error {
	p = p.withDefaults()
	files := make([]bytes.Buffer, p.Namespaces)
	for i := 0; i < p.Services; i++ {
		writeService(&files[i%p.Namespaces], p, i)
	}
	for ns := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("ns-%d.yaml", ns)), files[ns].Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeService(b *bytes.Buffer, p Params, i int) {
	ns := fmt.Sprintf("ns-%d", i%p.Namespaces)
	name := fmt.Sprintf("svc-%d", i)
	fmt.Fprintf(b, `apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  clusterIP: %s
  selector:
    app: %s
  ports:
  - name: http
    port: 80
    targetPort: 8080
  - name: grpc
    port: 9090
---
`, name, ns, ip(10, 96, i), name)
	for s := 0; s*p.SliceSize < p.EndpointsPerService; s++ {
		fmt.Fprintf(b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-%d
  namespace: %s
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
- name: http
  port: 8080
- name: grpc
  port: 9090
endpoints:
`, name, s, ns, name)
		for e := s * p.SliceSize; e < (s+1)*p.SliceSize && e < p.EndpointsPerService; e++ {
			fmt.Fprintf(b, "- addresses: [%q]\n  conditions: {ready: true}\n  targetRef: {kind: Pod, name: %s-%d}\n  zone: zone-%d\n",
				ip(10, 128, i*p.EndpointsPerService+e), name, e, e%3)
		}
		b.WriteString("---\n")
	}
	if !p.Pods {
		return
	}
	for e := 0; e < p.EndpointsPerService; e++ {
		fmt.Fprintf(b, `apiVersion: v1
kind: Pod
metadata:
  name: %s-%d
  namespace: %s
  labels: {app: %s, version: v1, security.istio.io/tlsMode: istio}
spec:
  serviceAccountName: %s
  containers: [{name: app, image: app}]
status:
  podIP: %s
---
`, name, e, ns, name, name, ip(10, 128, i*p.EndpointsPerService+e))
	}
}

// ip returns a.b.x.y with n spread over the last 16 bits (and the second
// octet for n ≥ 65536).
func ip(a, b, n int) string {
	return fmt.Sprintf("%d.%d.%d.%d", a, b+n>>16, (n>>8)&0xff, n&0xff)
}
