#!/usr/bin/env bash
# The README's test command: installs dependencies (Debian 12), builds pdc with
# warnings as errors, and runs the whole test suite with ctest. Also runs the
# real-kernel vfio test under QEMU when PDC_QEMU_TEST is not 0.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDC_WERROR=ON
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600

if [ "${PDC_QEMU_TEST:-1}" != "0" ] && [ -x tests/qemu/run-vfio-test.sh ]; then
  bash tests/qemu/run-vfio-test.sh "$BUILD_DIR"
fi
