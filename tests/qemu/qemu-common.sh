# Shared by the real-kernel tests (run-vfio-test.sh, run-daemon-test.sh,
# run-dra-test.sh):
# the set-up, host packages, the cached Debian kernel, small images, the
# build and the verdict. Sourced, not run.

# qemu_setup NAME WORK_SUBDIR DEFAULT_TIMEOUT [BUILD_DIR]: sets REPO, BUILD,
# WORK ($PDC_QEMU_WORK or BUILD/WORK_SUBDIR), VM_TIMEOUT ($PDC_QEMU_TIMEOUT or
# the default), START, and log/die that print "[NAME <seconds>s] ...".
qemu_setup() {
  QEMU_TEST_NAME=$1
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  BUILD=${4:-${PDC_BUILD_DIR:-$REPO/build}}
  BUILD=$(mkdir -p "$BUILD" && cd "$BUILD" && pwd)
  WORK=${PDC_QEMU_WORK:-$BUILD/$2}
  VM_TIMEOUT=${PDC_QEMU_TIMEOUT:-$3}
  START=$(date +%s.%N)
  mkdir -p "$WORK"
}
log() {
  if command -v bc >/dev/null; then
    printf '[%s %5.1fs] %s\n' "$QEMU_TEST_NAME" "$(echo "$(date +%s.%N) - $START" | bc)" "$*"
  else
    printf '[%s] %s\n' "$QEMU_TEST_NAME" "$*"
  fi
}
die() { log "FAIL: $*"; exit 1; }

# qemu_build TARGET...: configures BUILD when it has no CMakeCache.txt, then
# builds the targets.
qemu_build() {
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    log "configuring $BUILD"
    cmake -S "$REPO" -B "$BUILD" -G Ninja >"$WORK/build.log" 2>&1 ||
      { tail -n 40 "$WORK/build.log"; die "configuring $BUILD failed"; }
  fi
  log "building $*"
  cmake --build "$BUILD" --target "$@" >"$WORK/build.log" 2>&1 ||
    { tail -n 40 "$WORK/build.log"; die "building $* failed"; }
}

# qemu_verdict CONSOLE MARKER QEMU_RC WHAT: exits 0 when the console has
# "MARKER: PASS", else prints why and the console's tail and exits 1.
qemu_verdict() {
  if grep -q "^$2: PASS" "$1"; then
    log "PASS: $4 ($(grep -c '^PASS:' "$1") checks); console log: $1"
    exit 0
  fi
  [ "$3" -eq 124 ] && log "QEMU timed out after ${VM_TIMEOUT}s"
  log "last console lines:"
  tail -n 40 "$1" | sed 's/^/  | /'
  die "$4 failed (console log: $1)"
}

# qemu_host_packages: apt-gets qemu-system-x86 and busybox-static when
# missing; sets SUDO and BUSYBOX.
qemu_host_packages() {
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  local missing=()
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' ||
    missing+=(busybox-static)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    $SUDO apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  BUSYBOX=/bin/busybox
  [ -x "$BUSYBOX" ] || die "busybox-static did not provide $BUSYBOX"
}

# qemu_kernel: the current Debian 12 kernel and the modules the tests need,
# downloaded with `apt-get download`, unpacked into
# BUILD/qemu-kernel/kernel-<version> (both tests share it; $WORK/kernel-...
# when PDC_QEMU_WORK is set) and cached there (never installed). Sets KV and
# KDIR.
qemu_kernel() {
  local cache=$BUILD/qemu-kernel
  [ -n "${PDC_QEMU_WORK:-}" ] && cache=$WORK
  mkdir -p "$cache"
  kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
  }
  local kpkg
  kpkg=$(kernel_package)
  if [ -z "$kpkg" ]; then
    log "no package lists: apt-get update"
    $SUDO apt-get update -q >/dev/null
    kpkg=$(kernel_package)
  fi
  [ -n "$kpkg" ] || die "cannot find the kernel package behind linux-image-amd64 (apt-get update?)"
  KV=${kpkg#linux-image-}
  KDIR=$cache/kernel-$KV
  # The stamp names the module set: a cache unpacked for another set is redone.
  local kstamp=$KDIR/.complete-nvme-vfio-ext4-loop-uio
  if [ ! -f "$kstamp" ]; then
    log "downloading $kpkg"
    rm -rf "$KDIR" && mkdir -p "$KDIR"
    (cd "$cache" && rm -f ./linux-image-*.deb && apt-get download -q "$kpkg" >/dev/null 2>&1) ||
      die "apt-get download $kpkg failed"
    log "unpacking the kernel and the modules the test needs"
    local m="./lib/modules/$KV"
    dpkg-deb --fsys-tarfile "$cache"/linux-image-*.deb |
      tar -x -C "$KDIR" --wildcards "./boot/vmlinuz-$KV" \
        "$m/kernel/drivers/nvme/host/*" "$m/kernel/drivers/vfio/*" "$m/kernel/virt/lib/*" \
        "$m/kernel/block/t10-pi.ko" "$m/kernel/lib/crc*" "$m/kernel/lib/libcrc32c.ko" \
        "$m/kernel/crypto/crc*" "$m/kernel/fs/ext4/*" "$m/kernel/fs/jbd2/*" \
        "$m/kernel/fs/mbcache.ko" "$m/kernel/drivers/block/loop.ko" "$m/kernel/drivers/uio/*" \
        "$m/modules.builtin" "$m/modules.order"
    rm -f "$cache"/linux-image-*.deb
    touch "$kstamp"
  fi
}

