#!/usr/bin/env bash
# Real-kernel test of pdc's whole node path. Boots the same stock Debian 12
# kernel as run-vfio-test.sh under QEMU/TCG (emulated Intel IOMMU, twelve
# emulated NVMe controllers, two of them behind hot-pluggable
# pcie-root-ports, three more hot-plugged later) and runs, inside a busybox initramfs, the real daemons on
# loopback: pdc-extender (embedded file store) and pdc-node (reconcile loop,
# bind journal, device plugin), both from one config file the guest's /init
# writes, and pdc-daemon-guest-check (tests/qemu/daemon_check.cc), which
# plays kube-scheduler and kubelet (the kubelet double of tests/driver) around
# them. The daemons are dynamically linked: they, the guest program and
# their shared libraries (with the dynamic loader) are copied into the
# initramfs, which is cached until one of them or /init changes.
# When the guest prints "PDC-HOST-ACTION: unplug" this script removes the
# claimed controller through QEMU's monitor (device_del); on
# "PDC-HOST-ACTION: plug" it adds the same drive with the same serial on
# another root port (device_add): a PCI renumbering under a running node;
# on "PDC-HOST-ACTION: plug-other", before that, it adds another drive
# (serial pdc-swap) into the vacated slot. Likewise "unplug-part",
# "plug-host2" and "plug-part" renumber the drive whose erase is pending and
# put the host's drive (serial pdc-host2, content PDC-HOST-CONTENT, checked in
# its image afterwards) into its slot.
# Afterwards it checks the images of two Delete-policy drives holding a
# pattern: pdc-rb (back on nvme as after a node reboot) must hold none, and
# pdc-det's detached namespace none unless the guest saw its erase refused.
#
# Usage: tests/qemu/run-daemon-test.sh [BUILD_DIR]
#   BUILD_DIR (default: $PDC_BUILD_DIR or <repo>/build) is a CMake build tree
#   of this repository; the script builds pdc-extender, pdc-node and
#   pdc-daemon-guest-check in it.
# Environment: PDC_QEMU_WORK (work/cache dir, default BUILD_DIR/qemu-daemon),
#   PDC_QEMU_TIMEOUT (seconds for the VM, default 240).
# Exit status 0 only when the guest prints "PDC-DAEMON-RESULT: PASS".
set -euo pipefail

# shellcheck source=tests/qemu/qemu-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu-common.sh"
qemu_setup run-daemon-test qemu-daemon 240 "${1:-}"
trap 'log "FAIL: command at line $LINENO failed"' ERR

qemu_host_packages
command -v python3 >/dev/null || die "python3 is needed to drive QEMU's monitor"

# --- The programs ---------------------------------------------------------------
qemu_build pdc-extender pdc-node pdc-daemon-guest-check
BINS=("$BUILD/extender/pdc-extender" "$BUILD/driver/pdc-node"
      "$BUILD/tests/driver/pdc-daemon-guest-check")
for b in "${BINS[@]}"; do [ -x "$b" ] || die "$b was not built"; done

qemu_kernel

# --- Initramfs (cached: rebuilt when a program, a library or /init changes) ----
INIT=$WORK/init.new
{ qemu_init_prologue; cat <<'INIT'; } >"$INIT"
mount -t tmpfs tmpfs /tmp
ip link set lo up
modprobe uio_pci_generic || echo "guest: modprobe uio_pci_generic failed"
addr_of() {  # The PCI address of the controller with serial $1.
  for c in /sys/class/nvme/*; do
    read -r s <"$c/serial"
    [ "$s" = "$1" ] && basename "$(readlink -f "$c/device")"
  done
}
# move_to ADDR DRIVER: binds the function at ADDR to DRIVER by hand.
move_to() {
  echo "$2" >"/sys/bus/pci/devices/$1/driver_override"
  echo "$1" >"/sys/bus/pci/devices/$1/driver/unbind"
  echo "$1" >/sys/bus/pci/drivers_probe
  [ "$(basename "$(readlink -f "/sys/bus/pci/devices/$1/driver")")" = "$2" ] &&
    echo "guest: $1 bound to $2 by hand"
}
ns_of() {  # The namespace block device of the controller with serial $1.
  for c in /sys/class/nvme/*; do
    read -r s <"$c/serial"
    [ "$s" = "$1" ] && echo "/dev/${c##*/}n1"
  done
}
i=0
while [ "$(ls /sys/class/nvme 2>/dev/null | wc -l)" -lt 12 ] && [ $i -lt 300 ]; do
  sleep 0.1; i=$((i + 1))
