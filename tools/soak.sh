#!/usr/bin/env bash
# Soak: SOAK_PROXIES simulated sidecars (default 5,000) against a file-source
# `pilotfish serve` for SOAK_DURATION (default 10m) with steady churn:
# odd changes replace a service (a config change, a full push), even ones
# move the endpoints of another (the endpoint fast path). The mesh keeps
# its size, so goroutines, heap and RSS must not grow. Prints the server's
# goroutines, heap and RSS when every proxy first has full config and at
# the end (after a GC), pushes, and the p99 convergence of the changes.
#
# SOAK_WORKLOAD=http (or another istio-bench workload) serves that workload
# at SOAK_SERVICES instead of the generated Services, next to the churning
# ones. The end prints the slope of the heap after GC over the run's samples
# (MiB per minute, least squares): flat is near 0.
#
# Usage: tools/soak.sh [BIN]   (make soak builds bin/pilotfish first)
# Needs curl and jq. Not part of make test: it runs for minutes.
#
# The churn soak of the hardening work: istio-bench http at 1,000 services,
# 1,000 proxies, a change a second for 10 minutes:
#   SOAK_WORKLOAD=http SOAK_SERVICES=1000 SOAK_PROXIES=1000 SOAK_CHANGE_INTERVAL=1s make soak
set -euo pipefail

BIN=${1:-bin/pilotfish}
PROXIES=${SOAK_PROXIES:-5000}
DURATION=${SOAK_DURATION:-10m}
SERVICES=${SOAK_SERVICES:-100}
INTERVAL=${SOAK_CHANGE_INTERVAL:-2s}
WORKLOAD=${SOAK_WORKLOAD:-}
GRPC=${SOAK_GRPC_ADDR:-127.0.0.1:25010}
HTTP=${SOAK_HTTP_ADDR:-127.0.0.1:25014}
OUT=${SOAK_OUT:-.cache/soak}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DIR=$(mktemp -d)
trap 'kill $SERVER $SAMPLER 2>/dev/null || true; rm -rf "$DIR"' EXIT

# service NAME INDEX ENDPOINT_IP: one Service with two ports and its slice.
service() {
	cat <<EOF
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: soak}
spec:
  clusterIP: 10.96.$(($2 / 250)).$(($2 % 250 + 1))
  selector: {app: $1}
  ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1-a, namespace: soak, labels: {kubernetes.io/service-name: $1}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
endpoints: [{addresses: [$3], conditions: {ready: true}}]
---
EOF
}
if [ -n "$WORKLOAD" ]; then
	"$BIN" bench workload "$WORKLOAD" --services "$SERVICES" >"$DIR/mesh.yaml"
else
	for i in $(seq 0 $((SERVICES - 1))); do
		service "svc-$i" "$i" "10.244.$((i / 250)).$((i % 250 + 1))"
	done >"$DIR/mesh.yaml"
fi
service churn 900 10.245.0.1 >"$DIR/churn.yaml"
service moving 901 10.246.0.1 >"$DIR/moving.yaml"

# sample: the server's metrics after a GC (the pprof heap profile with gc=1
# collects first), so heap in use is the live heap, not garbage in waiting.
cat >"$DIR/sample.sh" <<EOF
#!/usr/bin/env bash
curl -s "http://$HTTP/debug/pprof/heap?gc=1" >/dev/null
curl -s "http://$HTTP/metrics" | awk -f "$DIR/sample.awk"
EOF
chmod +x "$DIR/sample.sh"

# The change command loadgen runs (LOADGEN_CHANGE=i).
cat >"$DIR/change.sh" <<EOF
#!/usr/bin/env bash
set -e
i=\$LOADGEN_CHANGE
[ "\$i" = 1 ] && echo "start \$(date +%s) \$($DIR/sample.sh)" >>"$OUT/samples.txt"
if [ \$((i % 2)) = 1 ]; then
	# A config change: the churn service moves to another cluster IP.
	sed "s/clusterIP: .*/clusterIP: 10.97.\$((i / 250 % 250)).\$((i % 250 + 1))/" "$DIR/churn.yaml" >"$DIR/churn.tmp" && mv "$DIR/churn.tmp" "$DIR/churn.yaml"
else
	# An endpoint change: another pod IP behind "moving".
	sed "s/addresses: \[[^]]*\]/addresses: [10.246.\$((i / 250 % 250)).\$((i % 250 + 1))]/" "$DIR/moving.yaml" >"$DIR/moving.tmp" && mv "$DIR/moving.tmp" "$DIR/moving.yaml"
