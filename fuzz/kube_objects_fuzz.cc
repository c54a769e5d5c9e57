// What pdc-extender reads from the apiserver's list and watch answers
// (api/kube_objects.h): never crashes, and what it accepts is within the
// bounds it promises (names and namespaces valid, UIDs and resource versions
// bounded, at most 64 owner references and finalizers, one controller at most
// reported); and the PersistentDeviceClaim objects and holds ConfigMaps of
// store: kubernetes (api/claim_object.h), whose accepted contents must be
// what the claim codec accepts and sorted, unique holds.
#include <algorithm>

#include "api/claim_object.h"
#include "api/kube_objects.h"
#include "api/validation.h"
#include "fuzz/fuzz_util.h"
#include "rapidjson/document.h"

namespace {

void CheckMeta(const pdc::api::ObjectMeta& m) {
  using pdc::fuzz::Broken;
  if (!pdc::api::ValidateObjectName("name", m.name).ok()) Broken("accepted a bad name", m.name);
  if (!m.ns.empty() && !pdc::api::ValidateNamespace("ns", m.ns).ok()) {
    Broken("accepted a bad namespace", m.ns);
  }
  if (!pdc::api::ValidateUid("uid", m.uid).ok()) Broken("accepted a bad uid", m.uid);
  if (m.resource_version.empty() || m.resource_version.size() > pdc::api::kMaxUidLength) {
    Broken("accepted an unbounded resourceVersion", m.resource_version);
  }
  if (m.owners.size() > 64 || m.finalizers.size() > 64) Broken("accepted too many entries");
  for (const pdc::api::OwnerReference& o : m.owners) {
    if (!pdc::api::ValidateUid("owner uid", o.uid).ok()) Broken("accepted a bad owner uid", o.uid);
    if (o.kind.empty() || o.kind.size() > 63) Broken("accepted a bad owner kind", o.kind);
  }
  const pdc::api::OwnerReference* c = m.Controller();
  if (c != nullptr && !c->controller) Broken("Controller() is not a controller");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  rapidjson::Document doc;
  if (!pdc::api::json::Parse(pdc::fuzz::AsText(data, size), &doc).ok()) return 0;
  if (auto e = pdc::api::ReadWatchEvent(doc); e.ok()) {
    if (pdc::api::ToString(e->type) == "UNKNOWN") pdc::fuzz::Broken("unnamed event type");
    if (auto m = pdc::api::ReadObjectMeta(*e->object, "WatchEvent.object"); m.ok()) CheckMeta(*m);
    if (auto s = pdc::api::ReadApiStatus(*e->object); s.ok()) {
      if (s->message.size() > 1024 || s->reason.size() > 64) pdc::fuzz::Broken("unbounded Status");
    }
  }
  if (auto m = pdc::api::ReadObjectMeta(doc, "Pod"); m.ok()) CheckMeta(*m);
  if (auto c = pdc::api::ReadClaimObject(doc); c.ok()) {
    CheckMeta(c->meta);
    if (c->claim.key.ns != c->meta.ns || c->claim.key.name != c->meta.name ||
        c->claim.uid != c->meta.uid) {
      pdc::fuzz::Broken("claim identity differs from its metadata");
    }
    if (c->claim.spec.resource_name.empty()) pdc::fuzz::Broken("claim without a resourceName");
    if (c->claim.spec.count < 1) pdc::fuzz::Broken("claim with count < 1");
    if (c->device_facts.size() != c->claim.status.devices.size()) {
      pdc::fuzz::Broken("device facts not one per status device");
    }
    if (c->conditions.size() > 16) pdc::fuzz::Broken("unbounded conditions");
    for (const pdc::api::ClaimCondition& k : c->conditions) {
      if (k.message.size() > 32768 || k.reason.size() > 1024) pdc::fuzz::Broken("long condition");
    }
  }
  if (auto h = pdc::api::ReadNodeHolds(doc); h.ok()) {
    CheckMeta(h->meta);
    if (!std::is_sorted(h->return_to_host.begin(), h->return_to_host.end()) ||
        std::adjacent_find(h->return_to_host.begin(), h->return_to_host.end()) !=
            h->return_to_host.end()) {
      pdc::fuzz::Broken("unsorted or repeated returnToHost");
    }
    for (size_t i = 1; i < h->released.size(); ++i) {
      if (!(h->released[i - 1].address < h->released[i].address)) {
        pdc::fuzz::Broken("unsorted or repeated released");
      }
    }
  }
  if (auto l = pdc::api::ReadListMeta(doc); l.ok()) {
    if (l->resource_version.empty()) pdc::fuzz::Broken("list without a resourceVersion");
  }
  return 0;
}
