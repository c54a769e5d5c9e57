#include "extender/node_holds_objects.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/claim_object.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "kube/kube_reflector.h"

namespace pdc::extender {

namespace {

constexpr std::string_view kHoldsPrefix = "pdc-holds-";

std::string ConfigMapsPath(std::string_view ns) {
  return absl::StrCat("/api/v1/namespaces/", Sv(ns), "/configmaps");
}
std::string ConfigMapPath(std::string_view ns, std::string_view name) {
  return absl::StrCat(ConfigMapsPath(ns), "/", Sv(name));
}

}  // namespace

std::string HoldsConfigMapName(std::string_view node) {
  // FNV-1a, 64 bits: a node name is up to 253 bytes, a ConfigMap name too,
  // so the name cannot embed it; the node's name is inside and checked.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : node) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%s%016x", Sv(kHoldsPrefix), h);
}

absl::Status NodeHoldsObjects::List(absl::flat_hash_map<std::string, NodeHolds>* out) {
  namespace json = api::json;
  const absl::Time deadline = calls_->WriteDeadline();
  kube::CollectionList list;
  RETURN_IF_ERROR(kube::ListCollection(
      [&](const std::string& target) {
        return calls_->Call("GET", target, "", "", "list device holds", deadline);
      },
      kube::Listed(ConfigMapsPath(ns_)), "", calls_->options().list_page, &list));
  for (const json::Value* item : list.items) {
    const json::Value* meta = json::Find(*item, "metadata");
    const json::Value* name =
        meta != nullptr && meta->IsObject() ? json::Find(*meta, "name") : nullptr;
    if (name == nullptr || !name->IsString() || !json::StringOf(*name).starts_with(kHoldsPrefix)) {
      continue;  // Not one of pdc's.
    }
    // Holds keep devices from other claims: one pdc cannot read is fatal.
    absl::StatusOr<api::NodeHoldsObject> h = api::ReadNodeHolds(*item);
    if (!h.ok()) return absl::DataLossError(h.status().message());
    if (h->meta.name != HoldsConfigMapName(h->node)) {
      return absl::DataLossError(absl::StrCat("ConfigMap ", h->meta.Key(), " holds node ", h->node,
                                              " but is not named ", HoldsConfigMapName(h->node)));
    }
    NodeHolds holds{h->return_to_host, h->released};
    holds_[h->node] = HoldsObject{h->meta.uid, h->meta.resource_version, holds};
    (*out)[h->node] = std::move(holds);
  }
  return absl::OkStatus();
}

NodeHolds NodeHoldsObjects::Persisted(const std::string& node) const {
  auto it = holds_.find(node);
  return it == holds_.end() ? NodeHolds{} : it->second.holds;
}

std::vector<PciAddress> NodeHoldsObjects::Returning(const std::vector<PciAddress>& devices,
                                                    const NodeHolds& holds) {
  std::vector<PciAddress> out;
  for (PciAddress a : devices) {
    if (std::find(holds.return_to_host.begin(), holds.return_to_host.end(), a) !=
        holds.return_to_host.end()) {
      out.push_back(a);
    }
  }
  return out;
}

absl::Status NodeHoldsObjects::Write(const std::string& node, const NodeHolds& holds) {
  namespace json = api::json;
  const absl::Time deadline = calls_->WriteDeadline();
  const std::string name = HoldsConfigMapName(node);
  const std::string what = absl::StrCat("write the device holds of node ", node);
  for (;;) {
    auto it = holds_.find(node);
    absl::StatusOr<pdc::HttpResponse> r;
    if (holds.empty()) {
      if (it == holds_.end()) return absl::OkStatus();
      r = calls_->Call("DELETE", ConfigMapPath(ns_, name),
                       DeleteWithPreconditions(it->second.uid, it->second.resource_version),
                       kStoreJson, what, deadline);
      if (!r.ok()) return r.status();
      if (r->status == 200 || r->status == 202 || r->status == 404) {
        holds_.erase(it);
        return absl::OkStatus();
      }
      if (r->status != 409) return kube::FromApiserver(r->status, r->body, what);
    } else if (it == holds_.end()) {
      r = calls_->Call(
          "POST", ConfigMapsPath(ns_),
          api::WriteNodeHolds(name, ns_, "", "", node, holds.return_to_host, holds.released),
          kStoreJson, what, deadline);
    } else {
      r = calls_->Call("PATCH", ConfigMapPath(ns_, name),
                       api::WriteNodeHolds(name, ns_, it->second.uid, it->second.resource_version,
                                           node, holds.return_to_host, holds.released),
                       kStoreMergePatch, what, deadline);
    }
    if (!r.ok()) return r.status();
    if (r->status == 200 || r->status == 201) {
      rapidjson::Document doc;
      RETURN_IF_ERROR(json::ParseObject(r->body, &doc));
      ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, "ConfigMap"));
      holds_[node] = HoldsObject{meta.uid, meta.resource_version, holds};
      return absl::OkStatus();
    }
    if (r->status == 404) {
      holds_.erase(node);  // Gone: create it again.
      continue;
    }
    if (r->status != 409) return kube::FromApiserver(r->status, r->body, what);
    // Exists already, or changed under us: take what is there and go on.
    ASSIGN_OR_RETURN(pdc::HttpResponse got,
                     calls_->Call("GET", ConfigMapPath(ns_, name), "", "", what, deadline));
    if (got.status == 404) {
      holds_.erase(node);
      continue;
    }
    if (got.status != 200) return kube::FromApiserver(got.status, got.body, what);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::ParseObject(got.body, &doc));
    ASSIGN_OR_RETURN(api::NodeHoldsObject cur, api::ReadNodeHolds(doc));
    holds_[node] = HoldsObject{cur.meta.uid, cur.meta.resource_version,
                               NodeHolds{cur.return_to_host, cur.released}};
  }
}

}  // namespace pdc::extender
