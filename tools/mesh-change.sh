#!/usr/bin/env bash
# Mesh config change: MESH_PROXIES simulated sidecars (default 1,000) and
# MESH_ROUTERS gateways (default 5) against `pilotfish serve` on an
# istio-bench workload (MESH_WORKLOAD, default http, at MESH_SERVICES
# services, default 100); then three changes of the mesh config, one after
# the other, each measured until the last affected proxy got its push:
#   1. outboundTrafficPolicy ALLOW_ANY -> REGISTRY_ONLY: every sidecar's LDS
#      (not the gateways')
#   2. connectTimeout 10s -> 5s: every proxy's CDS
#   3. enablePrometheusMerge and defaultConfig only (what injection reads):
#      nothing pilotfish generates, so no push at all
# The mesh config is ConfigMap istio in --config-dir (MESH_SOURCE=dir, the
# default) or a --mesh-config file (MESH_SOURCE=file); pilotfish checks both
# every 2 s. Each change is written by a change command that then waits for
# pilotfish's log line "mesh config applied" (its time, to the millisecond,
# is the apply; pilotfish_mesh_config_last_applied_timestamp_seconds says the
# same), so it prints, per change:
#   apply      from the write to pilotfish applying it (the 2 s poll)
#   last push  from the apply to the push's last response sent (server side,
#              /debug/push_status lastSent; the debounce, 100 ms, included)
#              and to the last sidecar's ACK (loadgen's max convergence less
#              the apply)
#   end to end loadgen's convergence p50/p99/max, from the change command
#   pushes     the server's responses and bytes by type (pilot_xds_pushes,
#              pilot_xds_config_size_bytes) between this change and the next
#   cpu        the server's CPU seconds over the same interval
# MESH_CHANGE_INTERVAL (5s) is the pause before each change (the first
# after every proxy has full config: shorter, the connect storm's tail and
# GC land in the first change).
# MESH_PROFILE=1 also takes a CPU profile of the server during each change
# ($OUT/cpu-N.pprof; go tool pprof -top bin/pilotfish FILE).
#
# Usage: tools/mesh-change.sh [BIN]   (make build first; needs curl and jq)
# Not part of make test: a run takes about a minute.
set -euo pipefail

BIN=${1:-bin/pilotfish}
PROXIES=${MESH_PROXIES:-1000}
ROUTERS=${MESH_ROUTERS:-5}
SERVICES=${MESH_SERVICES:-100}
WORKLOAD=${MESH_WORKLOAD:-http}
SOURCE=${MESH_SOURCE:-dir}
NAMESPACES=${MESH_NAMESPACES:-10} # sidecars spread over load-0..N-1
APPS=${MESH_APPS:-1}              # and over app=load-0..N-1 labels
TIMEOUT=${MESH_CHANGE_TIMEOUT:-30s} # also how long change 3 waits for no push
GRPC=${MESH_GRPC_ADDR:-127.0.0.1:27010}
HTTP=${MESH_HTTP_ADDR:-127.0.0.1:27014}
OUT=${MESH_OUT:-.cache/mesh-change}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
DIR=$(mktemp -d)
trap 'kill $SERVER $ROUTERS_PID 2>/dev/null || true; rm -rf "$DIR"' EXIT
rm -f "$OUT"/changes.txt "$OUT"/metrics-*.txt "$OUT"/push_status-*.json "$OUT"/cpu-*.pprof
mkdir "$DIR/config"
"$BIN" bench workload "$WORKLOAD" --services "$SERVICES" >"$DIR/config/workload.yaml"

# mesh N: the mesh config after change N (0: the first).
mesh() {
	local policy=ALLOW_ANY timeout=10s merge=true
	[ "$1" -ge 1 ] && policy=REGISTRY_ONLY
	[ "$1" -ge 2 ] && timeout=5s
	[ "$1" -ge 3 ] && merge=false
	cat <<EOF
outboundTrafficPolicy:
  mode: $policy
connectTimeout: $timeout
enablePrometheusMerge: $merge
defaultConfig:
  discoveryAddress: istiod.istio-system.svc:15012
  concurrency: $((2 + ${1} / 3))
EOF
}
# write N: make change N by the chosen source (a rename: never half a file).
write() {
	if [ "$SOURCE" = file ]; then
		mesh "$1" >"$DIR/mesh.tmp"
		mv "$DIR/mesh.tmp" "$DIR/mesh.yaml"
	else
		{
			printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n'
			mesh "$1" | sed 's/^/    /'
		} >"$DIR/istio.tmp"
		mv "$DIR/istio.tmp" "$DIR/config/istio.yaml"
	fi
}
write 0
MESHFLAG=()
[ "$SOURCE" = file ] && MESHFLAG=(--mesh-config "$DIR/mesh.yaml")

"$BIN" serve --config-dir "$DIR/config" "${MESHFLAG[@]}" --grpc-addr "$GRPC" --http-addr "$HTTP" --grpc-tls-addr "" \
	--webhook-addr "" --disable-ca --log-level info --resync 0 </dev/null >/dev/null 2>"$OUT/serve.log" &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://$HTTP/ready" >/dev/null && break; sleep 0.1; done

cat >"$DIR/change.sh" <<EOF
#!/usr/bin/env bash
# change.sh N: snapshot the server's metrics, write change N, wait until
# pilotfish applied it (its log line "mesh config applied": reading the log
# costs the server nothing, scraping /metrics often would); record the
# times.
set -eu
t0=\$(date +%s.%N)
curl -s "http://$HTTP/metrics" >"$OUT/metrics-\$1.txt"
curl -s "http://$HTTP/debug/push_status" >"$OUT/push_status-\$1.json"
before=\$(grep -c 'msg="mesh config applied"' "$OUT/serve.log" || true)
[ "${MESH_PROFILE:-}" = 1 ] && (curl -s "http://$HTTP/debug/pprof/profile?seconds=8" >"$OUT/cpu-\$1.pprof" &)
$(declare -f mesh write)
SOURCE=$SOURCE DIR=$DIR
write "\$1"
tw=\$(date +%s.%N)
for _ in \$(seq 500); do
	[ "\$(grep -c 'msg="mesh config applied"' "$OUT/serve.log" || true)" -gt "\$before" ] && break
	sleep 0.02