done
mnt=$(ns_of pdc-mnt); lp=$(ns_of pdc-loop)
i=0
while { [ ! -b "$mnt" ] || [ ! -b "$lp" ]; } && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p /mnt/a /mnt/b
mount -t ext2 "$mnt" /mnt/a && echo "guest: $mnt (pdc-mnt) mounted at /mnt/a"
if mount -t ext2 "$lp" /mnt/b && dd if=/dev/zero of=/mnt/b/loop.img bs=1M count=1 2>/dev/null &&
    losetup /dev/loop0 /mnt/b/loop.img; then
  echo "guest: /dev/loop0 over /mnt/b/loop.img on $lp (pdc-loop)"
fi
uio=$(addr_of pdc-uio); hand=$(addr_of pdc-hand)
move_to "$uio" uio_pci_generic
move_to "$hand" vfio-pci
mkdir -p /etc/pdc /var/lib/pdc /var/lib/pdc-node /var/lib/kubelet/device-plugins
cat >/etc/pdc/pdc.yaml <<'YAML'
logLevel: info
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
  metricsListen: "127.0.0.1:9100"
  # pdc-det's controller is in an NVM subsystem (CMIC: more than one
  # controller may share it); offered so that its erase is exercised.
  allowSharedNvme: true
YAML
/pdc-extender --config=/etc/pdc/pdc.yaml >/tmp/pdc-extender.log 2>&1 &
/pdc-node --config=/etc/pdc/pdc.yaml >/tmp/pdc-node.log 2>&1 &
echo $! >/tmp/pdc-node.pid
/pdc-daemon-guest-check --node=guest --vm=pdc-vm --exclusive=pdc-excl \
  --host-used=pdc-mnt:mounted --host-used=pdc-loop:backs-a-loop-device \
  --host-used=pdc-md:an-unassembled-md-member --host-used=pdc-lvm:an-inactive-LVM-PV \
  --uio="$uio" --hand-vfio="$hand" --partitioned=pdc-part --move \
  --rebooted=pdc-rb --detached=pdc-det --journal-lost=pdc-lost
rc=$?
if [ $rc -ne 0 ]; then
  echo "guest: pdc-node log tail:"; tail -n 25 /tmp/pdc-node.log | sed 's/^/  | /'
  echo "guest: pdc-extender log tail:"; tail -n 15 /tmp/pdc-extender.log | sed 's/^/  | /'
  echo "guest: kernel log tail:"; dmesg | tail -n 15
fi
echo "guest: pdc-node warnings and errors:"; grep -E "Z [WEC] " /tmp/pdc-node.log | sed 's/^/  | /'
echo "guest: pdc-extender warnings and errors:"; grep -E "Z [WEC] " /tmp/pdc-extender.log | sed 's/^/  | /'
echo "guest: done rc=$rc"
poweroff -f
INIT

qemu_initramfs  # INITRD: busybox, the kernel modules, BINS and their libraries, INIT.

qemu_ext2_image "$WORK/mounted.img" 8M
qemu_ext2_image "$WORK/loopfs.img" 8M
# An md RAID member (superblock 1.2: magic a92b4efc, little-endian, at 4 KiB)
# and an LVM2 physical volume (label "LABELONE" in sector 1, type "LVM2 001"),
# neither assembled nor active; and an empty drive its claim's guest will
# partition.
# The host's drive plugged into the slot of a drive whose erase is pending
# holds a pattern it must keep.
for img in md lvm part host2; do rm -f "$WORK/$img.img" && truncate -s 8M "$WORK/$img.img"; done
printf 'PDC-HOST-CONTENT' | dd of="$WORK/host2.img" conv=notrunc status=none
printf '\xfc\x4e\x2b\xa9\x01\x00\x00\x00' |
  dd of="$WORK/md.img" bs=1 seek=4096 conv=notrunc status=none
{ printf 'LABELONE\x01\x00\x00\x00\x00\x00\x00\x00'; printf '\x00%.0s' 1 2 3 4 5 6 7 8
  printf 'LVM2 001'; } | dd of="$WORK/lvm.img" bs=1 seek=512 conv=notrunc status=none

