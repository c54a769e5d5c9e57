#!/usr/bin/env bash
# Soak run of the allocator crash test: many SIGKILL/recover cycles of the
# file store under the real allocator (tests/allocator/crash_test.cc).
#
#   scripts/soak-crash.sh [build-dir]        # default build dir: ./build
#   PDC_CRASH_CYCLES=2000 scripts/soak-crash.sh build-store
#   PDC_CRASH_SEED=1234 scripts/soak-crash.sh   # replay a failing seed
#   PDC_SOAK_RUNS=10 ...                      # repeat with fresh seeds
#
# Put TMPDIR on the filesystem you want to test (the data directory lives
# there); the default is /tmp.
set -euo pipefail

build_dir="${1:-build}"
bin="${build_dir}/tests/allocator/allocator_crash_test"
export PDC_CRASH_CYCLES="${PDC_CRASH_CYCLES:-1000}"
runs="${PDC_SOAK_RUNS:-1}"

if [[ ! -x "${bin}" ]]; then
  echo "soak-crash: ${bin} not found; build it first:" >&2
  echo "  cmake -S . -B ${build_dir} -G Ninja && ninja -C ${build_dir} allocator_crash_test" >&2
  exit 2
fi

for ((run = 1; run <= runs; run++)); do
  echo "soak-crash: run ${run}/${runs}, ${PDC_CRASH_CYCLES} cycles"
  # The test prints its seed first; a failure names the cycle.
  "${bin}" --gtest_brief=1
done
echo "soak-crash: all ${runs} run(s) passed"
