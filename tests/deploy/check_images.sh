#!/usr/bin/env bash
# Keeps deploy/images/Dockerfile consistent with the real build (no Docker
# engine needed):
#   - the CMake targets it builds are pdc-extender, pdc-node and pdcctl, and
#     the paths it copies are where this build tree puts them;
#   - its runtime stage installs every Debian package that provides a shared
#     library the built binaries load (ldd + dpkg -S), and each of those
#     package names is a real Debian 12 package installed here.
#   tests/deploy/check_images.sh REPO BUILD_DIR PDC_EXTENDER PDC_NODE PDCCTL
# Exit 77 (ctest SKIP) when a binary target is not built.
set -euo pipefail
repo="$1"; build="$2"; shift 2
bins=("$@")
for b in "${bins[@]}"; do
  if [[ -z "${b}" || ! -x "${b}" ]]; then
    echo "check_images: SKIP: binary target not built: '${b}' (needs pdc-extender, pdc-node, pdcctl)"
    exit 77
  fi
done
dockerfile="${repo}/deploy/images/Dockerfile"
fail=0
err() { echo "FAIL: $*"; fail=1; }

# 1. Targets and copied paths.
grep -q 'bash scripts/install-deps.sh' "${dockerfile}" || err "build stage must run scripts/install-deps.sh"
targets="$(grep -E '^\s*(RUN|&&)?\s*.*cmake --build' "${dockerfile}" | grep -o -- '--target [a-z -]*' \
  | head -1 | sed 's/--target //; s/ *$//')"
[[ "${targets}" == "pdc-extender pdc-node pdcctl" ]] || err "Dockerfile builds '${targets}'"
for b in "${bins[@]}"; do
  rel="${b#"${build}"/}"
  grep -q "/build/${rel}" "${dockerfile}" || err "Dockerfile does not copy /build/${rel}"
done
for stage in build runtime extender node; do
  grep -qE "^FROM .* AS ${stage}$" "${dockerfile}" || err "no stage '${stage}'"
done
grep -q '^ARG DEBIAN=debian:12-slim$' "${dockerfile}" || err "base image must be debian:12-slim"

# 2. Runtime packages: what the stage installs vs what the binaries load.
listed="$(sed -n '/AS runtime/,/^FROM/p' "${dockerfile}" \
  | grep -oE '^\s+(lib[a-z0-9.+-]+|ca-certificates)' | tr -d ' ' | sort -u)"
[[ -n "${listed}" ]] || err "no runtime packages found in the Dockerfile"
needed=""
# Unique libraries of all binaries, looked up with one dpkg -S (it is slow).
mapfile -t libs < <(for b in "${bins[@]}"; do ldd "${b}" | awk '/=> \//{print $3}'; done | sort -u)
paths=()
for lib in "${libs[@]}"; do paths+=("${lib}" "$(readlink -f "${lib}")"); done
owners="$(dpkg -S "${paths[@]}" 2>/dev/null || true)"
for lib in "${libs[@]}"; do
  real="$(readlink -f "${lib}")"
  pkg="$(awk -v a="${lib}" -v b="${real}" -F': ' '$2 == a || $2 == b {print $1; exit}' <<<"${owners}")"
  pkg="${pkg%%:*}"
  [[ -n "${pkg}" ]] || { err "the binaries load ${lib}, owned by no package"; continue; }
  needed+="${pkg}"$'\n'
done
needed="$(sort -u <<<"${needed}" | sed '/^$/d')"
# Libraries of the essential set that every debian:12-slim image has.
base=" libc6 libgcc-s1 zlib1g libzstd1 liblzma5 libbz2-1.0 libcrypt1 libselinux1 \
libpcre2-8-0 libgnutls30 libgmp10 libsystemd0 libgcrypt20 libgpg-error0 liblz4-1 libtinfo6 "
for pkg in ${needed}; do
  if [[ "${base}" == *" ${pkg} "* ]]; then continue; fi
  grep -qx "${pkg}" <<<"${listed}" || err "runtime stage lacks ${pkg} (needed by the binaries)"
done
for pkg in ${listed}; do
  dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q 'install ok installed' \
    || err "runtime package ${pkg} is not the installed Debian 12 package"
done
echo "check_images: binaries need: $(tr '\n' ' ' <<<"${needed}")"
echo "check_images: runtime stage installs: $(tr '\n' ' ' <<<"${listed}")"
if [[ ${fail} -ne 0 ]]; then exit 1; fi
echo "check_images: OK"
