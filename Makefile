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

.PHONY: all build run test test-unit lint fuzz bench clean

all: build

build:
	$(GO) build -tags $(TAGS) -o $(BIN) ./cmd/pilotfish

run: build
	./$(BIN) serve --config-dir examples

# Every test: lint, the build without vtprotobuf (proto.Marshal fallback),
# unit and integration tests with verify mode on, and bounded fuzzing.
test: lint pilot-agent
	$(GO) build ./...
	PILOTFISH_VERIFY_CACHE=1 $(GO) test -tags $(TAGS) -count=1 $(PKGS)
	$(MAKE) fuzz

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
	    $(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 50x $$pkg; \
	  done; \
	done

bench:
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) $(PKGS) | tee bench.out

# ~3 minutes cold on 2 cores; skipped while the binary is newer than the
# module files.
.PHONY: pilot-agent
pilot-agent: $(PILOT_AGENT)

$(PILOT_AGENT): tools/pilot-agent/go.mod tools/pilot-agent/go.sum
	@mkdir -p $(dir $@)
	cd tools/pilot-agent && $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $@) istio.io/istio/pilot/cmd/pilot-agent

clean:
	rm -rf bin bench.out
