#!/usr/bin/env bash
# Runs the README's quick start as a new user would, on a fresh Debian 12: debootstraps a minimal
# bookworm root (--variant=minbase, then only git and ca-certificates), clones this repository's
# committed HEAD into it, and runs both README commands inside it (chroot), in order:
#   bash scripts/demo.sh
#   bash scripts/test.sh
# Run it after changing dependencies: a green CI on a build machine proves nothing about programs
# the build machine happens to have. Needs root, debootstrap (scripts/install-deps.sh installs
# it) and the network access apt has; uses the Debian mirror this machine's apt is configured
# with. Takes about as long as a package install, a build and the test suite.
#
# Usage: scripts/fresh-machine-check.sh [WORK_DIR]
#   WORK_DIR (default: a new directory under /var/tmp) holds the root; it is removed at the end
#   unless KEEP_ROOT=1. Environment: PDC_QEMU_TEST=0 skips the QEMU stage inside.
# Output: each command's last lines and its exit status; exit status 0 only when both pass.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null ||
  { echo "fresh-machine-check: debootstrap missing: run scripts/install-deps.sh" >&2; exit 1; }

WORK=${1:-$(mktemp -d /var/tmp/pdc-fresh.XXXXXX)}
ROOT=$WORK/root
mkdir -p "$ROOT"
START=$(date +%s)
log() { echo "[fresh-machine-check $(( $(date +%s) - START ))s] $*"; }

mounted=()
cleanup() {
  local i
  for (( i=${#mounted[@]}-1; i>=0; i-- )); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [ "${KEEP_ROOT:-0}" != 1 ]; then rm -rf "$WORK"; else log "root kept in $ROOT"; fi
}
trap cleanup EXIT

# The mirror apt uses here (deb822 sources first, then the one-line format).
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources \
           2>/dev/null | head -1)
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ { print $2; exit }' \
             /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "fresh-machine-check: no Debian mirror in this machine's apt sources" >&2; exit 1; }

log "debootstrap --variant=minbase bookworm into $ROOT"
debootstrap --variant=minbase bookworm "$ROOT" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -20 "$WORK/debootstrap.log"; exit 1; }
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$ROOT/$m"
  mounted+=("$ROOT/$m")
done
mount -t tmpfs tmpfs "$ROOT/tmp" && mounted+=("$ROOT/tmp")

in_root() { chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
              PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
              PDC_QEMU_TEST="${PDC_QEMU_TEST:-1}" "$@"; }

log "apt-get install git ca-certificates"
in_root apt-get update -q >"$WORK/apt.log" 2>&1
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  git ca-certificates >>"$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log"; exit 1; }
# The CAs this machine's administrator added (a network with a TLS-inspecting proxy has one):
# a new machine on the same network gets them the same way, or it reaches no HTTPS registry.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  in_root update-ca-certificates >>"$WORK/apt.log" 2>&1
  log "added this machine's local CA certificates: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi

log "clone of $(git -C "$REPO" rev-parse --short HEAD) ($(git -C "$REPO" log -1 --format=%s | cut -c1-60))"
git clone -q --bare "$REPO" "$ROOT/root/pdc.git"
in_root git clone -q /root/pdc.git /root/pdc

status=0
for cmd in "bash scripts/demo.sh" "bash scripts/test.sh"; do
  log "running: $cmd"
  t0=$(date +%s)
  rc=0
  out="$WORK/$(basename "${cmd##* }" .sh).log"
  in_root bash -c "cd /root/pdc && $cmd" >"$out" 2>&1 || rc=$?
  tail -n 12 "$out" | sed 's/^/    /'
  log "$cmd: exit $rc after $(( $(date +%s) - t0 ))s"
  [ "$rc" -eq 0 ] || status=1
done
if [ "$status" -eq 0 ]; then log "PASS: both README commands work on a fresh Debian 12"; else
  log "FAIL: see the output above (logs in $WORK when KEEP_ROOT=1)"; fi
exit "$status"
