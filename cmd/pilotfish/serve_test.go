package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

const svcYAML = `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  selector:
    app: reviews
  ports:
  - name: http
    port: 9080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels:
    kubernetes.io/service-name: reviews
addressType: IPv4
ports:
- name: http
  port: 9080
endpoints:
- addresses: ["10.244.0.5"]
  conditions: {ready: true}
`

const vsYAML = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: shop
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
`

// startServe runs `pilotfish serve` in-process on dir and returns its HTTP
// base URL once it is ready.
func startServe(t *testing.T, dir string) string {
	t.Helper()
	return "http://" + startServeAddrs(t, dir).httpAddr.String()
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// eventually retries check until it returns "" or the deadline passes.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, last)
}

func registry(t *testing.T, base string) map[string]engine.ServiceView {
	_, b := get(t, base+"/debug/registryz")
	var views []engine.ServiceView
	if err := json.Unmarshal(b, &views); err != nil {
		t.Fatalf("registryz: %v: %s", err, b)
	}
	out := map[string]engine.ServiceView{}
	for _, v := range views {
		out[v.Hostname] = v
	}
	return out
}

func TestServeFollowsConfigDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("reviews.yaml", svcYAML)
	base := startServe(t, dir)
	const host = "reviews.shop.svc.cluster.local"

	eventually(t, "ready", func() string {
		if code, _ := get(t, base+"/ready"); code != http.StatusOK {
			return "ready = " + http.StatusText(code)
		}
		return ""
	})
	reg := registry(t, base)
	if v, ok := reg[host]; !ok || len(v.Endpoints) != 1 || v.Endpoints[0].Address != "10.244.0.5" || v.Ports[0].Port != 9080 {
		t.Fatalf("registryz[%s] = %+v", host, reg[host])
	}

	// Scale up: a second endpoint appears.
	write("reviews.yaml", strings.Replace(svcYAML, `["10.244.0.5"]`, `["10.244.0.5", "10.244.0.6"]`, 1))
	eventually(t, "scale up", func() string {
		if n := len(registry(t, base)[host].Endpoints); n != 2 {
			return "endpoints: " + string(rune('0'+n))
		}
		return ""
	})

	// A VirtualService in another file shows in configz.
	write("vs.yaml", vsYAML)
	eventually(t, "configz", func() string {
		_, b := get(t, base+"/debug/configz")
		if !strings.Contains(string(b), `"kind": "VirtualService"`) {
			return string(b)
		}
		return ""
	})

	// A bad edit keeps the last good version and reports the error.
	write("reviews.yaml", strings.Replace(svcYAML, "port: 9080\n---", "port: 99999\n---", 1))
	eventually(t, "config error reported", func() string {
		_, b := get(t, base+"/debug/config_errors")
		if !strings.Contains(string(b), "reviews") {
			return string(b)
		}
		return ""
	})
	if v := registry(t, base)[host]; len(v.Ports) != 1 || v.Ports[0].Port != 9080 {
		t.Fatalf("bad edit replaced the last good service: %+v", v)
	}

	// Deleting the file removes its objects; the other file's stay.
	if err := os.Remove(filepath.Join(dir, "reviews.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delete", func() string {
		if _, ok := registry(t, base)[host]; ok {
			return "service still present"
		}
		return ""
	})
	_, b := get(t, base+"/debug/configz")
	if !strings.Contains(string(b), `"kind": "VirtualService"`) {
		t.Fatalf("deleting one file removed another file's objects: %s", b)
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/cachez"} {
		if code, _ := get(t, base+path); code != http.StatusOK {
			t.Errorf("%s = %d", path, code)
		}
	}
}

func TestServeRejectsMissingConfigDir(t *testing.T) {
	err := runServe(context.Background(), &serveOptions{configDir: filepath.Join(t.TempDir(), "nope"), logLevel: "info"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--config-dir") {
		t.Fatalf("err = %v, want a --config-dir error", err)
	}
}

// TestServeRejectsBadOutboundPolicy: an outboundTrafficPolicy mode
// pilotfish does not implement stops the start, naming the flag.
func TestServeRejectsBadOutboundPolicy(t *testing.T) {
	err := runServe(context.Background(), &serveOptions{configDir: t.TempDir(), logLevel: "info", outboundPolicy: "ALLOW_ANY_DYNAMIC_DNS"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--outbound-traffic-policy") || !strings.Contains(err.Error(), "ALLOW_ANY_DYNAMIC_DNS") {
		t.Fatalf("err = %v, want an --outbound-traffic-policy error", err)
	}
}

// TestServeLogsEveryAddress: the start-up line names every server's bound
// address (xDS, xDS over TLS, HTTP, webhook), and "off" for one turned off.
func TestServeLogsEveryAddress(t *testing.T) {
	for _, tc := range []struct {
		name        string
		tls, hook   string
		wantTLSOff  bool
		wantHookOff bool
	}{
		{name: "all", tls: "127.0.0.1:0", hook: "127.0.0.1:0"},
		{name: "tls and webhook off", wantTLSOff: true, wantHookOff: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lockedBuffer{}
			s := startServeWith(t, &serveOptions{configDir: t.TempDir(), logLevel: "info", logOut: logs,
				webhook: webhookOptions{addr: tc.hook}, ca: caOptions{tlsAddr: tc.tls}})
			want := map[string]string{"grpc": s.grpcAddr.String(), "http": s.httpAddr.String(), "grpc-tls": "off", "webhook": "off"}
			if !tc.wantTLSOff {
				want["grpc-tls"] = s.grpcTLSAddr.String()
			}
			if !tc.wantHookOff {
				want["webhook"] = s.webhookAddr.String()
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `msg="pilotfish serving"`) {
					line = l
				}
			}
			for k, v := range want {
				if !strings.Contains(line, " "+k+"="+v) {
					t.Errorf("start-up line lacks %s=%s: %q", k, v, line)
				}
			}
		})
	}
}
