#!/usr/bin/env bash
# Runs istiod's own xDS benchmarks (istio.io/istio/pilot/pkg/xds
# bench_test.go, the istio version tools/pilot-agent pins) interleaved with
# pilotfish's counterparts, so that both are measured at the same machine
# load. The istiod test binary is built once into .cache/bin (about 5 minutes
# on 2 cores).
#
#   tools/istiod-bench.sh [ROUNDS]
#
# Pairs: istiod InitPushContext/http (100 services) against pilotfish
# Publish (the index alone: converted config applied and published with
# warm symbols), InitScope (Publish plus one sidecar's scope) and
# BuildIndex (conversion and cold interning included).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
bin=.cache/bin
mkdir -p "$bin"
if [[ ! -x $bin/istiod-xds.test || tools/pilot-agent/go.sum -nt $bin/istiod-xds.test ]]; then
  (cd tools/pilot-agent && go test -c -o "../../$bin/istiod-xds.test" istio.io/istio/pilot/pkg/xds)
fi
go test -c -tags vtprotobuf -o "$bin/engine.test" ./engine
go test -c -tags vtprotobuf -o "$bin/ingest.test" ./ingest
pkgdir=$(cd tools/pilot-agent && go list -f '{{.Dir}}' istio.io/istio/pilot/pkg/xds)
root=$PWD
uptime
for ((i = 1; i <= rounds; i++)); do
  (cd "$pkgdir" && "$root/$bin/istiod-xds.test" -test.run '^$' -test.bench 'InitPushContext/^http$' -test.benchmem) | grep '^Benchmark'
  (cd engine && "$root/$bin/engine.test" -test.run '^$' -test.bench 'InitScope/http/services=100$' -test.benchmem) | grep '^Benchmark'
  (cd ingest && "$root/$bin/ingest.test" -test.run '^$' -test.bench '(BuildIndex|Publish)$/http/services=100$' -test.benchmem) | grep '^Benchmark'
done
uptime
