#!/usr/bin/env bash
# Real-kernel test of pdc's vfio-pci binding. Boots a stock Debian 12 kernel
# under QEMU software emulation (TCG) with an emulated Intel IOMMU and six
# emulated NVMe controllers, runs the project's own static program
# pdc-vfio-guest-check (tests/qemu/guest_check.cc, linked with pdc_driver)
# inside a busybox initramfs, and checks against the real kernel: discovery
# (vendor, class, IOMMU group, serial), bind to vfio-pci (driver link,
# /dev/vfio/<group>, group viable), second bind is a no-op, restore to nvme,
# refusal for part of a shared IOMMU group (two NVMe behind a
# pcie-pci-bridge), for a group holding a foreign device (pci-testdev), and
# for an NVMe whose namespace is mounted in the guest (ext2 image), and the
# erase before a device goes back: a file-backed NVMe whose image this
# script fills with a pattern is bound to vfio-pci, journaled `erasing`,
# handed to nvme and formatted (Format NVM, SES=1) by pdc's own code; the
# guest reads zeros back and, after QEMU exits, the image holds no pattern.
# And the erase where the drive is: a drive whose image holds the pattern and
# LVM2/ext4 signatures is erased on vfio-pci through pdc's VFIO channel
# (userspace NVMe over the emulated IOMMU), no block device of it appearing
# before the erase is done; after QEMU exits its image holds neither.
#
# Usage: tests/qemu/run-vfio-test.sh [BUILD_DIR]
#   BUILD_DIR (default: $PDC_BUILD_DIR or <repo>/build) is a CMake build tree
#   of this repository; the script builds the pdc-vfio-guest-check target in
#   it (configuring it first when it has no CMakeCache.txt).
# Environment: PDC_QEMU_WORK (work/cache dir, default BUILD_DIR/qemu-vfio),
#   PDC_QEMU_TIMEOUT (seconds for the VM, default 100).
# Host packages it installs when missing (apt-get update first):
#   qemu-system-x86 busybox-static. The kernel .deb is fetched with
#   `apt-get download` and unpacked, never installed.
# Exit status 0 only when the guest prints "PDC-GUEST-RESULT: PASS".
set -euo pipefail

# shellcheck source=tests/qemu/qemu-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu-common.sh"
qemu_setup run-vfio-test qemu-vfio 100 "${1:-}"
trap 'log "FAIL: command at line $LINENO failed"' ERR

# --- 1. Host packages -------------------------------------------------------
qemu_host_packages

# --- 2. The guest program ---------------------------------------------------
qemu_build pdc-vfio-guest-check
GUEST_BIN=$BUILD/tests/driver/pdc-vfio-guest-check
[ -x "$GUEST_BIN" ] || GUEST_BIN=$(find "$BUILD" -path "$WORK" -prune -o \
  -name pdc-vfio-guest-check -type f -perm -u+x -print | head -1)
[ -n "$GUEST_BIN" ] || die "pdc-vfio-guest-check was not built"

# --- 3. Kernel (downloaded, unpacked, cached; never installed) ---------------
qemu_kernel

# --- 4. Initramfs --------------------------------------------------------------
ROOT=$WORK/initramfs
rm -rf "$ROOT" && mkdir -p "$ROOT"/{bin,sbin,proc,sys,dev,tmp,mnt,lib/modules}
cp "$BUSYBOX" "$ROOT/bin/busybox"
ln -s ../bin/busybox "$ROOT/sbin/modprobe"  # The kernel's request_module() helper.
cp -a "$KDIR/lib/modules/$KV" "$ROOT/lib/modules/"
"$BUSYBOX" depmod -b "$ROOT" "$KV"
if command -v strip >/dev/null; then
  strip -o "$ROOT/pdc-vfio-guest-check" "$GUEST_BIN"
else
  cp "$GUEST_BIN" "$ROOT/pdc-vfio-guest-check"
