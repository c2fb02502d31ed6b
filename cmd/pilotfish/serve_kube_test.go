package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

func TestKubeConfigRule(t *testing.T) {
	for _, tc := range []struct {
		name, kubeconfig, configDir, serviceHost string
		want                                     string // "none", "in-cluster", or an error substring
	}{
		{"local, files only", "", "dir", "", "none"},
		{"pod without flags watches its cluster", "", "", "10.96.0.1", "in-cluster"},
		{"pod with --config-dir serves files only", "", "dir", "10.96.0.1", "none"},
		{"explicit in-cluster outside a pod", "in-cluster", "dir", "", "in-cluster"},
		{"missing kubeconfig file", "/nonexistent/kubeconfig", "", "", "--kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.serviceHost)
			t.Setenv("KUBERNETES_SERVICE_PORT", "443")
			o := kubeOptions{kubeconfig: tc.kubeconfig}
			cfg, err := o.restConfig(tc.configDir)
			switch {
			case tc.want == "none":
				if cfg != nil || err != nil {
					t.Errorf("restConfig = %v, %v; want no API server", cfg, err)
				}
			case tc.want == "in-cluster":
				// No service account token here: the in-cluster config is
				// attempted, and fails on the missing token file.
				if err == nil || !strings.Contains(err.Error(), "in-cluster") {
					t.Errorf("restConfig err = %v, want an in-cluster attempt", err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("restConfig err = %v, want %q", err, tc.want)
				}
			}
		})
	}
}

func TestServeNeedsASource(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	err := runServe(context.Background(), &serveOptions{logLevel: "info"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--config-dir, --kubeconfig") {
		t.Fatalf("err = %v, want a no-source error naming the flags", err)
	}
}

// TestKlogRouted: client-go's klog output goes to the server's logger,
// whose level applies to it (at --log-level error, klog's info is dropped
// and its errors kept).
func TestKlogRouted(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	routeKlog(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelError})))
	defer klog.ClearLogger()
	klog.InfoS("watch ended", "reason", "too old resource version")
	klog.ErrorS(errors.New("connection refused"), "failed to list")
	klog.Flush()
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	if !strings.Contains(out, "failed to list") || !strings.Contains(out, "component=client-go") {
		t.Fatalf("klog's error not in the server's log: %q", out)
	}
	if strings.Contains(out, "watch ended") {
		t.Fatalf("klog's info logged at level error: %q", out)
	}
}

// TestKlogDebug: at debug level client-go's verbose logs (V(4): watch
// expiry, relists) reach the server's log; at info they do not.
func TestKlogDebug(t *testing.T) {
	defer klog.ClearLogger()
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		var buf bytes.Buffer
		var mu sync.Mutex
		routeKlog(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: tc.level})))
		klog.V(4).InfoS("watch closed", "err", "too old resource version")
		klog.Flush()
		mu.Lock()
		got := strings.Contains(buf.String(), "watch closed")
		mu.Unlock()
		if got != tc.want {
			t.Errorf("at %v, klog V(4) logged = %v, want %v", tc.level, got, tc.want)
		}
	}
	routeKlog(slog.New(slog.NewTextHandler(io.Discard, nil))) // klog back to verbosity 0
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
