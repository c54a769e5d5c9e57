#include "allocator/claim_entry.h"

#include <utility>

#include "common/strings.h"

namespace pdc {
namespace {

// Where the hex digits of a canonical UUID are: groups 8-4-4-4-12.
constexpr size_t kUuidLength = 36;
bool IsDash(size_t i) { return i == 8 || i == 13 || i == 18 || i == 23; }

int LowerHexValue(char c) { return c >= 'A' && c <= 'F' ? -1 : HexDigitValue(c); }

// A field added to Claim must be carried here too (the constructor and
// ToClaim), or an entry would drop it without a word: this trips first.
#if defined(__GLIBCXX__) && __SIZEOF_POINTER__ == 8
static_assert(sizeof(Claim) == 592 && sizeof(ClaimSpec) == 184 && sizeof(ClaimStatus) == 304,
              "Claim changed: carry the change in ClaimEntry, then update these sizes");
#endif

}  // namespace

std::optional<PackedUuid> PackUuid(std::string_view text) {
  if (text.size() != kUuidLength) return std::nullopt;
  PackedUuid out{};
  size_t nibble = 0;
  for (size_t i = 0; i < kUuidLength; ++i) {
    if (IsDash(i)) {
      if (text[i] != '-') return std::nullopt;
      continue;
    }
    const int v = LowerHexValue(text[i]);
    if (v < 0) return std::nullopt;
    out[nibble / 2] = static_cast<uint8_t>(out[nibble / 2] | (nibble % 2 == 0 ? v << 4 : v));
    ++nibble;
  }
  return out;
}

std::string UnpackUuid(const PackedUuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(kUuidLength);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[uuid[i] >> 4]);
    out.push_back(kHex[uuid[i] & 0xf]);
  }
  return out;
}

ClaimEntry::ClaimEntry(Claim claim, NamePool& names)
    : key(std::move(claim.key)),
      count(claim.spec.count),
      reclaim_policy(claim.spec.reclaim_policy),
      phase(claim.status.phase),
      created_revision(claim.created_revision) {
  spec.resource = names.Intern(claim.spec.resource_name);
  spec.owner_vm = std::move(claim.spec.owner_vm);
  spec.owner_vm_uid = std::move(claim.spec.owner_vm_uid);
  status.node_name = names.Intern(claim.status.node);
  status.devices.assign(std::make_move_iterator(claim.status.devices.begin()),
                        std::make_move_iterator(claim.status.devices.end()));
  status.reserved_for = std::move(claim.status.reserved_for);
  status.handed_off_to = std::move(claim.status.handed_off_to);

  const std::optional<PackedUuid> packed = PackUuid(claim.uid);
  if (packed.has_value()) uid_ = *packed;
  if (packed.has_value() && claim.spec.node.empty() && claim.spec.serial.empty() &&
      !claim.spec.address.has_value() && claim.status.lost_reason.empty()) {
    return;
  }
  auto rare = std::make_unique<Rare>();
  if (!packed.has_value()) rare->uid = std::move(claim.uid);
  rare->node = std::move(claim.spec.node);
  rare->serial = std::move(claim.spec.serial);
  rare->address = claim.spec.address;
  rare->lost_reason = std::move(claim.status.lost_reason);
  rare_ = std::move(rare);
}

void ClaimEntry::ReleaseNames(NamePool& names) {
  names.Release(spec.resource);
  names.Release(status.node_name);
  spec.resource = nullptr;
  status.node_name = nullptr;
}

std::string ClaimEntry::uid() const {
  if (rare_ != nullptr && rare_->uid.has_value()) return *rare_->uid;
  return UnpackUuid(uid_);
}

Claim ClaimEntry::ToClaim() const {
  Claim c;
  c.key = key;
  c.uid = uid();
  c.spec.resource_name = spec.resource_name();
  c.spec.count = count;
  c.spec.reclaim_policy = reclaim_policy;
  c.spec.owner_vm = spec.owner_vm;
  c.spec.owner_vm_uid = spec.owner_vm_uid;
  c.status.phase = phase;
  c.status.node = status.node();
  c.status.devices.assign(status.devices.begin(), status.devices.end());
  c.status.reserved_for = status.reserved_for;
  c.status.handed_off_to = status.handed_off_to;
  c.created_revision = created_revision;
  if (rare_ != nullptr) {
    c.spec.node = rare_->node;
    c.spec.serial = rare_->serial;
    c.spec.address = rare_->address;
    c.status.lost_reason = rare_->lost_reason;
  }
  return c;
}

}  // namespace pdc
