// The unit of persistence: one Record is one atomic change of the allocator's
// durable state (a bind, a claim creation, an inventory change), made of
// key-level puts and deletes. Snapshots are Records too (all puts), so the
// file store, the memory store and a later etcd store share one encoding.
// Thread-safety: value types.
#ifndef PDC_ALLOCATOR_RECORD_H_
#define PDC_ALLOCATOR_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "model/types.h"

namespace pdc {

// Persisted per-node state: the inventory as last reported, the devices
// whose Delete-policy claim was deleted and that the node driver must hand
// back to their host driver, and the devices whose Retain-policy claim was
// deleted (Released). Neither kind is offered to a claim (docs/design.md
// §4.7), except a Released device to a claim that pins it.
struct NodeRecord {
  NodeInventory inventory;
  std::vector<PciAddress> return_to_host;  // Sorted.
  std::vector<ReleasedDevice> released;    // Sorted by address, no repeats.

  bool operator==(const NodeRecord&) const = default;
};

struct PutClaim {
  Claim claim;
  bool operator==(const PutClaim&) const = default;
};
struct DeleteClaim {
  ClaimKey key;
  bool operator==(const DeleteClaim&) const = default;
};
struct PutNode {
  NodeRecord node;
  bool operator==(const PutNode&) const = default;
};
struct DeleteNode {
  std::string node;
  bool operator==(const DeleteNode&) const = default;
};

using Mutation = std::variant<PutClaim, DeleteClaim, PutNode, DeleteNode>;

struct Record {
  // Revision of the state after this record is applied. Records of one store
  // have consecutive revisions starting at 1. A snapshot record carries the
  // revision it captures.
  uint64_t revision = 0;
  std::vector<Mutation> mutations;

  bool operator==(const Record&) const = default;
};

// Compact binary encoding (varints, length-prefixed strings). Decode never
// trusts its input: any inconsistency is DataLoss naming what was wrong.
std::string EncodeRecord(const Record& record);
absl::StatusOr<Record> DecodeRecord(std::string_view bytes);

// Encodes a record of puts straight from the objects, so that a checkpoint
// need not copy the whole state into a Record first. Finish() returns what
// EncodeRecord returns for a Record with the same puts in the same order;
// exactly `puts` Put calls must precede it.
class PutsEncoder {
 public:
  // `bytes`: what the puts will take, when known (else a guess is reserved).
  PutsEncoder(uint64_t revision, size_t puts, size_t bytes = 0);
  void Put(const NodeRecord& node);
  void Put(const Claim& claim);
  // A put encoded apart by EncodePut, appended as it is.
  void PutEncoded(std::string_view put) { out_.append(put); }
  std::string Finish() &&;

  // Append to *out exactly the bytes Put writes for `node` / `claim`: a
  // checkpoint encodes its puts in pieces and joins them in snapshot order.
  static void EncodePut(const NodeRecord& node, std::string* out);
  static void EncodePut(const Claim& claim, std::string* out);
  // The claim key (namespace, name) a claim put written by EncodePut starts
  // with, as views into `put`. REQUIRES: `put` begins with such a put.
  static std::pair<std::string_view, std::string_view> EncodedClaimKey(std::string_view put);

 private:
  std::string out_;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_RECORD_H_
