# pilotfish's build. `make run` serves the example mesh; `make test` runs every
# test (it installs what it needs: Go modules are fetched by the go command).
GO       ?= go
TAGS     ?= vtprotobuf
BIN      ?= bin/pilotfish
PKGS     ?= ./...
# Fuzz targets run for this long each in `make test` (bounded, see fuzz target).
FUZZTIME ?= 10s
BENCHCOUNT ?= 6
# The real istio-agent, for the CA's end-to-end test (cmd/pilotfish
# TestCAIstioAgent). Built from tools/pilot-agent, its own module so that
# istio.io/istio never enters pilotfish's go.mod; reused once built.
PILOT_AGENT ?= .cache/bin/pilot-agent
# The real istioctl, for `istioctl proxy-status --xds-address` against
# pilotfish (cmd/pilotfish TestIstioctlProxyStatus); same module.
ISTIOCTL ?= .cache/bin/istioctl

.PHONY: all build run test test-unit lint fuzz bench bench-scenarios bench-gate clean

all: build

# The version `pilotfish version` prints: the nearest tag and commit, "dev"
# outside a git checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -tags $(TAGS) -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/pilotfish

run: build
	./$(BIN) serve --config-dir examples

# Every test: lint, the build without vtprotobuf (proto.Marshal fallback),
# unit and integration tests with verify mode on, and bounded fuzzing.
test: lint pilot-agent istioctl pilot-discovery kube-bins helm
	$(GO) build ./...
	PILOTFISH_VERIFY_CACHE=1 $(GO) test -tags $(TAGS) -count=1 $(PKGS)
	$(MAKE) fuzz
	$(MAKE) bench-gate

lint:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) $(PKGS)

# Runs each native fuzz target for FUZZTIME. The list is discovered, so a new
# FuzzXxx is picked up without editing this file.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    out=$$($(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 50x $$pkg 2>&1) && { echo "$$out" | tail -3; continue; }; \
	    echo "$$out"; \
	    if echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
	      echo "fuzz $$f: the fuzzer's own deadline race, no crasher; running it again"; \
	      $(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 50x $$pkg; \
	    else exit 1; fi; \
	  done; \
	done

# Benchmarks (docs/benchmarks.md). `make bench`: the micro-benchmarks of
# BENCHPKGS matching BENCH, BENCHCOUNT times each, summarised by benchstat
# (installed into .cache/bin on first use), then the scenarios against the
# go-control-plane baselines at a moderate size. To compare two commits, run
# it on each with a different BENCHOUT and `$(BENCHSTAT) OLD NEW`.
BENCH      ?= .
BENCHPKGS  ?= $(PKGS)
BENCHOUT   ?= bench.out
BENCHSTAT  ?= .cache/bin/benchstat
BENCH_WORKLOAD ?= http
BENCH_SERVICES ?= 100
BENCH_PROXIES  ?= 500

bench: $(BENCHSTAT)
	$(GO) test -tags $(TAGS) -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCHCOUNT) $(BENCHPKGS) | tee $(BENCHOUT)
	$(BENCHSTAT) $(BENCHOUT)
	$(MAKE) bench-scenarios

# The scenarios (pilotfish bench) at BENCH_SERVICES services, BENCH_PROXIES
# proxies; the JSON goes to .cache/bench-scenarios.json.
bench-scenarios: build
	@mkdir -p .cache
	./$(BIN) bench --workload $(BENCH_WORKLOAD) --services $(BENCH_SERVICES) --proxies $(BENCH_PROXIES) \
	  --json .cache/bench-scenarios.json

# The regression gate (part of `make test`): allocation budgets and
# same-run ratio floors against the baselines (bench/gate_test.go), a
# minute or two on two shared cores. Never an absolute time.
bench-gate:
	PILOTFISH_BENCH_GATE=1 $(GO) test -tags $(TAGS) -count=1 -run '^(TestGate|TestWarmProxyConfigAllocs)$$' -v ./bench/

$(BENCHSTAT):
	GOBIN=$(abspath $(dir $(BENCHSTAT))) $(GO) install golang.org/x/perf/cmd/benchstat@latest

# ~3 minutes cold on 2 cores; skipped while the binary is newer than the
# module files.
.PHONY: pilot-agent
pilot-agent: $(PILOT_AGENT)

$(PILOT_AGENT): tools/pilot-agent/go.mod tools/pilot-agent/go.sum
	@mkdir -p $(dir $@)
	cd tools/pilot-agent && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) istio.io/istio/pilot/cmd/pilot-agent

