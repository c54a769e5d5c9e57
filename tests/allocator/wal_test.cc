#include "allocator/wal.h"

#include <string>
#include <vector>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::wal {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

// Payloads of different sizes; their content does not matter to the framing.
std::string Payload(uint64_t revision) {
  return std::string(10 + revision * 7 % 90,
                     static_cast<char>('a' + revision % 26));
}

// A segment of frames for revisions 1..n and the offset of each frame.
std::string Segment(uint64_t n, std::vector<size_t>* offsets = nullptr) {
  std::string out;
  for (uint64_t r = 1; r <= n; ++r) {
    if (offsets) offsets->push_back(out.size());
    AppendFrame(r, Payload(r), &out);
  }
  return out;
}

TEST(WalTest, ScansWhatWasFramed) {
  std::vector<size_t> offsets;
  const std::string data = Segment(5, &offsets);
  SegmentScan scan = ScanSegment(data);
  EXPECT_EQ(scan.end, SegmentEnd::kClean);
  ASSERT_EQ(scan.frames.size(), 5u);
  for (uint64_t r = 1; r <= 5; ++r) {
    EXPECT_EQ(scan.frames[r - 1].revision, r);
    EXPECT_EQ(scan.frames[r - 1].offset, offsets[r - 1]);
    EXPECT_EQ(scan.frames[r - 1].payload, Payload(r));
  }
}

TEST(WalTest, EmptySegmentIsClean) {
  SegmentScan scan = ScanSegment("");
  EXPECT_EQ(scan.end, SegmentEnd::kClean);
  EXPECT_TRUE(scan.frames.empty());
}

TEST(WalTest, EveryCutOfTheLastFrameIsTorn) {
  std::vector<size_t> offsets;
  const std::string data = Segment(4, &offsets);
  const size_t last = offsets.back();
  for (size_t keep = last + 1; keep < data.size(); ++keep) {
    SCOPED_TRACE(keep);
    SegmentScan scan = ScanSegment(std::string_view(data).substr(0, keep));
    EXPECT_EQ(scan.end, SegmentEnd::kTorn);
    EXPECT_EQ(scan.bad_offset, last);
    EXPECT_EQ(scan.frames.size(), 3u);
    EXPECT_FALSE(scan.problem.empty());
  }
}

TEST(WalTest, ZeroTailIsTornNotARecord) {
  for (size_t zeros : {1u, 19u, 20u, 21u, 512u, 4096u}) {
    SCOPED_TRACE(zeros);
    std::string data = Segment(3);
    const size_t end = data.size();
    data.append(zeros, '\0');
    SegmentScan scan = ScanSegment(data);
    EXPECT_EQ(scan.end, SegmentEnd::kTorn);
    EXPECT_EQ(scan.bad_offset, end);
    EXPECT_EQ(scan.frames.size(), 3u);
  }
}

TEST(WalTest, GarbageTailIsTorn) {
  std::string data = Segment(3);
  const size_t end = data.size();
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  SegmentScan scan = ScanSegment(data);
  EXPECT_EQ(scan.end, SegmentEnd::kTorn);
  EXPECT_EQ(scan.bad_offset, end);
}

TEST(WalTest, AnyFlippedByteInAMiddleFrameIsCorruption) {
  std::vector<size_t> offsets;
  const std::string clean = Segment(4, &offsets);
  // Every byte of frame 2 (header and payload).
  for (size_t pos = offsets[1]; pos < offsets[2]; ++pos) {
    SCOPED_TRACE(pos);
    std::string data = clean;
    data[pos] ^= 0x10;
    SegmentScan scan = ScanSegment(data);
    EXPECT_EQ(scan.end, SegmentEnd::kCorrupt);
    EXPECT_EQ(scan.bad_offset, offsets[1]);
    EXPECT_EQ(scan.next_valid, offsets[2]);
    EXPECT_EQ(scan.frames.size(), 1u);
  }
}

TEST(WalTest, ZeroedBlockInTheMiddleIsCorruption) {
  std::vector<size_t> offsets;
  std::string data = Segment(6, &offsets);
  std::fill(data.begin() + offsets[2], data.begin() + offsets[3], '\0');
  SegmentScan scan = ScanSegment(data);
  EXPECT_EQ(scan.end, SegmentEnd::kCorrupt);
  EXPECT_EQ(scan.bad_offset, offsets[2]);
  EXPECT_EQ(scan.next_valid, offsets[3]);
}

