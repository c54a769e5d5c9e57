#!/usr/bin/env bash
# The README's main command, end to end: installs dependencies (Debian 12),
# builds pdc-sim and pdc-extender, then pdc-sim
#   - starts pdc-extender on 127.0.0.1 (a free port) with the embedded file
#     store in a temporary data directory,
#   - reports every simulated node's inventory to it (PUT /v1/nodes/{node}/inventory),
#   - replays the `demo` scenario: KubeVirt's device plugin and DRA
#     (Kubernetes >= 1.31) in-process, pdc in-process through its allocator
#     core, and pdc through the running extender over HTTP exactly as
#     kube-scheduler (filter, prioritize, bind) and pdc-node (hand-off) drive it,
#   - prints the comparison table, per-verb HTTP latency, and whether pdc over
#     HTTP decided exactly what pdc in-process decided,
#   - stops the extender with SIGTERM,
# and writes CSV/JSON/SVG reports under out/demo.
# Environment: BUILD_DIR (default build), OUT (default out/demo),
# SKIP_DEPS=1 to skip the package check. Extra arguments go to `pdc-sim run`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${SKIP_DEPS:-0}" != 1 ]]; then
  bash scripts/install-deps.sh >&2
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build "$BUILD_DIR" -j "$(nproc)" --target pdc-sim pdc-extender >&2

OUT=${OUT:-out/demo}
start=$(date +%s.%N)
status=0
"$BUILD_DIR/sim/pdc-sim" run sim/scenarios/demo.yaml --out "$OUT" \
  --spawn-extender "$BUILD_DIR/extender/pdc-extender" --no-progress "$@" || status=$?
end=$(date +%s.%N)
echo
echo "Charts: $OUT/same_device.svg (same-device rate per policy over time),"
echo "        $OUT/utilization.svg (devices used by running VMs and held for stopped ones)"
echo "HTTP latency per verb: $OUT/http_latency.csv"
awk -v s="$start" -v e="$end" 'BEGIN { printf "demo finished in %.1f s (after the build)\n", e - s }'
exit "$status"
