// NamePool: one shared copy of each name many claims repeat (resource names,
// node names), counted, so that a claim keeps a pointer where it would keep
// a 32-byte string and often a heap block of its own. Internal to allocator/.
//
// Thread-safety: none; ClusterState owns it and is guarded by the
// Allocator's mutex.
#ifndef PDC_ALLOCATOR_NAME_POOL_H_
#define PDC_ALLOCATOR_NAME_POOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/node_hash_map.h"

namespace pdc {

class NamePool {
 public:
  NamePool() = default;
  NamePool(const NamePool&) = delete;
  NamePool& operator=(const NamePool&) = delete;

  // The pooled copy of `name`, shared by every holder of an equal name and
  // stable until its last holder releases it; nullptr for "" (nothing is
  // pooled for it). Every non-null result is given back with one Release.
  const std::string* Intern(std::string_view name);
  // Gives back one Intern's result; the name is dropped with its last
  // holder. REQUIRES: `name` came from this pool's Intern (or is nullptr).
  void Release(const std::string* name);

  // Distinct names held.
  size_t size() const { return holders_.size(); }

  // The text of an Intern result: "" for nullptr.
  static const std::string& Text(const std::string* name) {
    return name == nullptr ? Empty() : *name;
  }

 private:
  static const std::string& Empty();

  // Node map: the keys' addresses are what holders keep.
  absl::node_hash_map<std::string, uint32_t> holders_;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_NAME_POOL_H_
