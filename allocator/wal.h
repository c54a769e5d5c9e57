// On-disk formats of the file store (allocator/file_store.h): the framing of
// write-ahead-log records in a segment file, the classification of a damaged
// segment, the snapshot file envelope, the file names, and FileOps, the seam
// through which the store writes and syncs so tests can inject I/O failures.
//
// A segment file `wal-<20-digit first revision>.log` is a sequence of frames:
//
//   offset  size  field
//        0     4  header check: masked CRC32C of bytes 4..20
//        4     4  payload length (little-endian, 1..kMaxPayload)
//        8     8  revision of the record (little-endian)
//       16     4  payload check: masked CRC32C of the payload
//       20     n  payload: EncodeRecord(record)
//
// Why the header has its own checksum: it makes "is there a valid frame at
// offset X?" a 16-byte CRC instead of a CRC over a length read from garbage,
// so the forward scan below is linear in the size of the damaged region.
//
// Torn tail or corruption? ScanSegment stops at the first offset that does
// not hold a valid frame and then scans forward, byte by byte, for any later
// offset at which a complete frame validates (header check, sane length,
// payload check).
//  - None follows: the bad bytes are the residue of an append that a crash
//    interrupted (a partial header or payload, or the zeros a filesystem
//    leaves when it extended the file but did not write the block). Frames
//    are only appended and a record is acknowledged only after fdatasync
//    covered it, so in the last segment such a tail was never acknowledged;
//    the store drops it and reports it. In an earlier segment it is
//    DataLoss: a segment is fully synced before the next one is created.
//  - One follows: bytes were damaged after they were written (a flipped bit,
//    a lost block); the records after it were written later and may have
//    been acknowledged, so dropping them silently would lose data: DataLoss.
// A header of all zeros never validates (length 0 is rejected and the masked
// CRC of zeros is not zero), so a zero-filled tail is torn, never a record.
// Limits, accepted knowingly: damage confined to the very last frame of the
// last segment looks exactly like a torn append and is dropped (reported);
// a chance CRC match in garbage (2^-32 per offset for the header, again for
// the payload) could make a torn tail look like corruption, which fails safe;
// and a filesystem that, on power loss, keeps a later block of an unsynced
// append but not an earlier one leaves a hole followed by valid (never
// acknowledged) records, which recovery also refuses as DataLoss rather than
// guess. The message names the file and offset, so an operator who judges
// the records after it expendable can truncate the file there.
//
// A snapshot file `snapshot-<20-digit revision>.snap` is
//   "PDCSNAP1" | fixed64 payload length | fixed32 masked CRC32C of the
//   length and the payload | payload (EncodeRecord of the snapshot record).
//
// Thread-safety: the functions are pure; a SegmentWriter is used by one
// thread at a time; FileOps implementations must be thread-safe.
#ifndef PDC_ALLOCATOR_WAL_H_
#define PDC_ALLOCATOR_WAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdc::wal {

inline constexpr size_t kHeaderSize = 20;
// Far above any real record (a bind is a few hundred bytes); a length above it
// in a header whose check validated means a bug or a newer format.
inline constexpr uint32_t kMaxPayload = 64u << 20;

// Appends one frame holding `payload`, the encoding of the record with
// `revision`, to *out. REQUIRES: 0 < payload.size() <= kMaxPayload.
void AppendFrame(uint64_t revision, std::string_view payload, std::string* out);

struct Frame {
  uint64_t offset = 0;  // Of the header in the segment.
  uint64_t revision = 0;
  std::string_view payload;  // Points into the scanned data.
};

enum class SegmentEnd : uint8_t {
  kClean = 0,    // Every byte belongs to a valid frame.
  kTorn = 1,     // Bad bytes from bad_offset to the end, no valid frame after.
  kCorrupt = 2,  // Bad bytes at bad_offset and a valid frame at next_valid.
};

struct SegmentScan {
  std::vector<Frame> frames;  // The valid frames before bad_offset.
  SegmentEnd end = SegmentEnd::kClean;
  uint64_t bad_offset = 0;  // kTorn, kCorrupt: first byte of the bad frame.
  uint64_t next_valid = 0;  // kCorrupt: offset of the later valid frame.
  std::string problem;      // kTorn, kCorrupt: what is wrong at bad_offset.
};

// Splits a segment's bytes into frames and classifies its end (see above).
SegmentScan ScanSegment(std::string_view data);

// The snapshot file envelope around `payload`, which starts at byte
// kSnapshotHeaderSize of the file.
inline constexpr size_t kSnapshotHeaderSize = 20;
std::string EncodeSnapshotFile(std::string_view payload);
// The payload of a snapshot file; DataLoss naming `path` and the byte offset
// of the problem when the envelope or its checksum is wrong.
absl::StatusOr<std::string_view> DecodeSnapshotFile(std::string_view file,
                                                    std::string_view path);

std::string SegmentFileName(uint64_t first_revision);
std::string SnapshotFileName(uint64_t revision);
// The revision in a segment or snapshot file name; nullopt for other names
// (including the `.tmp` of an unfinished snapshot).
std::optional<uint64_t> ParseSegmentFileName(std::string_view name);
std::optional<uint64_t> ParseSnapshotFileName(std::string_view name);

// The store's writes and syncs go through FileOps so that tests can make them
// fail (store.h's sticky failure). The defaults are the real system calls.
class FileOps {
 public:
  virtual ~FileOps() = default;
  // Writes all of `data` to `fd` (retrying short writes).
  virtual absl::Status Write(int fd, std::string_view data,
                             const std::string& path);
  // fdatasync: the data and the size of the file are durable.
  virtual absl::Status SyncData(int fd, const std::string& path);
  // fsync of a directory after creating, renaming or deleting in it.
  virtual absl::Status SyncDirectory(const std::string& dir);
  // common/file_util.h WriteFileAtomically: temp file, fsync, rename, fsync
  // dir.
  virtual absl::Status WriteFileAtomically(const std::string& path,
                                           std::string_view data);

  // The process-wide real implementation. Never null, never destroyed.
  static FileOps* Default();
};

// Appends frames to one segment file.
class SegmentWriter {
 public:
  // Creates `path` empty (replacing a file of that name). The caller syncs
  // the directory. `ops` must outlive the writer.
  static absl::StatusOr<std::unique_ptr<SegmentWriter>> Create(
      const std::string& path, FileOps* ops);
  // Opens an existing segment for appending after cutting it to `size` bytes
  // (dropping a torn tail; the cut is synced before this returns).
  static absl::StatusOr<std::unique_ptr<SegmentWriter>> OpenForAppend(
      const std::string& path, uint64_t size, FileOps* ops);

  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  absl::Status Append(std::string_view bytes);
  absl::Status Sync();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  SegmentWriter(int fd, std::string path, uint64_t size, FileOps* ops)
      : fd_(fd), path_(std::move(path)), size_(size), ops_(ops) {}

  const int fd_;
  const std::string path_;
  uint64_t size_;
  FileOps* const ops_;
};

}  // namespace pdc::wal

#endif  // PDC_ALLOCATOR_WAL_H_
