#!/usr/bin/env bash
# clang-14's thread-safety analysis (-Wthread-safety -Werror) over pdc's
# product code, without generating code: every translation unit of the
# annotated folders is compiled with -fsyntax-only, as many at once as there
# are cores. The analysis runs in clang's semantic pass, so nothing is lost
# against a full build; what is saved is code generation and linking.
# Usage: scripts/thread-safety.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsa}

# Configured, and only the generated headers built (the gRPC code of
# pdc-node's kubelet APIs): the compile commands are what is wanted.
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 \
  -DPDC_THREAD_SAFETY=ON -DPDC_WERROR=ON -DPDC_BUILD_TESTS=OFF -DPDC_BUILD_BENCHMARKS=OFF \
  >/dev/null
mapfile -t generated < <(ninja -C "$build" -t targets all | grep -o '^[^:]*\.pb\.h' || true)
if [ "${#generated[@]}" -gt 0 ]; then ninja -C "$build" "${generated[@]}" >/dev/null; fi

python3 - "$build" "$(nproc)" <<'EOF'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

build, jobs = sys.argv[1], int(sys.argv[2])
repo = os.getcwd()
FOLDERS = ("common", "model", "allocator", "config", "api", "net", "kube", "extender", "driver",
           "sim", "pdcctl")
entries = []
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    rel = os.path.relpath(e["file"], repo)
    top = rel.split("/")[0]
    if top not in FOLDERS:
        continue
    args = shlex.split(e["command"])
    # Drop the output: -o FILE and the dependency file options.
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = 1
            continue
        if a in ("-MD", "-MMD", "-c"):
            continue
        out.append(a)
    entries.append((rel, e["directory"], out + ["-fsyntax-only"]))

def check(entry):
    rel, cwd, cmd = entry
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return rel, p.returncode, p.stderr

failed = 0
with ThreadPoolExecutor(max_workers=jobs) as pool:
    for rel, rc, err in pool.map(check, sorted(entries)):
        if rc != 0:
            failed += 1
            print(f"thread-safety: {rel}: FAILED\n{err}", flush=True)
print(f"thread-safety: {len(entries)} translation units checked, {failed} failed")
sys.exit(1 if failed else 0)
EOF