# ~25 minutes cold on a loaded 2-core machine (most of it shared with
# pilot-agent's build cache); skipped while the binary is newer than the
# module files.
.PHONY: istioctl
istioctl: $(ISTIOCTL)

$(ISTIOCTL): tools/pilot-agent/go.mod tools/pilot-agent/go.sum
	@mkdir -p $(dir $@)
	cd tools/pilot-agent && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) istio.io/istio/istioctl/cmd/istioctl

# istiod itself (pilot-discovery), from the same module and istio version,
# for the producer of istiod's reference output (internal/istiodref, see its
# doc.go): `make istiod-ref [CASE=name]`, and for cmd/pilotfish's
# TestMigrationFromIstiod (istiod and pilotfish side by side), which `make
# test` runs; the istiod-ref cases themselves are only read there.
PILOT_DISCOVERY ?= .cache/bin/pilot-discovery
.PHONY: pilot-discovery istiod-ref
pilot-discovery: $(PILOT_DISCOVERY)

$(PILOT_DISCOVERY): tools/pilot-agent/go.mod tools/pilot-agent/go.sum
	@mkdir -p $(dir $@)
	cd tools/pilot-agent && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) istio.io/istio/pilot/cmd/pilot-discovery

istiod-ref: $(PILOT_DISCOVERY) kube-bins
	$(GO) test -count=1 -timeout 30m -run TestProduce ./internal/istiodref -istiod $(abspath $(PILOT_DISCOVERY)) $(if $(CASE),-case $(CASE))

# etcd, kube-apiserver and kubectl for the tests against a real API server
# (internal/kubetest), built from tools/kube, its own module so that
# k8s.io/kubernetes never enters pilotfish's go.mod; ~10 minutes cold on 2
# cores, skipped while the binaries are newer than the module files. The -X
# flags give the apiserver its release version instead of v0.0.0-master.
KUBE_BIN ?= .cache/kube/bin
KUBE_VERSION := v1.36.3
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36
.PHONY: kube-bins
# Measurements against real istiod in one run (docs/benchmarks.md): sidecar
# injection, and one sidecar's full config cold and warm (CONFIG_SERVICES,
# CONFIG_ROUNDS, CONFIG_WARM, CONFIG_EXTRAS=0 for plain http).
.PHONY: bench-inject bench-config-istiod
bench-inject: $(PILOT_DISCOVERY) kube-bins
	PILOTFISH_INJECT_VS_ISTIOD=1 $(GO) test -tags vtprotobuf -count=1 -timeout 30m -run TestInjectVersusIstiod -v ./cmd/pilotfish
bench-config-istiod: $(PILOT_DISCOVERY) kube-bins
	PILOTFISH_CONFIG_VS_ISTIOD=1 $(GO) test -tags vtprotobuf -count=1 -timeout 45m -run TestFullConfigVersusIstiod -v ./cmd/pilotfish

kube-bins: $(KUBE_BIN)/etcd $(KUBE_BIN)/kube-apiserver $(KUBE_BIN)/kubectl

$(KUBE_BIN)/etcd: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(dir $@)
	cd tools/kube && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) go.etcd.io/etcd/server/v3

$(KUBE_BIN)/kube-apiserver: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(dir $@)
	cd tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(abspath $@) k8s.io/kubernetes/cmd/kube-apiserver

$(KUBE_BIN)/kubectl: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(dir $@)
	cd tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(abspath $@) k8s.io/kubernetes/cmd/kubectl

# The soak (docs/operations.md, not part of make test): SOAK_PROXIES proxies
# (5,000) against `pilotfish serve` for SOAK_DURATION (10m) with steady config
# and endpoint churn; prints goroutines, heap and RSS at full config and at
# the end, pushes and p99 convergence. Needs curl and jq.
.PHONY: soak
soak: build
	tools/soak.sh $(BIN)

# Helm, for rendering deploy/charts/pilotfish into deploy/manifests and the
# deploy tests that check the file is up to date; built from tools/helm (its
# own module), ~5 minutes cold, skipped while newer than the module files.
HELM ?= .cache/bin/helm
.PHONY: helm manifests
helm: $(HELM)

$(HELM): tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(dir $@)
	cd tools/helm && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) helm.sh/helm/v4/cmd/helm

# Renders the chart into deploy/manifests/pilotfish.yaml (the deploy test
# that checks it, in update mode, so the two cannot disagree).
manifests: $(HELM)
	PILOTFISH_HELM=$(abspath $(HELM)) $(GO) test -count=1 -run '^TestManifestsUpToDate$$' ./deploy -args -update

clean:
	rm -rf bin bench.out
