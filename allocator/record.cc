#include "allocator/record.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "allocator/codec.h"

namespace pdc {
namespace {

using codec::Decoder;
using codec::Encoder;

// Tags of the mutation kinds on disk. Never renumber.
enum Tag : uint8_t {
  kTagPutClaim = 1,
  kTagDeleteClaim = 2,
  kTagPutNode = 3,
  kTagDeleteNode = 4,
};
// Version 2 added ClaimStatus::handed_off_to; version 1 records still decode
// (their reservations count as handed off: they predate the hand-off gate).
// Version 3 added NodeRecord::released; older node records have none (their
// Retain-policy devices were freed at once).
// Version 4 added the VM UIDs (ClaimSpec::owner_vm_uid, Reservation::vm_uid)
// at the end of a claim; older claims decode with "" (unknown).
// Version 5 added Reservation::claim_rank after the VM UID; older
// reservations decode with 0 (unknown: the claim key orders the hand-off).
// Version 6 added Device::unhealthy_reason after the health; older unhealthy
// devices decode as kUnspecified.
// Version 7 added ReleasedDevice::claim_uid after the mark's claim key;
// older marks decode with "" (unknown: the namespace still decides who may
// pin the device back).
// Version 8 added Reservation::vmi_uid after the claim rank; older
// reservations decode with "" (unknown: any pod of the VM may take it over).
constexpr uint8_t kFormatVersion = 8;
constexpr uint8_t kOldestFormatVersion = 1;

void EncodeDevice(Encoder& e, const Device& d) {
  e.Fixed32(d.address.packed());
  e.Varint(d.vendor_id);
  e.Varint(d.device_id);
  e.Varint(d.class_code);
  e.Signed(d.iommu_group);
  e.Signed(d.numa_node);
  e.U8(static_cast<uint8_t>(d.health));
  e.U8(static_cast<uint8_t>(d.unhealthy_reason));
  e.String(d.serial);
  e.String(d.driver);
}

void DecodeDevice(Decoder& d, uint8_t version, Device& out) {
  out.address = PciAddress::FromPacked(d.Fixed32());
  out.vendor_id = static_cast<uint16_t>(d.Varint());
  out.device_id = static_cast<uint16_t>(d.Varint());
  out.class_code = static_cast<uint32_t>(d.Varint());
  out.iommu_group = static_cast<int32_t>(d.Signed());
  out.numa_node = static_cast<int16_t>(d.Signed());
  uint8_t health = d.U8();
  if (health > 1) d.Fail();
  out.health = static_cast<DeviceHealth>(health);
  uint8_t reason = version >= 6 ? d.U8() : static_cast<uint8_t>(UnhealthyReason::kNone);
  if (reason > static_cast<uint8_t>(kLastUnhealthyReason)) d.Fail();
  out.unhealthy_reason = static_cast<UnhealthyReason>(reason);
  if (out.health == DeviceHealth::kUnhealthy && reason == 0) {
    out.unhealthy_reason = UnhealthyReason::kUnspecified;
  }
  if (out.health == DeviceHealth::kHealthy && reason != 0) d.Fail();
  out.serial = std::string(d.String());
  out.driver = std::string(d.String());
}

void EncodeKey(Encoder& e, const ClaimKey& k) {
  e.String(k.ns);
  e.String(k.name);
}

void DecodeKey(Decoder& d, ClaimKey& k) {
  k.ns = std::string(d.String());
  k.name = std::string(d.String());
}

void EncodeReservation(Encoder& e, const std::optional<Reservation>& r) {
  e.U8(r.has_value() ? 1 : 0);
  if (!r) return;
  e.String(r->vm);
  e.String(r->pod_name);
  e.String(r->pod_uid);
}

void DecodeReservation(Decoder& d, std::optional<Reservation>& r) {
  uint8_t present = d.U8();
  if (present > 1) d.Fail();
  if (present != 1) {
    r.reset();
    return;
  }
  r.emplace();
  r->vm = std::string(d.String());
  r->pod_name = std::string(d.String());
  r->pod_uid = std::string(d.String());
}

void EncodeClaim(Encoder& e, const Claim& c) {
  EncodeKey(e, c.key);
  e.String(c.uid);
  e.Varint(c.created_revision);
  const ClaimSpec& s = c.spec;
  e.String(s.resource_name);
  e.Varint(static_cast<uint64_t>(s.count));
  e.String(s.node);
  e.String(s.serial);
  e.U8(s.address.has_value() ? 1 : 0);
  if (s.address) e.Fixed32(s.address->packed());
  e.U8(static_cast<uint8_t>(s.reclaim_policy));
  e.String(s.owner_vm);
  const ClaimStatus& st = c.status;
  e.U8(static_cast<uint8_t>(st.phase));
  e.String(st.node);
  e.Varint(st.devices.size());
  for (const BoundDevice& b : st.devices) {
    e.Fixed32(b.address.packed());
    e.String(b.serial);
  }
  e.String(st.lost_reason);
  EncodeReservation(e, st.reserved_for);
  e.String(st.handed_off_to);
  e.String(s.owner_vm_uid);
  if (st.reserved_for) e.String(st.reserved_for->vm_uid);
  if (st.reserved_for) e.Varint(st.reserved_for->claim_rank);
  if (st.reserved_for) e.String(st.reserved_for->vmi_uid);
}

void DecodeClaim(Decoder& d, uint8_t version, Claim& c) {
  DecodeKey(d, c.key);
  c.uid = std::string(d.String());
  c.created_revision = d.Varint();
  ClaimSpec& s = c.spec;
  s.resource_name = std::string(d.String());
  uint64_t count = d.Varint();
  if (count > INT32_MAX) d.Fail();
  s.count = static_cast<int32_t>(count);
  s.node = std::string(d.String());
  s.serial = std::string(d.String());
  uint8_t has_address = d.U8();
  if (has_address > 1) d.Fail();
  if (has_address == 1) {
    s.address = PciAddress::FromPacked(d.Fixed32());
  } else {
    s.address.reset();
  }
  uint8_t policy = d.U8();
  if (policy > 1) d.Fail();
  s.reclaim_policy = static_cast<ReclaimPolicy>(policy);
  s.owner_vm = std::string(d.String());
  ClaimStatus& st = c.status;
  uint8_t phase = d.U8();
  if (phase > 2) d.Fail();
  st.phase = static_cast<ClaimPhase>(phase);
  st.node = std::string(d.String());
  uint64_t n = d.Count(5);
  st.devices.resize(n);
  for (BoundDevice& b : st.devices) {
    b.address = PciAddress::FromPacked(d.Fixed32());
    b.serial = std::string(d.String());
  }
  st.lost_reason = std::string(d.String());
  DecodeReservation(d, st.reserved_for);
  if (version >= 2) {
    st.handed_off_to = std::string(d.String());
  } else {
    st.handed_off_to = st.reserved_for ? st.reserved_for->pod_uid : "";
  }
  s.owner_vm_uid.clear();
  if (version < 4) return;
  s.owner_vm_uid = std::string(d.String());
  if (st.reserved_for) st.reserved_for->vm_uid = std::string(d.String());
  if (version < 5 || !st.reserved_for) return;
  const uint64_t rank = d.Varint();
  if (rank > UINT32_MAX) d.Fail();
  st.reserved_for->claim_rank = static_cast<uint32_t>(rank);
  if (version < 8) return;
  st.reserved_for->vmi_uid = std::string(d.String());
}

void EncodeNode(Encoder& e, const NodeRecord& n) {
  e.String(n.inventory.node);
  e.Varint(n.inventory.devices.size());
  for (const Device& dev : n.inventory.devices) EncodeDevice(e, dev);
  e.Varint(n.return_to_host.size());
  for (PciAddress a : n.return_to_host) e.Fixed32(a.packed());
  e.Varint(n.released.size());
  for (const ReleasedDevice& r : n.released) {
    e.Fixed32(r.address.packed());
    e.String(r.serial);
    EncodeKey(e, r.claim);
    e.String(r.claim_uid);
  }
}

void DecodeNode(Decoder& d, uint8_t version, NodeRecord& n) {
  n.inventory.node = std::string(d.String());
  uint64_t count = d.Count(version >= 6 ? 14 : 13);
  n.inventory.devices.resize(count);
  for (Device& dev : n.inventory.devices) DecodeDevice(d, version, dev);
  uint64_t returns = d.Count(4);
  n.return_to_host.resize(returns);
  for (PciAddress& a : n.return_to_host) a = PciAddress::FromPacked(d.Fixed32());
  n.released.clear();
  if (version < 3) return;
  uint64_t released = d.Count(version >= 7 ? 8 : 7);
  n.released.resize(released);
  for (ReleasedDevice& r : n.released) {
    r.address = PciAddress::FromPacked(d.Fixed32());
    r.serial = std::string(d.String());
    DecodeKey(d, r.claim);
    if (version >= 7) r.claim_uid = std::string(d.String());
  }
}

}  // namespace

std::string EncodeRecord(const Record& record) {
  std::string out;
  // A bind's record (one or two claims) fits without regrowing.
  out.reserve(256 * record.mutations.size());
  Encoder e(&out);
  e.U8(kFormatVersion);
  e.Varint(record.revision);
  e.Varint(record.mutations.size());
  for (const Mutation& m : record.mutations) {
    if (const auto* p = std::get_if<PutClaim>(&m)) {
      e.U8(kTagPutClaim);
      EncodeClaim(e, p->claim);
    } else if (const auto* p = std::get_if<DeleteClaim>(&m)) {
      e.U8(kTagDeleteClaim);
      EncodeKey(e, p->key);
    } else if (const auto* p = std::get_if<PutNode>(&m)) {
      e.U8(kTagPutNode);
      EncodeNode(e, p->node);
    } else if (const auto* p = std::get_if<DeleteNode>(&m)) {
      e.U8(kTagDeleteNode);
      e.String(p->node);
    }
  }
  return out;
}

PutsEncoder::PutsEncoder(uint64_t revision, size_t puts, size_t bytes) {
  // The header takes at most 21 bytes; 160 is a little more than a typical
  // claim.
  out_.reserve(bytes > 0 ? bytes + 21 : 160 * puts);
  Encoder e(&out_);
  e.U8(kFormatVersion);
  e.Varint(revision);
  e.Varint(puts);
}

void PutsEncoder::Put(const NodeRecord& node) { EncodePut(node, &out_); }

void PutsEncoder::Put(const Claim& claim) { EncodePut(claim, &out_); }

void PutsEncoder::EncodePut(const NodeRecord& node, std::string* out) {
  Encoder e(out);
  e.U8(kTagPutNode);
  EncodeNode(e, node);
}

void PutsEncoder::EncodePut(const Claim& claim, std::string* out) {
  Encoder e(out);
  e.U8(kTagPutClaim);
  EncodeClaim(e, claim);
}

std::pair<std::string_view, std::string_view> PutsEncoder::EncodedClaimKey(
    std::string_view put) {
  Decoder d(put);
  d.U8();  // kTagPutClaim
  std::string_view ns = d.String();
  std::string_view name = d.String();
  return {ns, name};
}

std::string PutsEncoder::Finish() && { return std::move(out_); }

absl::StatusOr<Record> DecodeRecord(std::string_view bytes) {
  Decoder d(bytes);
  Record r;
  uint8_t version = d.U8();
  if (d.ok() && (version < kOldestFormatVersion || version > kFormatVersion)) {
    return absl::DataLossError(
        absl::StrCat("record format version ", version, " is not supported (want ",
                     kOldestFormatVersion, " to ", kFormatVersion, ")"));
  }
  r.revision = d.Varint();
  uint64_t n = d.Count(2);
  r.mutations.reserve(n);
  for (uint64_t i = 0; i < n && d.ok(); ++i) {
    uint8_t tag = d.U8();
    switch (tag) {
      case kTagPutClaim: {
        PutClaim p;
        DecodeClaim(d, version, p.claim);
        r.mutations.emplace_back(std::move(p));
        break;
      }
      case kTagDeleteClaim: {
        DeleteClaim p;
        DecodeKey(d, p.key);
        r.mutations.emplace_back(std::move(p));
        break;
      }
      case kTagPutNode: {
        PutNode p;
        DecodeNode(d, version, p.node);
        r.mutations.emplace_back(std::move(p));
        break;
      }
      case kTagDeleteNode: {
        DeleteNode p;
        p.node = std::string(d.String());
        r.mutations.emplace_back(std::move(p));
        break;
      }
      default:
        d.Fail();
    }
  }
  if (!d.ok() || !d.done()) {
    return absl::DataLossError(absl::StrCat(
        "malformed record: inconsistent encoding at byte ", d.position(), " of ",
        bytes.size()));
  }
  return r;
}

}  // namespace pdc
