#!/usr/bin/env bash
# Sharing under EnvoyFilters and Telemetry: CACHE_PROXIES simulated sidecars
# (default 1,000, namespace load-0, spread over CACHE_APPS app labels,
# default 2: app=load-0 is selected by one of the filters, app=load-1 not)
# get full config from `pilotfish serve` on istio-bench http at
# CACHE_SERVICES services (default 1,000), twice: without extras, then with
# cmd/pilotfish/testdata/config-vs-istiod's ten EnvoyFilters and mesh-wide
# Telemetry. Printed per run, by type: the resources proxies were sent,
# how many were copied from their class's memo (pilotfish_class_response_
# resources_total), how many were built from keys and of those how many
# were bytes-cache hits or generations (pilotfish_cache_{hits,misses}_total,
# route configurations only for rds: virtual hosts are cached inside them;
# by kind), and the share served without encoding ("shared"); then bytes
# per proxy, time to full config and the server's CPU. A filter that made
# shared encodings per proxy would show as generations growing with the
# proxies.
#
# Usage: tools/envoyfilter-cache.sh [BIN]   (make build first; needs curl)
# Not part of make test: a run takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin/pilotfish}
PROXIES=${CACHE_PROXIES:-1000}
APPS=${CACHE_APPS:-2}
SERVICES=${CACHE_SERVICES:-1000}
GRPC=${CACHE_GRPC_ADDR:-127.0.0.1:27110}
HTTP=${CACHE_HTTP_ADDR:-127.0.0.1:27114}
OUT=${CACHE_OUT:-.cache/envoyfilter-cache}
mkdir -p "$OUT"
DIR=$(mktemp -d)
SERVER=
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT
mesh=inject/testdata/chart/default/mesh.yaml

for extras in none filters+telemetry; do
	rm -rf "$DIR/config" && mkdir "$DIR/config"
	"$BIN" bench workload http --services "$SERVICES" >"$DIR/config/workload.yaml"
	printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: load-0}\n' >"$DIR/config/ns.yaml"
	if [ "$extras" != none ]; then
		cp cmd/pilotfish/testdata/config-vs-istiod/{envoyfilters,telemetry}.yaml "$DIR/config/"
	fi
	"$BIN" serve --config-dir "$DIR/config" --mesh-config "$mesh" --grpc-addr "$GRPC" --http-addr "$HTTP" \
		--grpc-tls-addr "" --webhook-addr "" --disable-ca --log-level warn --resync 0 </dev/null >/dev/null 2>"$OUT/serve-$extras.log" &
	SERVER=$!
	for _ in $(seq 200); do curl -sf "http://$HTTP/ready" >/dev/null && break; sleep 0.1; done
	curl -s "http://$HTTP/metrics" >"$OUT/metrics-$extras-0.txt"
	"$BIN" loadgen --xds "$GRPC" --proxies "$PROXIES" --namespaces 1 --apps "$APPS" --timeout 10m \
		--server-pid "$SERVER" --json "$OUT/loadgen-$extras.json" --quiet >"$OUT/loadgen-$extras.txt" 2>&1 || true
	curl -s "http://$HTTP/metrics" >"$OUT/metrics-$extras-1.txt"
	curl -s "http://$HTTP/debug/config_errors" >"$OUT/config_errors-$extras.json" || true
	kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
	echo "== $extras: $PROXIES sidecars ($APPS apps), http@$SERVICES; load $(cut -d' ' -f1-3 /proc/loadavg)"
	awk 'FNR==1{f++}
		/^pilotfish_class_response_resources_total\{/ {match($1, /type="[^"]*"/); t=substr($1, RSTART+6, RLENGTH-7);
			s=($1 ~ /source="memo"/)?"memo":"built"; r[t","s]+=(f==1?-$2:$2); types[t]=1}
		/^pilotfish_cache_(hits|misses)_total\{/ {match($1, /kind="[^"]*"/); k=substr($1, RSTART+6, RLENGTH-7);
			w=($1 ~ /hits/)?"h":"m"; c[k","w]+=(f==1?-$2:$2)}
		/^process_cpu_seconds_total / {cpu+=(f==1?-$2:$2)}
		END{kind["cds"]="cluster"; kind["lds"]="listener"; kind["eds"]="endpoint"
			printf "  %-4s %10s %10s %10s %8s %11s %8s\n", "type", "resources", "memo", "built", "hits", "generations", "shared"
			for (t in types) { m=r[t",memo"]; b=r[t",built"]; if (m+b==0) continue
				kind["rds"]="route"; h=c[kind[t]",h"]; g=c[kind[t]",m"]
				printf "  %-4s %10d %10d %10d %8d %11d %7.2f%%\n", t, m+b, m, b, h, g, 100*(m+b-g)/(m+b); tm+=m; tb+=b; tg+=g }
			printf "  all  %10d %10d %10d %8s %11d %7.2f%%; server cpu %.2f s\n", tm+tb, tm, tb, "", tg, (tm+tb)?100*(tm+tb-tg)/(tm+tb):0, cpu}' \
		"$OUT/metrics-$extras-0.txt" "$OUT/metrics-$extras-1.txt"
	grep -E '^elapsed|^to full config|^server' "$OUT/loadgen-$extras.txt" | sed 's/^/  /' || true
done
echo "details: $OUT"
