#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang-14, AddressSanitizer and
# UBSan, and runs each for SECONDS (default 20), starting from its seed
# corpus fuzz/corpus/<name>/, as many at once as there are cores.
# A crash, a leak, a UBSan report, a timeout (10 s per input) or 2 GiB of
# memory fails the run; the input is kept under BUILD_DIR/fuzz-out/<name>/ and
# printed in base64. Once fixed, add it to fuzz/corpus/<name>/: ctest
# fuzz_corpus_<name> then replays it in every build.
# Usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
each=${1:-20}
build=${2:-build-fuzz}

# A build directory already configured with PDC_FUZZ=ON (CI's sanitizer
# stage: the suite and the fuzzers share one clang build) is used as it is;
# otherwise one is configured with the fuzzers only.
if ! grep -q '^PDC_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DPDC_FUZZ=ON -DPDC_SANITIZE=address,undefined \
    -DPDC_UNITY_BUILD=ON -DPDC_BUILD_TESTS=OFF -DPDC_BUILD_BENCHMARKS=OFF >/dev/null
fi
cmake --build "$build" --target fuzzers -j "$(nproc)"

out=$build/fuzz-out
rm -rf "$out" && mkdir -p "$out"
run_one() {
  local bin=$1 each=$2 out=$3
  local name=${bin##*/fuzz_}
  local work=$out/$name
  mkdir -p "$work/corpus"
  cp fuzz/corpus/"$name"/* "$work/corpus/"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$bin" -max_total_time="$each" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" >"$work/log" 2>&1; then
    echo "fuzz $name: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" |
      grep -o '[0-9]*$') inputs in ${each}s, no failure"
    return 0
  fi
  echo "fuzz $name: FAILED"
  tail -n 40 "$work/log"
  for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -f "$a" ] && { echo "input $a (base64):"; base64 -w 0 "$a"; echo; }
  done
  return 1
}
export -f run_one
status=0
ls "$build"/fuzz/fuzz_* | xargs -P "$(nproc)" -I{} bash -c 'run_one "$@"' _ {} "$each" "$out" ||
  status=1
exit $status