done
at=\$(grep 'msg="mesh config applied"' "$OUT/serve.log" | tail -1 | sed 's/^time=\([^ ]*\) .*/\1/')
echo "\$1 \$t0 \$tw \$(date -d "\$at" +%s.%N)" >>"$OUT/changes.txt"
EOF
chmod +x "$DIR/change.sh"

echo "mesh-change: $PROXIES sidecars ($NAMESPACES namespaces, $APPS apps), $ROUTERS gateways, $WORKLOAD at $SERVICES services, mesh config from $SOURCE; load: $(uptime)"
"$BIN" loadgen --xds "$GRPC" --type router --proxies "$ROUTERS" --namespace-prefix istio-system --namespaces 1 \
	--duration 30m --quiet --json "$OUT/routers.json" >/dev/null 2>&1 &
ROUTERS_PID=$!
set +e
"$BIN" loadgen --xds "$GRPC" --proxies "$PROXIES" --namespaces "$NAMESPACES" --apps "$APPS" \
	--timeout 20m --changes 3 --change-cmd "$DIR/change.sh {i}" --change-interval "${MESH_CHANGE_INTERVAL:-5s}" --change-timeout "$TIMEOUT" \
	--server-pid "$SERVER" --json "$OUT/loadgen.json" --quiet >"$OUT/loadgen.txt" 2>"$OUT/loadgen.err"
set -e
curl -s "http://$HTTP/metrics" >"$OUT/metrics-4.txt"
curl -s "http://$HTTP/debug/push_status" >"$OUT/push_status-4.json"
echo "load after: $(uptime)"

# per-type deltas of a metric between two snapshots: "cds=N lds=M ..."
delta() {
	awk -v m="$1" 'FNR==1{f++} $1 ~ "^"m"\\{" {match($1, /type="[^"]*"/); t=substr($1, RSTART+6, RLENGTH-7); v[t]+=(f==1?-$2:$2)}
		END{for (t in v) if (v[t]!=0) printf "%s=%d ", t, v[t]}' "$2" "$3"
}
cpu() { awk 'FNR==1{f++} /^process_cpu_seconds_total /{v+=(f==1?-$2:$2)} END{printf "%.2f", v}' "$1" "$2"; }
# The pushes pilotfish queued from apply time FROM until TO (unix
# seconds), from /debug/push_status FILE taken before the next change
# (times in UTC): "pushes last-sent", last-sent in unix seconds (0: none).
# (Its per-push response counts are approximate: a response counts in the
# push last queued. The counts printed are the metrics'.)
pushes() {
	jq -r --argjson from "$1" --argjson to "$2" '
		def ts: capture("^(?<s>[^.Z]+)(?<f>\\.[0-9]+)?Z$") | (.s + "Z" | fromdateiso8601) + ((.f // "0") | tonumber);
		[.recent[] | select((.time | ts) >= $from - 0.001 and (.time | ts) < $to)] |
		"\(length) \([.[] | .lastSent // empty | ts] | max // 0)"' "$3"
}
NAMES=("" "REGISTRY_ONLY (sidecars' LDS)" "connectTimeout (every CDS)" "injection-only fields (no push)")
for i in 1 2 3; do
	read -r _ t0 tw at < <(grep "^$i " "$OUT/changes.txt")
	next=$(awk -v i="$i" '$1 == i + 1 {print $4}' "$OUT/changes.txt")
	read -r np last < <(pushes "$at" "${next:-1e12}" "$OUT/push_status-$((i + 1)).json")
	a=$(jq -r --argjson i "$i" '.changes[] | select(.index == $i) | "\(.converged) \(.convergence.p50_ms // 0) \(.convergence.p99_ms // 0) \(.convergence.max_ms // 0)"' "$OUT/loadgen.json")
	read -r conv p50 p99 mx <<<"$a"
	printf 'change %d, %s:\n' "$i" "${NAMES[$i]}"
	awk -v t0="$t0" -v tw="$tw" -v at="$at" -v last="$last" -v np="$np" -v conv="$conv" -v n="$PROXIES" -v p50="$p50" -v p99="$p99" -v mx="$mx" 'BEGIN{
		printf "  applied %.0f ms after the write; %d push(es)", (at-tw)*1000, np
		if (last > 0) printf ", last response sent %.0f ms after the apply", (last-at)*1000
		printf "\n  sidecars: %d of %d got a new version", conv, n
		if (conv > 0) printf "; the last ACKed it %.0f ms after the apply; from the change command p50 %.0f p99 %.0f max %.0f ms (first changed type ACKed)", mx-(at-t0)*1000, p50, p99, mx
		printf "\n" }'
	printf '  server: responses %s; bytes %s; cpu %s s\n' \
		"$(delta pilot_xds_pushes "$OUT/metrics-$i.txt" "$OUT/metrics-$((i + 1)).txt")" \
		"$(delta pilot_xds_config_size_bytes_sum "$OUT/metrics-$i.txt" "$OUT/metrics-$((i + 1)).txt")" \
		"$(cpu "$OUT/metrics-$i.txt" "$OUT/metrics-$((i + 1)).txt")"
done
echo "details: $OUT (serve.log, loadgen.json, metrics-N.txt)"
