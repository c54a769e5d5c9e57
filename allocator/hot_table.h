// HotTable: node name -> NodeHot (the filter's per-node fast-path facts),
// laid out for the one access pattern that matters: kube-scheduler sends up
// to thousands of node names per filter/prioritize call, and each is looked
// up once. A general hash map spends most of that time in cache misses (the
// probe group, then the slot with the key, then the value). Here:
//
//   - the index is an open-addressing array of 8-byte entries (32 bits of the
//     name's hash, record id), linear probing, at most half full: 5000 nodes
//     take 128 KiB, one cache line holds 8 probes;
//   - each node's record (NodeHot plus the name, inline up to kInlineName
//     bytes) is one 128-byte, cache-line-aligned block;
//   - FindAll() looks a batch of names up with the three steps (hash and
//     prefetch the index line; read it and prefetch the record; compare the
//     name and use the record) a few names apart, so the misses overlap.
//
// Thread-safety: none; ClusterState's owner guards it.
#ifndef PDC_ALLOCATOR_HOT_TABLE_H_
#define PDC_ALLOCATOR_HOT_TABLE_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace pdc {

// Per node, what the filter's fresh-allocation fast path needs (derived from
// NodeState by ClusterState::SyncHot) for up to kHotClasses device classes.
inline constexpr size_t kHotClasses = 4;
struct NodeHot {
  bool has_record = false;
  uint8_t handoffs_pending = 0;  // Saturates at 255; only zero matters.
  // Per class: all free usable groups are single devices (the fast fit
  // applies), and how many there are.
  std::array<uint8_t, kHotClasses> all_single{};
  std::array<uint16_t, kHotClasses> free_single{};
  // Per class: some device is Released or returning to its host, so a
  // shortage needs the full NodeState to explain itself.
  std::array<uint8_t, kHotClasses> held{};
  // For scoring: ClassSummary::healthy and ::allocated, and the most free
  // single-device groups on any one NUMA node.
  std::array<uint16_t, kHotClasses> healthy{};
  std::array<uint16_t, kHotClasses> allocated{};
  std::array<uint16_t, kHotClasses> max_single_on_numa{};
  // NodeState::last_report in Unix nanoseconds (INT64_MIN for never).
  int64_t last_report_ns = INT64_MIN;

  bool operator==(const NodeHot&) const = default;
};

class HotTable {
 public:
  using HashFn = uint64_t (*)(std::string_view);
  // absl::Hash of the name; tests pass a poor hash to force collisions.
  static uint64_t DefaultHash(std::string_view name);
  explicit HotTable(HashFn hash = &DefaultHash);

  // Inserts `name` or replaces its NodeHot.
  void Put(std::string_view name, const NodeHot& hot);
  void Erase(std::string_view name);
  // nullptr when `name` is not in the table.
  const NodeHot* Find(std::string_view name) const;
  size_t size() const { return size_; }

  // out[i] = Find(names[i]) for every i, with the lookups overlapped (see
  // the file comment). `out` has names.size() elements.
  void FindAll(absl::Span<const std::string_view> names, absl::Span<const NodeHot*> out) const;

 private:
  static constexpr size_t kInlineName = 128 - sizeof(NodeHot) - sizeof(uint32_t);
  struct alignas(64) Record {
    NodeHot hot;
    uint32_t name_size = 0;
    char name[kInlineName];  // The first min(name_size, kInlineName) bytes.
  };
  static_assert(sizeof(Record) == 128);
  struct Entry {
    uint32_t tag = 0;  // 0: empty; else Tag(hash).
    uint32_t id = 0;   // Index into records_.
  };
  static constexpr size_t kAhead = 8;  // Names between the pipeline's steps.

  uint64_t Hash(std::string_view name) const { return hash_(name); }
  static uint32_t Tag(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }
  std::string_view NameOf(uint32_t id) const {
    const Record& r = records_[id];
    return r.name_size <= kInlineName ? std::string_view(r.name, r.name_size)
                                      : std::string_view(long_names_[id]);
  }
  bool NameIs(uint32_t id, std::string_view name) const {
    const Record& r = records_[id];
    if (r.name_size != name.size()) return false;
    if (name.size() <= kInlineName) return std::memcmp(r.name, name.data(), name.size()) == 0;
    return long_names_[id] == name;
  }
  // The entry slot holding `name`, or the empty slot ending its probe.
  size_t Probe(std::string_view name, uint64_t hash) const;
  size_t ProbeFrom(size_t slot, std::string_view name, uint32_t tag) const;
  void Grow();

  HashFn hash_;
  std::vector<Entry> entries_;  // Power-of-two size, at most half full.
  std::vector<Record> records_;
  std::vector<std::string> long_names_;  // By id; only names over kInlineName.
  std::vector<uint32_t> free_ids_;
  size_t size_ = 0;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_HOT_TABLE_H_