# Drives of Delete-policy claims whose guest data is a pattern at 0 and 8
# MiB: one comes back to nvme as after a node reboot (must be erased), one
# after a reboot that lost pdc-node's journal (held, never free); and the
# only namespace of an NVM subsystem's controller, detached (erased or the
# erase refused, never reported done with the pattern there).
pattern_image() {  # PATH PATTERN
  rm -f "$1" && truncate -s 16M "$1"
  for off_mib in 0 8; do
    (yes "$2" || true) | head -c 1048576 | dd of="$1" bs=1M seek="$off_mib" conv=notrunc status=none
  done
  [ "$(grep -a -c "$2" "$1")" -gt 0 ] || die "could not write $2 into $1"
}
pattern_image "$WORK/reboot.img" PDC-REBOOT-PATTERN
pattern_image "$WORK/lost.img" PDC-LOST-PATTERN
pattern_image "$WORK/detached.img" PDC-DETACHED-PATTERN

# --- QEMU's monitor ---------------------------------------------------------------
MON=$WORK/monitor.sock
# hmp COMMAND: one human monitor command; prints QEMU's answer.
hmp() {
  python3 - "$MON" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
def until_prompt():
    data = b""
    while not data.endswith(b"(qemu) "):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")
until_prompt()
s.sendall(sys.argv[2].encode() + b"\n")
out = until_prompt()
# The answer follows the echoed command line and precedes the next prompt.
lines = [l for l in out.replace("\r", "").split("\n")[1:] if l and not l.startswith("(qemu)")]
print("\n".join(l for l in lines if sys.argv[2] not in l))
PY
}
# on_action unplug|plug: the host's part of the renumbering.
on_action() {
  case "$1" in
    unplug)
      log "device_del vm-nvme (the claimed controller on root port rp1)"
      local said
      said=$(hmp "device_del vm-nvme")
      [ -z "$said" ] || log "device_del: $said" ;;
    plug-other)
      local said
      said=$(hmp "device_add nvme,id=other-nvme,drive=do,serial=pdc-swap,bus=rp1")
      [ -z "$said" ] || log "device_add other-nvme: $said"
      log "device_add other-nvme (another drive, serial pdc-swap) on root port rp1" ;;
    plug)
      # The drive is free once the guest let go of the old device (it waited
      # for that); retry briefly in case QEMU finishes the removal late.
      local out i
      for i in $(seq 1 20); do
        out=$(hmp "device_add nvme,id=vm-nvme-2,drive=dv,serial=pdc-vm,bus=rp2")
        [ -z "$out" ] && break
        log "device_add: $out (retrying)"
        sleep 0.5
      done
      log "device_add vm-nvme-2 (same drive, same serial) on root port rp2" ;;
    unplug-part)
      local said
      said=$(hmp "device_del part-nvme")
      [ -z "$said" ] || log "device_del part-nvme: $said"
      log "device_del part-nvme (its erase pending) on root port rp3" ;;
    plug-host2)
      local said
      said=$(hmp "device_add nvme,id=host2-nvme,drive=dh2,serial=pdc-host2,bus=rp3")
      [ -z "$said" ] || log "device_add host2-nvme: $said"
      log "device_add host2-nvme (the host's drive, serial pdc-host2) on root port rp3" ;;
    plug-part)
      local out
      for _ in $(seq 1 20); do
        out=$(hmp "device_add nvme,id=part-nvme-2,drive=dp,serial=pdc-part,bus=rp4")
        [ -z "$out" ] && break
        log "device_add: $out (retrying)"
        sleep 0.5
      done
      log "device_add part-nvme-2 (same drive, same serial) on root port rp4" ;;
  esac
}

