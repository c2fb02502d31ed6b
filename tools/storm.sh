#!/usr/bin/env bash
# Reconnect storm: STORM_PROXIES simulated sidecars (default 5,000) connect to
# `pilotfish serve`; once all have full config the server is killed (SIGKILL),
# a service is added, and the server is started again on the same address:
# every proxy reconnects at once and must converge on the new config. Prints
# the restarted server's goroutines, heap in use (after a GC) and RSS once
# every proxy has reconnected, and loadgen's convergence figures.
#
# Usage: tools/storm.sh [BIN]   Needs curl and jq; runs for a few minutes.
set -euo pipefail

BIN=${1:-bin/pilotfish}
PROXIES=${STORM_PROXIES:-5000}
SERVICES=${STORM_SERVICES:-100}
GRPC=${STORM_GRPC_ADDR:-127.0.0.1:26010}
HTTP=${STORM_HTTP_ADDR:-127.0.0.1:26014}
OUT=${STORM_OUT:-.cache/storm}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DIR=$(mktemp -d)
trap 'kill $(cat "$DIR/pid" 2>/dev/null) $SAMPLER 2>/dev/null || true; rm -rf "$DIR"' EXIT

for i in $(seq 0 $((SERVICES - 1))); do
	cat <<EOF
apiVersion: v1
kind: Service
metadata: {name: svc-$i, namespace: storm}
spec:
  clusterIP: 10.96.$((i / 250)).$((i % 250 + 1))
  ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc-$i-a, namespace: storm, labels: {kubernetes.io/service-name: svc-$i}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
endpoints: [{addresses: [10.244.$((i / 250)).$((i % 250 + 1))], conditions: {ready: true}}]
---
EOF
done >"$DIR/mesh.yaml"

cat >"$DIR/start.sh" <<EOF
#!/usr/bin/env bash
"$BIN" serve --config-dir "$DIR/config" --grpc-addr "$GRPC" --http-addr "$HTTP" --grpc-tls-addr "" --disable-ca \\
	--log-level warn --resync 0 </dev/null >/dev/null 2>>"$OUT/serve.log" &
echo \$! >"$DIR/pid"
for _ in \$(seq 100); do curl -sf "http://$HTTP/ready" >/dev/null && break; sleep 0.1; done
EOF
cat >"$DIR/restart.sh" <<EOF
#!/usr/bin/env bash
kill -9 \$(cat "$DIR/pid"); sleep 1
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: added, namespace: storm}\nspec:\n  clusterIP: 10.99.0.1\n  ports: [{name: http, port: 8080}]\n' >"$DIR/config/added.yaml"
date +%s >"$DIR/restarted"
"$DIR/start.sh"
EOF
chmod +x "$DIR/start.sh" "$DIR/restart.sh"
mkdir "$DIR/config" && mv "$DIR/mesh.yaml" "$DIR/config/"
: >"$OUT/serve.log"
"$DIR/start.sh"

# Samples of the server after a GC, every 10s.
(set +e; while sleep 10; do
	curl -s "http://$HTTP/debug/pprof/heap?gc=1" >/dev/null # fails while the server is down
	echo "$(date +%s) $(curl -s "http://$HTTP/metrics" | awk '/^go_goroutines /{g=$2} /^go_memstats_heap_inuse_bytes /{h=$2} /^process_resident_memory_bytes /{r=$2} /^pilot_xds[{ ]/{x+=$2} END{printf "proxies=%d goroutines=%d heap_inuse_mib=%.1f rss_mib=%.1f", x, g, h/1048576, r/1048576}')"
done >"$OUT/samples.txt") &
SAMPLER=$!

echo "storm: $PROXIES proxies; load: $(uptime)"
set +e
"$BIN" loadgen --xds "$GRPC" --proxies "$PROXIES" --namespaces 1 --namespace-prefix storm --timeout 15m \
	--change-cmd "$DIR/restart.sh" --change-interval 1s --change-timeout 10m \
	--expect-resource "cds/outbound|8080||added.storm.svc.cluster.local" --duration "${STORM_DURATION:-4m}" \
	--json "$OUT/loadgen.json" --quiet >"$OUT/loadgen.txt" 2>"$OUT/loadgen.err"
set -e
kill $SAMPLER 2>/dev/null || true
echo "load after: $(uptime)"
# The first sample after the restart with every proxy connected again.
awk -v n="$PROXIES" -v t0="$(cat "$DIR/restarted")" '$1 > t0 && $2 == "proxies=" n { print "restarted server with every proxy back:", $2, $3, $4, $5; exit }' "$OUT/samples.txt"
jq -r '"full config: \(.full_config)/\(.proxies), p99 \(.time_to_full_config.p99_ms | floor) ms",
  (.changes[] | "after the restart: converged on \(.converged)/\(.converged + .not_converged), p50 \(.convergence.p50_ms | floor) ms, p99 \(.convergence.p99_ms | floor) ms, max \(.convergence.max_ms | floor) ms")' "$OUT/loadgen.json"
echo "details: $OUT"
