#include "allocator/hot_table.h"

#include <algorithm>
#include <utility>

#include "absl/hash/hash.h"
#include "common/strings.h"

namespace pdc {

HotTable::HotTable(HashFn hash) : hash_(hash), entries_(16) {}

uint64_t HotTable::DefaultHash(std::string_view name) {
  return absl::Hash<absl::string_view>()(Sv(name));
}

size_t HotTable::ProbeFrom(size_t slot, std::string_view name, uint32_t tag) const {
  const size_t mask = entries_.size() - 1;
  for (;; slot = (slot + 1) & mask) {
    const Entry& e = entries_[slot];
    if (e.tag == 0 || (e.tag == tag && NameIs(e.id, name))) return slot;
  }
}

size_t HotTable::Probe(std::string_view name, uint64_t hash) const {
  return ProbeFrom(hash & (entries_.size() - 1), name, Tag(hash));
}

const NodeHot* HotTable::Find(std::string_view name) const {
  const Entry& e = entries_[Probe(name, Hash(name))];
  return e.tag == 0 ? nullptr : &records_[e.id].hot;
}

void HotTable::FindAll(absl::Span<const std::string_view> names,
                       absl::Span<const NodeHot*> out) const {
  // Ring buffers, one slot per name in flight: its hash, then its candidate
  // entry slot (the first whose tag matches, or the empty one).
  constexpr size_t kRing = 4 * kAhead;
  static_assert((kRing & (kRing - 1)) == 0 && kRing > 2 * kAhead);
  uint64_t hashes[kRing];
  size_t slots[kRing];
  const size_t mask = entries_.size() - 1;
  const size_t n = names.size();
  for (size_t step = 0; step < n + 2 * kAhead; ++step) {
    if (step < n) {
      const uint64_t h = Hash(names[step]);
      hashes[step % kRing] = h;
      __builtin_prefetch(&entries_[h & mask]);
    }
    if (step >= kAhead && step - kAhead < n) {
      const size_t j = step - kAhead;
      const uint32_t tag = Tag(hashes[j % kRing]);
      size_t s = hashes[j % kRing] & mask;
      while (entries_[s].tag != 0 && entries_[s].tag != tag) s = (s + 1) & mask;
      slots[j % kRing] = s;
      if (entries_[s].tag != 0) {
        const Record* r = &records_[entries_[s].id];
        __builtin_prefetch(r);
        __builtin_prefetch(reinterpret_cast<const char*>(r) + 64);
      }
    }
    if (step >= 2 * kAhead) {
      const size_t k = step - 2 * kAhead;
      const size_t s = slots[k % kRing];
      const NodeHot* hot = nullptr;
      if (entries_[s].tag != 0) {
        if (NameIs(entries_[s].id, names[k])) {
          hot = &records_[entries_[s].id].hot;
        } else {
          // A tag collision: go on probing past it (rare).
          const size_t t =
              ProbeFrom((s + 1) & mask, names[k], Tag(hashes[k % kRing]));
          if (entries_[t].tag != 0) hot = &records_[entries_[t].id].hot;
        }
      }
      out[k] = hot;
    }
  }
}

void HotTable::Put(std::string_view name, const NodeHot& hot) {
  const uint64_t hash = Hash(name);
  size_t slot = Probe(name, hash);
  if (entries_[slot].tag != 0) {
    records_[entries_[slot].id].hot = hot;
    return;
  }
  if (2 * (size_ + 1) > entries_.size()) {
    Grow();
    slot = Probe(name, hash);
  }
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
    long_names_.emplace_back();
  }
  Record& r = records_[id];
  r.hot = hot;
  r.name_size = static_cast<uint32_t>(name.size());
  std::memcpy(r.name, name.data(), std::min(name.size(), kInlineName));
  if (name.size() > kInlineName) long_names_[id] = std::string(name);
  entries_[slot] = Entry{Tag(hash), id};
  ++size_;
}

void HotTable::Erase(std::string_view name) {
  size_t hole = Probe(name, Hash(name));
  if (entries_[hole].tag == 0) return;
  const uint32_t id = entries_[hole].id;
  long_names_[id].clear();
  records_[id].name_size = 0;
  free_ids_.push_back(id);
  --size_;
  // Backward-shift deletion: move later entries of the same run into the
  // hole when their home slot is not between the hole and them, so every
  // probe still ends at the first empty slot after its name.
  const size_t mask = entries_.size() - 1;
  for (size_t next = (hole + 1) & mask; entries_[next].tag != 0; next = (next + 1) & mask) {
    const size_t home = Hash(NameOf(entries_[next].id)) & mask;
    // Cyclic distances from home: the entry may fill the hole when the hole
    // lies on its probe path (home .. next).
    if (((hole - home) & mask) < ((next - home) & mask)) {
      entries_[hole] = entries_[next];
      hole = next;
    }
  }
  entries_[hole] = Entry{};
}

void HotTable::Grow() {
  std::vector<Entry> old = std::move(entries_);
  entries_.assign(old.size() * 2, Entry{});
  const size_t mask = entries_.size() - 1;
  for (const Entry& e : old) {
    if (e.tag == 0) continue;
    size_t slot = Hash(NameOf(e.id)) & mask;
    while (entries_[slot].tag != 0) slot = (slot + 1) & mask;
    entries_[slot] = e;
  }
}

}  // namespace pdc