// The documented limit: damage confined to the last frame cannot be told
// from a torn append, so it is reported as torn.
TEST(WalTest, FlippedByteInTheLastFrameLooksTorn) {
  std::vector<size_t> offsets;
  std::string data = Segment(3, &offsets);
  data[data.size() - 1] ^= 0x01;
  SegmentScan scan = ScanSegment(data);
  EXPECT_EQ(scan.end, SegmentEnd::kTorn);
  EXPECT_EQ(scan.bad_offset, offsets[2]);
  EXPECT_EQ(scan.problem, "payload checksum mismatch");
}

TEST(WalTest, SnapshotFileRoundTrips) {
  const std::string file = EncodeSnapshotFile("snapshot payload");
  ASSERT_OK_AND_ASSIGN(std::string_view payload, DecodeSnapshotFile(file, "s"));
  EXPECT_EQ(payload, "snapshot payload");
}

TEST(WalTest, EveryDamagedSnapshotIsDataLoss) {
  const std::string clean = EncodeSnapshotFile("snapshot payload");
  for (size_t pos = 0; pos < clean.size(); ++pos) {
    SCOPED_TRACE(pos);
    std::string file = clean;
    file[pos] ^= 0x04;
    EXPECT_THAT(DecodeSnapshotFile(file, "/d/snapshot-x.snap"),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr("/d/snapshot-x.snap at offset")));
  }
  for (size_t keep = 0; keep < clean.size(); ++keep) {
    SCOPED_TRACE(keep);
    EXPECT_THAT(DecodeSnapshotFile(clean.substr(0, keep), "p"),
                StatusIs(absl::StatusCode::kDataLoss));
  }
}

TEST(WalTest, FileNames) {
  EXPECT_EQ(SegmentFileName(1), "wal-00000000000000000001.log");
  EXPECT_EQ(SnapshotFileName(1234), "snapshot-00000000000000001234.snap");
  EXPECT_EQ(ParseSegmentFileName(SegmentFileName(UINT64_MAX)), UINT64_MAX);
  EXPECT_EQ(ParseSnapshotFileName(SnapshotFileName(77)), 77u);
  struct Bad {
    const char* name;
  };
  for (Bad bad : std::vector<Bad>{{"wal-1.log"},
                                  {"wal-0000000000000000000x.log"},
                                  {"wal-00000000000000000001.log.tmp"},
                                  {"snapshot-00000000000000000001.snap.tmp"},
                                  {"wal-99999999999999999999.log"},  // > 2^64
                                  {"LOCK"}}) {
    SCOPED_TRACE(bad.name);
    EXPECT_FALSE(ParseSegmentFileName(bad.name).has_value());
    EXPECT_FALSE(ParseSnapshotFileName(bad.name).has_value());
  }
}

TEST(WalTest, WriterAppendsAndReopenCutsTheTail) {
  testing::TempDir tmp;
  const std::string path = tmp.Join("wal-00000000000000000001.log");
  const std::string data = Segment(3);
  {
    ASSERT_OK_AND_ASSIGN(auto writer,
                         SegmentWriter::Create(path, FileOps::Default()));
    ASSERT_OK(writer->Append(data));
    ASSERT_OK(writer->Append("torn"));
    ASSERT_OK(writer->Sync());
    EXPECT_EQ(writer->size(), data.size() + 4);
  }
  {
    ASSERT_OK_AND_ASSIGN(
        auto writer,
        SegmentWriter::OpenForAppend(path, data.size(), FileOps::Default()));
    std::string more;
    AppendFrame(4, Payload(4), &more);
    ASSERT_OK(writer->Append(more));
    ASSERT_OK(writer->Sync());
  }
  ASSERT_OK_AND_ASSIGN(std::string back, ReadFileToString(path));
  SegmentScan scan = ScanSegment(back);
  EXPECT_EQ(scan.end, SegmentEnd::kClean);
  ASSERT_EQ(scan.frames.size(), 4u);
  EXPECT_EQ(scan.frames[3].revision, 4u);
}

}  // namespace
}  // namespace pdc::wal
