#include "allocator/wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::wal {
namespace {

constexpr std::string_view kSnapshotMagic = "PDCSNAP1";
constexpr std::string_view kSegmentPrefix = "wal-";
constexpr std::string_view kSegmentSuffix = ".log";
constexpr std::string_view kSnapshotPrefix = "snapshot-";
constexpr std::string_view kSnapshotSuffix = ".snap";
constexpr size_t kRevisionDigits = 20;

void PutFixed32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutFixed64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

// The frame at `pos`, or nullopt with *problem (when not null) saying why
// there is none. Checks the cheap header CRC first so that probing every
// offset of a damaged region stays linear.
std::optional<Frame> FrameAt(std::string_view data, size_t pos,
                             std::string* problem) {
  const size_t left = data.size() - pos;
  if (left < kHeaderSize) {
    if (problem) {
      *problem = absl::StrCat("incomplete header (", left, " of ", kHeaderSize,
                              " bytes)");
    }
    return std::nullopt;
  }
  const char* h = data.data() + pos;
  if (crc32c::Unmask(GetFixed32(h)) !=
      crc32c::Extend(0, h + 4, kHeaderSize - 4)) {
    if (problem) *problem = "header checksum mismatch";
    return std::nullopt;
  }
  const uint32_t length = GetFixed32(h + 4);
  if (length == 0 || length > kMaxPayload) {
    if (problem) *problem = absl::StrCat("bad payload length ", length);
    return std::nullopt;
  }
  if (length > left - kHeaderSize) {
    if (problem) {
      *problem = absl::StrCat("incomplete payload (", left - kHeaderSize,
                              " of ", length, " bytes)");
    }
    return std::nullopt;
  }
  std::string_view payload = data.substr(pos + kHeaderSize, length);
  if (crc32c::Unmask(GetFixed32(h + 16)) != crc32c::Value(payload)) {
    if (problem) *problem = "payload checksum mismatch";
    return std::nullopt;
  }
  return Frame{pos, GetFixed64(h + 8), payload};
}

std::optional<uint64_t> ParseName(std::string_view name,
                                  std::string_view prefix,
                                  std::string_view suffix) {
  if (name.size() != prefix.size() + kRevisionDigits + suffix.size() ||
      name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : name.substr(prefix.size(), kRevisionDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

}  // namespace

void AppendFrame(uint64_t revision, std::string_view payload,
                 std::string* out) {
  char h[kHeaderSize];
  PutFixed32(h + 4, static_cast<uint32_t>(payload.size()));
  PutFixed64(h + 8, revision);
  PutFixed32(h + 16, crc32c::Mask(crc32c::Value(payload)));
  PutFixed32(h, crc32c::Mask(crc32c::Extend(0, h + 4, kHeaderSize - 4)));
  out->append(h, kHeaderSize);
  out->append(payload.data(), payload.size());
}

SegmentScan ScanSegment(std::string_view data) {
  SegmentScan scan;
  size_t pos = 0;
  while (pos < data.size()) {
    std::optional<Frame> frame = FrameAt(data, pos, &scan.problem);
    if (frame) {
      scan.frames.push_back(*frame);
      pos += kHeaderSize + frame->payload.size();
      continue;
    }
    scan.bad_offset = pos;
    for (size_t next = pos + 1; next + kHeaderSize <= data.size(); ++next) {
      if (FrameAt(data, next, nullptr)) {
        scan.end = SegmentEnd::kCorrupt;
        scan.next_valid = next;
        return scan;
      }
    }
    scan.end = SegmentEnd::kTorn;
    return scan;
  }
  scan.problem.clear();
  return scan;
}

std::string EncodeSnapshotFile(std::string_view payload) {
  std::string out(kSnapshotHeaderSize, '\0');
  out.replace(0, kSnapshotMagic.size(), kSnapshotMagic);
  PutFixed64(out.data() + 8, payload.size());
  uint32_t crc = crc32c::Extend(0, out.data() + 8, 8);
  crc = crc32c::Extend(crc, payload.data(), payload.size());
  PutFixed32(out.data() + 16, crc32c::Mask(crc));
  out.append(payload.data(), payload.size());
  return out;
}

absl::StatusOr<std::string_view> DecodeSnapshotFile(std::string_view file,
                                                    std::string_view path) {
  auto loss = [&](size_t offset, std::string_view what) {
    return absl::DataLossError(absl::StrCat(
        "snapshot ", Sv(path), " at offset ", offset, ": ", Sv(what)));
  };
  if (file.size() < kSnapshotHeaderSize) {
    return loss(0, absl::StrCat("file of ", file.size(),
                                " bytes is shorter than the snapshot header"));
  }
  if (file.substr(0, kSnapshotMagic.size()) != kSnapshotMagic) {
    return loss(0, "not a pdc snapshot (bad magic)");
  }
  const uint64_t length = GetFixed64(file.data() + 8);
  if (length != file.size() - kSnapshotHeaderSize) {
    return loss(
        8, absl::StrCat("header says ", length, " payload bytes, file has ",
                        file.size() - kSnapshotHeaderSize));
  }
  std::string_view payload = file.substr(kSnapshotHeaderSize);
  uint32_t crc = crc32c::Extend(0, file.data() + 8, 8);
  crc = crc32c::Extend(crc, payload.data(), payload.size());
  if (crc32c::Unmask(GetFixed32(file.data() + 16)) != crc) {
    return loss(kSnapshotHeaderSize, "checksum mismatch");
  }
  return payload;
}

std::string SegmentFileName(uint64_t first_revision) {
  return absl::StrFormat("wal-%020u.log", first_revision);
}

std::string SnapshotFileName(uint64_t revision) {
  return absl::StrFormat("snapshot-%020u.snap", revision);
}

std::optional<uint64_t> ParseSegmentFileName(std::string_view name) {
  return ParseName(name, kSegmentPrefix, kSegmentSuffix);
}

std::optional<uint64_t> ParseSnapshotFileName(std::string_view name) {
  return ParseName(name, kSnapshotPrefix, kSnapshotSuffix);
}

// ---------------------------------------------------------------------------

absl::Status FileOps::Write(int fd, std::string_view data,
                            const std::string& path) {
  return WriteAll(fd, data, path);
}

absl::Status FileOps::SyncData(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) return ErrnoStatus("fdatasync", path, errno);
  return absl::OkStatus();
}

absl::Status FileOps::SyncDirectory(const std::string& dir) {
  return FsyncDirectory(dir);
}

absl::Status FileOps::WriteFileAtomically(const std::string& path,
                                          std::string_view data) {
  return ::pdc::WriteFileAtomically(path, data);
}

FileOps* FileOps::Default() {
  static FileOps* const ops = new FileOps();
  return ops;
}

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<SegmentWriter>> SegmentWriter::Create(
    const std::string& path, FileOps* ops) {
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  return std::unique_ptr<SegmentWriter>(new SegmentWriter(fd, path, 0, ops));
}

absl::StatusOr<std::unique_ptr<SegmentWriter>> SegmentWriter::OpenForAppend(
    const std::string& path, uint64_t size, FileOps* ops) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  std::unique_ptr<SegmentWriter> writer(new SegmentWriter(fd, path, size, ops));
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", path, errno);
  if (static_cast<uint64_t>(st.st_size) != size) {
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus("ftruncate", path, errno);
    }
    if (absl::Status s = writer->Sync(); !s.ok()) return s;
  }
  return writer;
}

SegmentWriter::~SegmentWriter() { ::close(fd_); }

absl::Status SegmentWriter::Append(std::string_view bytes) {
  absl::Status s = ops_->Write(fd_, bytes, path_);
  if (s.ok()) size_ += bytes.size();
  return s;
}

absl::Status SegmentWriter::Sync() { return ops_->SyncData(fd_, path_); }

}  // namespace pdc::wal