# --- Boot -----------------------------------------------------------------------
log "booting $KV under QEMU (TCG, intel-iommu, 12 NVMe, 4 root ports)"
CONSOLE=$WORK/console.log
: >"$CONSOLE"
rm -f "$MON"
timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 \
  -machine q35 -accel tcg -cpu max -smp 1 -m 768M \
  -device intel-iommu,intremap=on \
  -device pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1 \
  -device pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2 \
  -blockdev driver=null-co,node-name=dv,size=67108864 \
  -blockdev driver=null-co,node-name=do,size=67108864 \
  -device nvme,id=vm-nvme,drive=dv,serial=pdc-vm,bus=rp1 \
  -drive if=none,id=dm,file="$WORK/mounted.img",format=raw \
  -device nvme,drive=dm,serial=pdc-mnt \
  -drive if=none,id=dl,file="$WORK/loopfs.img",format=raw \
  -device nvme,drive=dl,serial=pdc-loop \
  -drive if=none,id=dx,driver=null-co,size=64M -device nvme,drive=dx,serial=pdc-excl \
  -drive if=none,id=dmd,file="$WORK/md.img",format=raw -device nvme,drive=dmd,serial=pdc-md \
  -drive if=none,id=dlv,file="$WORK/lvm.img",format=raw -device nvme,drive=dlv,serial=pdc-lvm \
  -device pcie-root-port,id=rp3,bus=pcie.0,chassis=3,slot=3 \
  -device pcie-root-port,id=rp4,bus=pcie.0,chassis=4,slot=4 \
  -blockdev driver=raw,node-name=dp,file.driver=file,file.filename="$WORK/part.img" \
  -blockdev driver=raw,node-name=dh2,file.driver=file,file.filename="$WORK/host2.img" \
  -device nvme,id=part-nvme,drive=dp,serial=pdc-part,bus=rp3 \
  -drive if=none,id=du,driver=null-co,size=64M -device nvme,drive=du,serial=pdc-uio \
  -drive if=none,id=dh,driver=null-co,size=64M -device nvme,drive=dh,serial=pdc-hand \
  -drive if=none,id=drb,file="$WORK/reboot.img",format=raw -device nvme,drive=drb,serial=pdc-rb \
  -drive if=none,id=dls,file="$WORK/lost.img",format=raw -device nvme,drive=dls,serial=pdc-lost \
  -device nvme-subsys,id=subsys0,nqn=pdc-det \
  -device nvme,serial=pdc-det,subsys=subsys0 \
  -drive if=none,id=dd,file="$WORK/detached.img",format=raw \
  -device nvme-ns,drive=dd,nsid=1,detached=on,shared=off \
  -kernel "$KDIR/boot/vmlinuz-$KV" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 intel_iommu=on iommu=pt quiet loglevel=3" \
  -monitor "unix:$MON,server,nowait" \
  -nodefaults -display none -serial stdio -no-reboot </dev/null >"$CONSOLE" 2>&1 &
QPID=$!
set +e
while IFS= read -r line; do
  line=${line%$'\r'}
  case "$line" in
    PDC-HOST-ACTION:*) on_action "${line#PDC-HOST-ACTION: }" ;;
    PASS*|FAIL*|guest*|PDC-*|"  "*) printf '%s\n' "$line" ;;
  esac
done < <(tail -n +1 -F --pid="$QPID" "$CONSOLE" 2>/dev/null)
wait "$QPID"
qemu_rc=$?
set -e

# The host's drive that took the slot of a drive with a pending erase was
# formatted by no one.
if ! grep -q "^PDC-DAEMON-RESULT: FAIL" "$CONSOLE" &&
    [ "$(head -c 16 "$WORK/host2.img")" != "PDC-HOST-CONTENT" ]; then
  die "host2.img (the host's drive, serial pdc-host2) lost its content"
fi
# The drive that came back to nvme by a reboot was erased before it was
# offered; the detached namespace was erased, or its erase refused and never
# reported done.
if ! grep -q "^PDC-DAEMON-RESULT: FAIL" "$CONSOLE"; then
  left=$(grep -a -c PDC-REBOOT-PATTERN "$WORK/reboot.img" || true)
  [ "$left" -eq 0 ] || die "reboot.img (pdc-rb, its claim deleted, back on nvme by a reboot) still holds its pattern ($left lines)"
  log "PASS: reboot.img (pdc-rb) holds no pattern"
  det_left=$(grep -a -c PDC-DETACHED-PATTERN "$WORK/detached.img" || true)
  if [ "$det_left" -ne 0 ] && grep -q "^PASS: erased: the detached namespace" "$CONSOLE"; then
    die "pdc-det was reported erased but detached.img still holds its pattern ($det_left lines)"
  fi
  if [ "$det_left" -ne 0 ] && ! grep -q "^PASS: refused: the detached-namespace erase" "$CONSOLE"; then
    die "detached.img (pdc-det) still holds its pattern and the erase did not say it refused"
  fi
  log "PASS: detached.img (pdc-det): $([ "$det_left" -eq 0 ] && echo erased || echo "pattern kept, erase refused")"
fi
qemu_verdict "$CONSOLE" PDC-DAEMON-RESULT "$qemu_rc" "real-kernel whole-node test"