# qemu_ext2_image PATH SIZE: an empty ext2 file system image, made without root.
qemu_ext2_image() {
  rm -f "$1" && truncate -s "$2" "$1"
  if command -v mkfs.ext2 >/dev/null; then
    mkfs.ext2 -q -F "$1"
  elif [ -x /sbin/mkfs.ext2 ]; then
    /sbin/mkfs.ext2 -q -F "$1"
  else
    "$BUSYBOX" mke2fs -q "$1" >/dev/null 2>&1 || "$BUSYBOX" mke2fs "$1" >/dev/null
  fi
}

# qemu_init_prologue: the start of a guest's /init (busybox applets, /proc,
# /sys, /dev, the modules both tests load), printed for a script to go on.
qemu_init_prologue() {
  cat <<'PROLOGUE'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "guest: kernel $(uname -r) up"
for m in crct10dif_generic crc64_rocksoft_generic nvme vfio vfio_iommu_type1 vfio-pci ext4 loop; do
  modprobe "$m" || echo "guest: modprobe $m failed"
done
PROLOGUE
}

# Every file the programs load: their ldd libraries and the dynamic loader.
libs_of() {
  ldd "$@" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u
}

# Sets INITRD to $WORK/initrd.gz: busybox, the kernel's modules ($KDIR, $KV),
# the programs BINS (stripped) with their libraries, and $INIT as /init.
# Rebuilt only when one of them changed.
qemu_initramfs() {
  local LIBS KEY ROOT l b
  mapfile -t LIBS < <(libs_of "${BINS[@]}")
  KEY=$( { sha256sum "${BINS[@]}" "$INIT" "$BUSYBOX"; for l in "${LIBS[@]}"; do
           sha256sum "$(readlink -f "$l")"; done; echo "$KV"; } | sha256sum | cut -d' ' -f1)
  INITRD=$WORK/initrd.gz
  if [ -f "$INITRD" ] && [ "$(cat "$WORK/initrd.key" 2>/dev/null)" = "$KEY" ]; then
    log "initramfs unchanged (cached)"
  else
    log "building the initramfs (${#LIBS[@]} shared libraries)"
    ROOT=$WORK/initramfs
    rm -rf "$ROOT" && mkdir -p "$ROOT"/{bin,sbin,proc,sys,dev,tmp,mnt,etc,lib/modules}
    cp "$BUSYBOX" "$ROOT/bin/busybox"
    ln -s ../bin/busybox "$ROOT/sbin/modprobe"
    cp -a "$KDIR/lib/modules/$KV" "$ROOT/lib/modules/"
    "$BUSYBOX" depmod -b "$ROOT" "$KV"
    for b in "${BINS[@]}"; do strip -o "$ROOT/$(basename "$b")" "$b"; done
    for l in "${LIBS[@]}"; do
      mkdir -p "$ROOT$(dirname "$l")"
      cp -L "$l" "$ROOT$l"
    done
    echo "127.0.0.1 localhost" >"$ROOT/etc/hosts"
    cp "$INIT" "$ROOT/init" && chmod +x "$ROOT/init"
    (cd "$ROOT" && find . | "$BUSYBOX" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1 >"$INITRD")
    echo "$KEY" >"$WORK/initrd.key"
  fi
}
