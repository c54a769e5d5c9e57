#!/usr/bin/env bash
# The README's main command: installs dependencies (Debian 12), builds pdc-sim,
# and replays the `demo` scenario through three policies side by side —
# KubeVirt's device plugin today, DRA (Kubernetes >= 1.31), and pdc through
# its real allocator core on the embedded default store — printing the
# comparison table and writing CSV/JSON/SVG reports under out/demo.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh >&2

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build "$BUILD_DIR" -j "$(nproc)" --target pdc-sim >&2

OUT=${OUT:-out/demo}
"$BUILD_DIR/sim/pdc-sim" run sim/scenarios/demo.yaml --out "$OUT" "$@"
echo
echo "Charts: $OUT/same_device.svg (same-device rate per policy over time), $OUT/utilization.svg"