fi
{ qemu_init_prologue; cat <<'INIT'; } >"$ROOT/init"
# nvme probes asynchronously: wait for the controllers and their serials.
i=0
while [ "$(ls /sys/class/nvme 2>/dev/null | wc -l)" -lt 7 ] && [ $i -lt 300 ]; do
  sleep 0.1; i=$((i + 1))
done
mounted=""
for c in /sys/class/nvme/*; do
  read -r s <"$c/serial"
  [ "$s" = pdc-mnt ] && mounted="${c##*/}n1"
done
i=0
while [ -n "$mounted" ] && [ ! -b "/dev/$mounted" ] && [ $i -lt 300 ]; do
  sleep 0.1; i=$((i + 1))
done
if [ -n "$mounted" ] && mount -t ext2 "/dev/$mounted" /mnt; then
  echo "guest: mounted /dev/$mounted (serial pdc-mnt) at /mnt"
else
  echo "guest: could not mount the pdc-mnt namespace ($mounted)"
fi
/pdc-vfio-guest-check --solo=pdc-solo --mounted=pdc-mnt --shared=pdc-sh1,pdc-sh2 \
  --foreign=pdc-foreign --erase=pdc-erase --detached=pdc-det --vfio-erase=pdc-vfioerase
rc=$?
if [ $rc -ne 0 ]; then
  echo "guest: kernel log tail:"
  dmesg | tail -n 40
fi
echo "guest: done rc=$rc"
poweroff -f
INIT
chmod +x "$ROOT/init"
(cd "$ROOT" && find . | "$BUSYBOX" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1 >"$WORK/initrd.gz")

# --- 5. A small ext2 image for the "mounted namespace" case -------------------
IMG=$WORK/mounted.img
qemu_ext2_image "$IMG" 8M

# --- 5b. The drive to erase: 16 MiB, a pattern at 0 and at 8 MiB -------------
ERASE_IMG=$WORK/erase.img
PATTERN=PDC-ERASE-PATTERN
rm -f "$ERASE_IMG" && truncate -s 16M "$ERASE_IMG"
for off_mib in 0 8; do
  (yes "$PATTERN" || true) | head -c 1048576 |
    dd of="$ERASE_IMG" bs=1M seek="$off_mib" conv=notrunc status=none
done
[ "$(grep -a -c "$PATTERN" "$ERASE_IMG")" -gt 0 ] || die "could not write the pattern into $ERASE_IMG"
# 5c. A controller in an NVM subsystem whose only namespace is detached, with
# the pattern: erased, or the erase refused (the guest checks which).
DET_IMG=$WORK/detached.img
rm -f "$DET_IMG" && cp "$ERASE_IMG" "$DET_IMG"

# 5d. The drive erased on vfio-pci: the pattern, an LVM2 label in sector 1 and
# an ext4 superblock magic (what a guest leaves and the host must not parse).
VFIO_ERASE_IMG=$WORK/vfio-erase.img
rm -f "$VFIO_ERASE_IMG" && cp "$ERASE_IMG" "$VFIO_ERASE_IMG"
printf 'LABELONE\001\000\000\000\000\000\000\000\000\000\000\000\040\000\000\000LVM2 001' |
  dd of="$VFIO_ERASE_IMG" bs=1 seek=512 conv=notrunc status=none
printf '\123\357' | dd of="$VFIO_ERASE_IMG" bs=1 seek=1080 conv=notrunc status=none
[ "$(grep -a -c LABELONE "$VFIO_ERASE_IMG")" -gt 0 ] || die "could not write the LVM2 label"

