#include "driver/disk_signatures.h"

#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pdc::driver {
namespace {

struct Magic {
  uint64_t offset;       // From the start, or from the end when `from_end`.
  std::string_view bytes;
  const char* what;
  bool from_end = false;
};

constexpr uint64_t kKiB = 1024;

// md: superblock 1.1 at 0, 1.2 at 4 KiB, 1.0 at the end less 8 KiB (4 KiB
// aligned), 0.90 at the last 64 KiB-aligned 64 KiB; magic a92b4efc (LE).
constexpr std::string_view kMdMagic("\xfc\x4e\x2b\xa9", 4);
// ZFS uberblock magic 00bab10c, either byte order, in the uberblock ring of
// the first vdev label (128 KiB to 256 KiB, 1 KiB slots).
constexpr std::string_view kZfsLe("\x0c\xb1\xba\x00", 4);
constexpr std::string_view kZfsBe("\x00\xba\xb1\x0c", 4);

const std::vector<Magic>& Magics() {
  static const std::vector<Magic>* const m = new std::vector<Magic>{
      {0, kMdMagic, "an md RAID member (superblock 1.1)"},
      {4 * kKiB, kMdMagic, "an md RAID member (superblock 1.2)"},
      // LVM2: label "LABELONE" in one of the first four sectors, type "LVM2 001".
      {0, "LABELONE", "an LVM2 physical volume"},
      {512, "LABELONE", "an LVM2 physical volume"},
      {1024, "LABELONE", "an LVM2 physical volume"},
      {1536, "LABELONE", "an LVM2 physical volume"},
      {0, "bluestore block device", "a Ceph BlueStore OSD"},
      {1080, std::string_view("\x53\xef", 2), "an ext2/3/4 file system"},
      {0, "XFSB", "an XFS file system"},
      {64 * kKiB + 64, "_BHRfS_M", "a Btrfs file system"},
      {3, "NTFS    ", "an NTFS file system"},
      {82, "FAT32   ", "a FAT file system"},
      {54, "FAT12   ", "a FAT file system"},
      {54, "FAT16   ", "a FAT file system"},
      {4096 - 10, "SWAPSPACE2", "swap space"},
      {0, std::string_view("LUKS\xba\xbe", 6), "a LUKS encrypted volume"},
      {0x10000 + 0x40, "ReIsEr", "a ReiserFS file system"},
      {32 * kKiB + 1, "CD001", "an ISO 9660 file system"},
  };
  return *m;
}

}  // namespace

absl::StatusOr<std::optional<std::string>> FindDiskSignature(Sysfs& dev, const std::string& name,
                                                             uint64_t size_bytes) {
  // The first 256 KiB hold every signature at a fixed offset from the start.
  ASSIGN_OR_RETURN(std::string head, dev.ReadAt(name, 0, 256 * kKiB));
  auto at = [&](const std::string& data, uint64_t off, std::string_view bytes) {
    return off + bytes.size() <= data.size() && std::string_view(data).substr(off, bytes.size()) == bytes;
  };
  for (const Magic& m : Magics()) {
    if (at(head, m.offset, m.bytes)) return std::optional<std::string>(m.what);
  }
  for (uint64_t off = 128 * kKiB; off + 4 <= 256 * kKiB; off += kKiB) {
    if (at(head, off, kZfsLe) || at(head, off, kZfsBe)) {
      return std::optional<std::string>("a ZFS pool member");
    }
  }
  if (size_bytes >= 128 * kKiB) {
    const uint64_t md10 = ((size_bytes & ~(4 * kKiB - 1)) - 8 * kKiB);
    const uint64_t md090 = ((size_bytes & ~(64 * kKiB - 1)) - 64 * kKiB);
    for (auto [off, what] : {std::pair<uint64_t, const char*>{md10, "an md RAID member (superblock 1.0)"},
                             {md090, "an md RAID member (superblock 0.90)"}}) {
      ASSIGN_OR_RETURN(std::string tail, dev.ReadAt(name, off, 4));
      if (tail == kMdMagic) return std::optional<std::string>(what);
    }
  }
  return std::optional<std::string>();
}

}  // namespace pdc::driver
