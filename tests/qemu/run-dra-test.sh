#!/usr/bin/env bash
# Real-kernel test of pdc-node in DRA mode. Boots the same stock Debian 12
# kernel as run-vfio-test.sh under QEMU/TCG (emulated Intel IOMMU, two
# emulated NVMe controllers: pdc-era, a 16 MiB image holding a pattern at 0
# and 8 MiB, and pdc-mnt, an ext2 image the guest mounts) and runs, inside a
# busybox initramfs, the real pdc-extender (embedded file store: its
# reconcile loop partner) and the real pdc-node with its NVMe class in
# `mode: dra`, and pdc-dra-guest-check (tests/qemu/dra_check.cc), which
# plays kube-apiserver (a minimal fake recording the ResourceSlices and
# serving the ResourceClaims), kubelet (the DRA kubelet double of
# tests/driver) and the scheduler's allocation around them. The programs are
# dynamically linked and copied, with their shared libraries, into the
# initramfs, cached until one of them or /init changes.
#
# Usage: tests/qemu/run-dra-test.sh [BUILD_DIR]
# Environment: PDC_QEMU_WORK (work/cache dir, default BUILD_DIR/qemu-dra),
#   PDC_QEMU_TIMEOUT (seconds for the VM, default 150).
# Exit status 0 only when the guest prints "PDC-DRA-RESULT: PASS" and the
# image of pdc-era holds no pattern after QEMU exited.
set -euo pipefail

# shellcheck source=tests/qemu/qemu-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu-common.sh"
qemu_setup run-dra-test qemu-dra 150 "${1:-}"
trap 'log "FAIL: command at line $LINENO failed"' ERR

qemu_host_packages

qemu_build pdc-extender pdc-node pdc-dra-guest-check
BINS=("$BUILD/extender/pdc-extender" "$BUILD/driver/pdc-node"
      "$BUILD/tests/driver/pdc-dra-guest-check")
for b in "${BINS[@]}"; do [ -x "$b" ] || die "$b was not built"; done

qemu_kernel

# --- Initramfs (cached) -------------------------------------------------------
INIT=$WORK/init.new
{ qemu_init_prologue; cat <<'INIT'; } >"$INIT"
mount -t tmpfs tmpfs /tmp
mkdir -p /var/run && mount -t tmpfs tmpfs /var/run
ip link set lo up
ns_of() {  # The namespace block device of the controller with serial $1.
  for c in /sys/class/nvme/*; do
    read -r s <"$c/serial"
    [ "$s" = "$1" ] && echo "/dev/${c##*/}n1"
  done
}
i=0
while [ "$(ls /sys/class/nvme 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 300 ]; do
  sleep 0.1; i=$((i + 1))
done
mnt=$(ns_of pdc-mnt)
i=0
while [ ! -b "$mnt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p /mnt/a
mount -t ext2 "$mnt" /mnt/a && echo "guest: $mnt (pdc-mnt) mounted at /mnt/a"
mkdir -p /etc/pdc /var/lib/pdc /var/lib/pdc-node /var/lib/kubelet/plugins_registry \
  /var/lib/kubelet/plugins /var/run/cdi /var/run/pdc/dra-metadata
cat >/etc/pdc/kubeconfig <<'KUBECONFIG'
apiVersion: v1
kind: Config
clusters:
- name: guest
  cluster:
    server: http://127.0.0.1:8890
users:
- name: pdc-node
  user:
    token: guest-token
contexts:
- name: guest
  context:
    cluster: guest
    user: pdc-node
current-context: guest
KUBECONFIG
cat >/etc/pdc/pdc.yaml <<'YAML'
logLevel: info
deviceClasses:
  - resourceName: devices.kubevirt.io/nvme
    selectors: ["1b36:0010"]
    mode: dra
extender:
  listen: "127.0.0.1:8888"
  dataDir: /var/lib/pdc
  store: file
  workerThreads: 2
  bindThreads: 2
node:
  nodeName: guest
  extenderURL: "http://127.0.0.1:8888"
  stateDir: /var/lib/pdc-node
  heartbeatInterval: 1s
  metricsListen: ""
  kubeconfig: /etc/pdc/kubeconfig
YAML
/pdc-extender --config=/etc/pdc/pdc.yaml >/tmp/pdc-extender.log 2>&1 &
/pdc-node --config=/etc/pdc/pdc.yaml --device-plugin=false >/tmp/pdc-node.log 2>&1 &
/pdc-dra-guest-check --node=guest --erase=pdc-era --host-used=pdc-mnt
rc=$?
if [ $rc -ne 0 ]; then
  echo "guest: pdc-node log tail:"; tail -n 30 /tmp/pdc-node.log | sed 's/^/  | /'
  echo "guest: kernel log tail:"; dmesg | tail -n 10
fi
echo "guest: pdc-node warnings and errors:"; grep -E "Z [WEC] " /tmp/pdc-node.log | sed 's/^/  | /'
sync
echo "guest: done rc=$rc"
poweroff -f
INIT

qemu_initramfs  # INITRD: busybox, the kernel modules, BINS and their libraries, INIT.

# --- Images -------------------------------------------------------------------
qemu_ext2_image "$WORK/mounted.img" 8M
ERASE_IMG=$WORK/erase.img
PATTERN=PDC-ERASE-PATTERN
rm -f "$ERASE_IMG" && truncate -s 16M "$ERASE_IMG"
for off_mib in 0 8; do
  (yes "$PATTERN" || true) | head -c 1048576 |
    dd of="$ERASE_IMG" bs=1M seek="$off_mib" conv=notrunc status=none
done
[ "$(grep -a -c "$PATTERN" "$ERASE_IMG")" -gt 0 ] || die "could not write the pattern into $ERASE_IMG"

# --- Boot -----------------------------------------------------------------------
log "booting $KV under QEMU (TCG, intel-iommu, 2 NVMe)"
CONSOLE=$WORK/console.log
: >"$CONSOLE"
set +e
timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 \
  -machine q35 -accel tcg -cpu max -smp 1 -m 768M \
  -device intel-iommu,intremap=on \
  -drive if=none,id=de,file="$ERASE_IMG",format=raw \
  -device nvme,drive=de,serial=pdc-era \
  -drive if=none,id=dm,file="$WORK/mounted.img",format=raw \
  -device nvme,drive=dm,serial=pdc-mnt \
  -kernel "$KDIR/boot/vmlinuz-$KV" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 intel_iommu=on iommu=pt quiet loglevel=3" \
  -nodefaults -display none -serial stdio -no-reboot </dev/null >"$CONSOLE" 2>&1
qemu_rc=$?
set -e
grep -E '^(PASS|FAIL|guest|PDC-|  )' "$CONSOLE" | sed 's/\r$//' || true

# The guest's erase reached the image: not one copy of the pattern is left.
left=$(grep -a -c "$PATTERN" "$ERASE_IMG" || true)
if [ "$left" -ne 0 ]; then
  log "FAIL: $ERASE_IMG still holds the pattern ($left lines) after the claim's deletion"
  qemu_verdict "$CONSOLE" PDC-DRA-NEVER "$qemu_rc" "real-kernel DRA-mode test"
fi
log "the image of pdc-era holds no pattern after QEMU exited"
qemu_verdict "$CONSOLE" PDC-DRA-RESULT "$qemu_rc" "real-kernel DRA-mode test"