# --- 6. Boot -------------------------------------------------------------------
# pcie.0: pdc-solo and pdc-mnt (a group each); pcie-pci-bridge br1: pdc-sh1 and
# pdc-sh2 (one group with the bridge); pcie-pci-bridge br2: pdc-foreign and a
# pci-testdev (one group, a device no class matches).
null_drive() { echo "if=none,id=$1,driver=null-co,size=64M"; }
log "booting $KV under QEMU (TCG, intel-iommu, 8 NVMe)"
CONSOLE=$WORK/console.log
set +e
timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 \
  -machine q35 -accel tcg -cpu max -smp 1 -m 512M \
  -device intel-iommu,intremap=on \
  -drive "$(null_drive d0)" -device nvme,drive=d0,serial=pdc-solo \
  -drive if=none,id=dm,file="$IMG",format=raw -device nvme,drive=dm,serial=pdc-mnt \
  -drive if=none,id=de,file="$ERASE_IMG",format=raw -device nvme,drive=de,serial=pdc-erase \
  -drive if=none,id=dv,file="$VFIO_ERASE_IMG",format=raw -device nvme,drive=dv,serial=pdc-vfioerase \
  -device nvme-subsys,id=subsys0,nqn=pdc-det \
  -device nvme,serial=pdc-det,subsys=subsys0 \
  -drive if=none,id=dd,file="$DET_IMG",format=raw -device nvme-ns,drive=dd,nsid=1,detached=on \
  -device pcie-pci-bridge,id=br1,bus=pcie.0 \
  -drive "$(null_drive d1)" -device nvme,drive=d1,serial=pdc-sh1,bus=br1,addr=1 \
  -drive "$(null_drive d2)" -device nvme,drive=d2,serial=pdc-sh2,bus=br1,addr=2 \
  -device pcie-pci-bridge,id=br2,bus=pcie.0 \
  -drive "$(null_drive d3)" -device nvme,drive=d3,serial=pdc-foreign,bus=br2,addr=1 \
  -device pci-testdev,bus=br2,addr=2 \
  -kernel "$KDIR/boot/vmlinuz-$KV" -initrd "$WORK/initrd.gz" \
  -append "console=ttyS0 panic=-1 intel_iommu=on iommu=pt quiet loglevel=3" \
  -nodefaults -display none -serial stdio -no-reboot </dev/null 2>&1 |
  tee "$CONSOLE" | grep --line-buffered -E '^(PASS|FAIL|guest|discovery|safety check latency|bind latency|restore latency|erase latency|vfio erase latency|PDC-GUEST-RESULT|  )'
qemu_rc=${PIPESTATUS[0]}
set -e

# The guest's erase reached the image: not one copy of the pattern is left.
left=$(grep -a -c "$PATTERN" "$ERASE_IMG" || true)
if [ "$left" -ne 0 ]; then
  log "FAIL: $ERASE_IMG still holds the pattern ($left lines) after the erase"
  tail -n 30 "$CONSOLE" | sed 's/^/  | /'
  die "the erased drive's image still holds its data"
fi
log "PASS: $ERASE_IMG holds no pattern after the guest's erase"
# The drive erased on vfio-pci: neither the pattern nor the signatures left.
vleft=$(grep -a -c -e "$PATTERN" -e LABELONE "$VFIO_ERASE_IMG" || true)
if [ "$vleft" -ne 0 ]; then
  die "$VFIO_ERASE_IMG (erased on vfio-pci) still holds the pattern or the LVM2 label ($vleft lines)"
fi
log "PASS: $VFIO_ERASE_IMG holds no pattern and no LVM2 label after the erase on vfio-pci"
# The detached namespace: erased (no pattern), or refused and reported so.
det_left=$(grep -a -c "$PATTERN" "$DET_IMG" || true)
if [ "$det_left" -ne 0 ] && ! grep -q "^PASS: refused: the erase stays pending" "$CONSOLE"; then
  die "the detached namespace still holds its data and the erase did not say it refused"
fi
if [ "$det_left" -ne 0 ] && grep -q "^PASS: erased, and namespace 1" "$CONSOLE"; then
  die "the detached namespace was reported erased but its image still holds the pattern"
fi
log "PASS: the detached namespace's image: $([ "$det_left" -eq 0 ] && echo erased || echo "pattern kept, erase refused")"
qemu_verdict "$CONSOLE" PDC-GUEST-RESULT "$qemu_rc" "real-kernel vfio test"