fi
EOF
chmod +x "$DIR/change.sh"

# sample.awk: goroutines, heap in use, RSS (MiB) and pushes from /metrics.
cat >"$DIR/sample.awk" <<'EOF'
/^go_goroutines / { g = $2 }
/^go_memstats_heap_inuse_bytes / { h = $2 }
/^process_resident_memory_bytes / { r = $2 }
/^pilot_xds_pushes[{ ]/ { p += $2 }
END { printf "goroutines=%d heap_inuse_mib=%.1f rss_mib=%.1f pushes=%d\n", g, h / 1048576, r / 1048576, p }
EOF

: >"$OUT/samples.txt"
"$BIN" serve --config-dir "$DIR" --grpc-addr "$GRPC" --http-addr "$HTTP" --grpc-tls-addr "" --disable-ca \
	--log-level warn --resync 0 2>"$OUT/serve.log" &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://$HTTP/ready" >/dev/null && break; sleep 0.2; done
echo "idle   $("$DIR/sample.sh")" | tee -a "$OUT/samples.txt"

(while sleep "${SOAK_SAMPLE_EVERY:-15}"; do echo "sample $(date +%s) $("$DIR/sample.sh")"; done >>"$OUT/samples.txt") &
SAMPLER=$!

echo "soak: $PROXIES proxies, $DURATION, a change every $INTERVAL after the previous converged; load: $(uptime)"
set +e
"$BIN" loadgen --xds "$GRPC" --proxies "$PROXIES" --namespaces 1 --namespace-prefix soak --duration "$DURATION" \
	--changes 1000000 --change-interval "$INTERVAL" --change-timeout 2m --change-cmd "$DIR/change.sh" \
	--json "$OUT/loadgen.json" --quiet >"$OUT/loadgen.txt" 2>"$OUT/loadgen.err"
set -e
kill $SAMPLER 2>/dev/null || true
# The end: the last sample taken while every proxy was still connected
# (goroutines at least the count at full config; loadgen closes its streams
# when it stops).
g0=$(grep '^start' "$OUT/samples.txt" | sed 's/.*goroutines=\([0-9]*\).*/\1/')
end=$(awk -v g0="${g0:-0}" '$1 == "sample" { split($3, a, "="); if (a[2] + 0 >= 0.99 * g0) last = $0 } END { print last }' "$OUT/samples.txt")

echo "load after: $(uptime)"
echo "server at full config: $(grep '^start' "$OUT/samples.txt" | cut -d' ' -f3-)"
echo "server at the end:     $(echo "$end" | cut -d' ' -f3-)"
jq -r '"proxies with full config: \(.full_config)/\(.proxies); time to full config p99 \(.time_to_full_config.p99_ms | floor) ms",
  "changes: \(.changes | length), converged on every proxy: \([.changes[] | select(.not_converged == 0 and .converged > 0)] | length)",
  "convergence p99 per change: median \([.changes[] | .convergence.p99_ms] | sort | .[length/2|floor] | floor) ms, max \([.changes[] | .convergence.p99_ms] | max | floor) ms"' \
	"$OUT/loadgen.json"
# Heap after GC against time over the samples taken while connected
# (goroutines within 1% of the count at full config): the least-squares
# slope in MiB per minute, and the lowest sample of the first and of the
# last third (a push in flight holds buffers, so single samples are noisy;
# the floor is the live heap).
awk -v g0="${g0:-0}" 'BEGIN { n = 0 } $1 == "sample" { split($3, g, "="); if (g[2] + 0 < 0.99 * g0) next; split($4, h, "=");
	if (n == 0) t0 = $2; t[n] = ($2 - t0) / 60; y[n] = h[2]; n++ }
	END { if (n < 3) { print "heap slope: too few samples"; exit }
	for (i = 0; i < n; i++) { sx += t[i]; sy += y[i]; sxx += t[i] * t[i]; sxy += t[i] * y[i] }
	d = n * sxx - sx * sx; k = int(n / 3); lo1 = y[0]; lo3 = y[n - 1]
	for (i = 0; i < k; i++) { if (y[i] < lo1) lo1 = y[i]; if (y[n - 1 - i] < lo3) lo3 = y[n - 1 - i] }
	printf "heap after GC over %d samples in %.1f min: slope %.3f MiB/min; floor %.1f MiB in the first third, %.1f MiB in the last\n", n, t[n - 1], (d ? (n * sxy - sx * sy) / d : 0), lo1, lo3 }' "$OUT/samples.txt"
echo "details: $OUT (samples.txt, loadgen.json, loadgen.txt, serve.log)"
