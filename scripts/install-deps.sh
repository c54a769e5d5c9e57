#!/usr/bin/env bash
# Installs every Debian 12 package pdc needs to build, test and demo. Idempotent: packages
# already present are skipped by apt-get, and nothing is installed when all are present.
# Used by the README's quick-start commands and by .ci/run.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev rapidjson-dev libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev
  libssl-dev
  # pdc-node's kubelet device plugin: gRPC + protobuf, code generated at build time
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  clang-14
  # tests: deploy checks (promtool, a real Prometheus), QEMU real-kernel vfio test
  prometheus python3 python3-yaml
  qemu-system-x86 busybox-static e2fsprogs bc
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
