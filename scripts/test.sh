#!/usr/bin/env bash
# The README's test command: installs dependencies (Debian 12), builds pdc with
# warnings as errors, and runs the whole test suite with ctest. Also runs the
# real-kernel tests under QEMU (the vfio binding, the whole node path with
# the real daemons, and pdc-node in DRA mode) when PDC_QEMU_TEST is not 0.
#
# The build and the tests run with Debian's default PATH, so a program that
# this machine has somewhere else (/usr/local, a version manager's shims) is not
# picked up by accident: every program the tests run comes from
# scripts/install-deps.sh. With PDC_EXEC_TRACE=PREFIX set (.ci/run sets it),
# the tests run under strace and PREFIX.ctest, PREFIX.qemu, PREFIX.qemu-daemon and PREFIX.qemu-dra record every
# program they execute, for scripts/check-exec-deps.py.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# The benchmarks are not built here (PDC_BUILD_BENCHMARKS=ON builds them; CI
# builds them in a stage of their own). A build from scratch, made to be
# quick: unity batches (PDC_UNITY_BUILD), the product code at -O2 with line
# tables only (-g1: file and line in every backtrace and sanitizer report, no
# variables for gdb) and not compressed; the tests at -O1 -g1 as always.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDC_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DPDC_COMPRESS_DEBUG_INFO=OFF \
  -DPDC_UNITY_BUILD=ON \
  -DPDC_BUILD_BENCHMARKS="${PDC_BUILD_BENCHMARKS:-OFF}" -DPython3_EXECUTABLE=/usr/bin/python3
cmake --build "$BUILD_DIR" -j "$JOBS"

# `traced NAME command...`: runs the command, under strace when tracing.
traced() {
  local name=$1; shift
  if [ -n "${PDC_EXEC_TRACE:-}" ]; then
    strace -f --seccomp-bpf -qq -e trace=execve,execveat -e signal=none \
      -o "$PDC_EXEC_TRACE.$name" "$@"
  else
    "$@"
  fi
}

# Most test cases wait (on etcd, a server, a child process) more than they
# compute: twice as many at once as there are cores keeps the cores busy.
traced ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${CTEST_JOBS:-$((2 * JOBS))}" \
  --timeout 600

if [ "${PDC_QEMU_TEST:-1}" != "0" ] && [ -x tests/qemu/run-vfio-test.sh ]; then
  traced qemu bash tests/qemu/run-vfio-test.sh "$BUILD_DIR"
  traced qemu-daemon bash tests/qemu/run-daemon-test.sh "$BUILD_DIR"
  traced qemu-dra bash tests/qemu/run-dra-test.sh "$BUILD_DIR"
fi
