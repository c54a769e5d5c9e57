// The file store's on-disk formats: a WAL segment is scanned into frames
// whose records decode or fail with DataLoss, and a decoded record encodes
// back to the same bytes; a snapshot file is unwrapped and its record
// applied to a state, which refuses what is inconsistent. The first input
// byte picks the format.
#include "allocator/cluster_state.h"
#include "allocator/record.h"
#include "allocator/wal.h"
#include "fuzz/fuzz_util.h"

namespace {

void CheckRecord(std::string_view bytes, pdc::ClusterState* state) {
  auto r = pdc::DecodeRecord(bytes);
  if (!r.ok()) return;
  if (pdc::DecodeRecord(pdc::EncodeRecord(*r)).value_or(pdc::Record{}) != *r) {
    pdc::fuzz::Broken("DecodeRecord(EncodeRecord(r)) != r");
  }
  if (state != nullptr) (void)state->Apply(*r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = pdc::fuzz::AsText(data + 1, size - 1);
  pdc::ClusterState state({});
  switch (data[0] % 3) {
    case 0: {
      const pdc::wal::SegmentScan scan = pdc::wal::ScanSegment(rest);
      for (const pdc::wal::Frame& f : scan.frames) CheckRecord(f.payload, &state);
      break;
    }
    case 1: {
      auto payload = pdc::wal::DecodeSnapshotFile(rest, "fuzz-snapshot");
      if (payload.ok()) CheckRecord(*payload, &state);
      break;
    }
    default:
      CheckRecord(rest, &state);
      break;
  }
  return 0;
}
