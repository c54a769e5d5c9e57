// ClaimEntry: a claim as ClusterState keeps it in memory. The allocator holds
// every claim, so this is where its resident size per claim goes
// (bench/README.md, "resident heap per bound claim"):
//  - names many claims repeat (the resource name, the node) are pooled
//    (NamePool): a pointer instead of a string and often a heap block each;
//  - the uid is 16 bytes when it is a canonical UUID, as every uid pdc makes
//    and every Kubernetes UID is;
//  - the devices of a claim, almost always one, are kept inline;
//  - what few claims have (pins, the reason a claim is Lost, a uid of another
//    form) lives in one block out of line, absent for most claims.
// model::Claim stays the value the allocator takes in and hands out: the
// constructor and ToClaim() convert, and ToClaim() gives back exactly the
// claim an entry was made from.
//
// The fields the scheduling paths read keep Claim's names and shapes
// (status.reserved_for, spec.owner_vm ...); the pooled ones are functions
// (spec.resource_name(), status.node()), and so is uid(). The small ones of
// spec and status (count, reclaim_policy, phase) sit together in the entry
// itself, where each would otherwise bring its own padding.
//
// Thread-safety: a value type; ClusterState guards its entries.
#ifndef PDC_ALLOCATOR_CLAIM_ENTRY_H_
#define PDC_ALLOCATOR_CLAIM_ENTRY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "allocator/name_pool.h"
#include "model/types.h"

namespace pdc {

// A canonical UUID (8-4-4-4-12 lowercase hex digits) as its 16 bytes.
using PackedUuid = std::array<uint8_t, 16>;
// `text` packed, or nullopt when it is not a canonical UUID (upper case hex,
// other lengths, ""): such a uid is kept as text.
std::optional<PackedUuid> PackUuid(std::string_view text);
// The canonical text of `uuid`.
std::string UnpackUuid(const PackedUuid& uuid);

class ClaimEntry {
 public:
  struct Spec {
    const std::string& resource_name() const { return NamePool::Text(resource); }

    const std::string* resource = nullptr;  // Pooled.
    std::string owner_vm;
    std::string owner_vm_uid;
  };
  struct Status {
    const std::string& node() const { return NamePool::Text(node_name); }
    // As ClaimStatus::HandoffPending.
    bool HandoffPending() const {
      return reserved_for.has_value() && reserved_for->pod_uid != handed_off_to;
    }

    const std::string* node_name = nullptr;  // Pooled; nullptr: "".
    absl::InlinedVector<BoundDevice, 1> devices;  // Sorted by address.
    std::optional<Reservation> reserved_for;
    std::string handed_off_to;
  };

  // Takes `claim` over, its names pooled in `names`. The entry holds them
  // until ReleaseNames.
  ClaimEntry(Claim claim, NamePool& names);
  ClaimEntry(ClaimEntry&&) = default;
  ClaimEntry& operator=(ClaimEntry&&) = default;
  ClaimEntry(const ClaimEntry&) = delete;
  ClaimEntry& operator=(const ClaimEntry&) = delete;

  // Gives the entry's names back to the pool they came from; the entry must
  // not be read afterwards. REQUIRES: called once, before the entry goes.
  void ReleaseNames(NamePool& names);

  // The claim this entry was made from.
  Claim ToClaim() const;
  std::string uid() const;
  // ClaimStatus::lost_reason (kept out of line).
  std::string_view lost_reason() const {
    return rare_ == nullptr ? std::string_view() : rare_->lost_reason;
  }
  // Whether the out-of-line block exists (for tests: most claims have none).
  bool has_rare_fields() const { return rare_ != nullptr; }

  ClaimKey key;
  Spec spec;
  Status status;
  int32_t count = 1;                                      // ClaimSpec::count.
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;  // ClaimSpec::reclaim_policy.
  ClaimPhase phase = ClaimPhase::kPending;                // ClaimStatus::phase.
  uint64_t created_revision = 0;

 private:
  struct Rare {
    std::optional<std::string> uid;  // When it is not a canonical UUID.
    std::string node;  // ClaimSpec's pins.
    std::string serial;
    std::optional<PciAddress> address;
    std::string lost_reason;
  };

  PackedUuid uid_{};  // The uid, unless the out-of-line block has it.
  std::unique_ptr<const Rare> rare_;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_CLAIM_ENTRY_H_
