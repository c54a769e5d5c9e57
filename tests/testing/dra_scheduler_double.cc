#include "tests/testing/dra_scheduler_double.h"

#include <algorithm>
#include <set>
#include <utility>

#include "tests/testing/sv_strings.h"

namespace pdc::testing {
namespace {

using kube::Document;
using kube::Value;

constexpr int kMaxConflicts = 16;
constexpr std::string_view kFinalizer = "resource.kubernetes.io/delete-protection";

// The node of matchFields metadata.name In [node] in the node selector.
std::string SelectorNode(const Value& allocation) {
  const Value* terms =
      kube::Find(allocation, {"nodeSelector", "nodeSelectorTerms"});
  if (terms == nullptr || !terms->IsArray()) return "";
  for (const Value& t : terms->GetArray()) {
    const Value* fields = kube::Find(t, {"matchFields"});
    if (fields == nullptr || !fields->IsArray()) continue;
    for (const Value& f : fields->GetArray()) {
      const std::vector<std::string> v = kube::GetStrings(f, {"values"});
      if (kube::GetString(f, {"key"}) == "metadata.name" &&
          kube::GetString(f, {"operator"}) == "In" && v.size() == 1) {
        return v[0];
      }
    }
  }
  return "";
}

bool Allocated(const Value& claim) {
  const Value* a = kube::Find(claim, {"status", "allocation"});
  return a != nullptr && a->IsObject();
}

std::string AllocationJson(std::string_view request, const AllocatedDevice& d) {
  return Cat(R"({"devices":{"results":[{"request":")", request,
             R"(","driver":")", d.driver, R"(","pool":")", d.pool,
             R"(","device":")", d.device,
             R"("}]},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":[")",
             d.node, R"("]}]}]}})");
}

// Appends {resource: pods, name, uid} unless an entry has that uid.
void Reserve(Document& claim, std::string_view pod, std::string_view uid) {
  auto& a = claim.GetAllocator();
  Value* list = kube::FindMutable(claim, {"status", "reservedFor"});
  if (list == nullptr || !list->IsArray()) {
    kube::Set(claim, {"status", "reservedFor"}, Value(rapidjson::kArrayType), a);
    list = kube::FindMutable(claim, {"status", "reservedFor"});
  }
  for (const Value& e : list->GetArray()) {
    if (kube::GetString(e, {"uid"}) == uid) return;
  }
  Value e(rapidjson::kObjectType);
  kube::SetString(e, {"resource"}, "pods", a);
  kube::SetString(e, {"name"}, pod, a);
  kube::SetString(e, {"uid"}, uid, a);
  list->PushBack(e, a);
}

}  // namespace

std::vector<AllocatedDevice> AllocatedDevices(const Value& claim) {
  std::vector<AllocatedDevice> out;
  if (!Allocated(claim)) return out;
  const Value& alloc = *kube::Find(claim, {"status", "allocation"});
  const std::string node = SelectorNode(alloc);
  const Value* results = kube::Find(alloc, {"devices", "results"});
  if (results == nullptr || !results->IsArray()) return out;
  for (const Value& r : results->GetArray()) {
    out.push_back({kube::GetString(r, {"driver"}), kube::GetString(r, {"pool"}),
                   kube::GetString(r, {"device"}), node});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<DraSchedulerDouble>> DraSchedulerDouble::Start(
    const std::string& api_url, std::vector<DeviceClassDouble> classes,
    std::vector<ResourceSliceDouble> slices) {
  absl::StatusOr<std::unique_ptr<kube::KubeJsonClient>> api =
      kube::KubeJsonClient::Connect(api_url);
  if (!api.ok()) return api.status();
  return std::unique_ptr<DraSchedulerDouble>(new DraSchedulerDouble(
      *std::move(api), std::move(classes), std::move(slices)));
}

absl::StatusOr<DraSchedulerDouble::Placement> DraSchedulerDouble::Schedule(
    std::string_view ns, std::string_view pod, std::string_view claim,
    const std::vector<std::string>& nodes, bool* deallocated) {
  if (deallocated != nullptr) *deallocated = false;
  for (int i = 0;; ++i) {
    absl::StatusOr<Placement> p = TryOnce(ns, pod, claim, nodes, deallocated);
    if (p.ok() || !absl::IsAborted(p.status()) || i + 1 >= kMaxConflicts) {
      return p;
    }
  }
}

absl::StatusOr<AllocatedDevice> DraSchedulerDouble::PickDevice(
    const Value& claim, const std::vector<std::string>& nodes,
    std::string* request) {
  const Value* requests = kube::Find(claim, {"spec", "devices", "requests"});
  if (requests == nullptr || !requests->IsArray() || requests->Size() != 1) {
    return absl::UnimplementedError(
        "the DRA scheduling double allocates claims of exactly one request");
  }
  const Value& req = (*requests)[0];
  *request = kube::GetString(req, {"name"});
  const Value* exactly = kube::Find(req, {"exactly"});
  if (exactly == nullptr || kube::Find(*exactly, {"selectors"}) != nullptr ||
      (kube::Find(*exactly, {"count"}) != nullptr &&
       kube::GetInt(*exactly, {"count"}) != 1)) {
    return absl::UnimplementedError(
        "the DRA scheduling double understands `exactly` requests of one "
        "device without selectors (no CEL)");
  }
  const std::string cls = kube::GetString(*exactly, {"deviceClassName"});
  auto c = std::find_if(classes_.begin(), classes_.end(),
                        [&](const DeviceClassDouble& d) { return d.name == cls; });
  if (c == classes_.end()) {
    return absl::FailedPreconditionError(
        Cat("DeviceClass \"", cls, "\" not found"));
  }
  absl::StatusOr<Document> all = api_->Get("/apis/resource.k8s.io/v1/resourceclaims");
  if (!all.ok()) return all.status();
  std::set<std::tuple<std::string, std::string, std::string>> used;
  if (const Value* items = kube::Find(*all, {"items"}); items != nullptr && items->IsArray()) {
    for (const Value& i : items->GetArray()) {
      for (const AllocatedDevice& d : AllocatedDevices(i)) used.insert({d.driver, d.pool, d.device});
    }
  }
  for (const std::string& node : nodes) {
    for (const ResourceSliceDouble& s : slices_) {
      if (s.node != node || s.driver != c->driver) continue;
      for (const std::string& dev : s.devices) {
        if (!used.count({s.driver, s.pool, dev})) return AllocatedDevice{s.driver, s.pool, dev, node};
      }
    }
  }
  return absl::ResourceExhaustedError(
      Cat("cannot allocate all claims: no free device of class ", cls));
}

absl::StatusOr<DraSchedulerDouble::Placement> DraSchedulerDouble::TryOnce(
    std::string_view ns, std::string_view pod, std::string_view claim_name,
    const std::vector<std::string>& nodes, bool* deallocated) {
  absl::StatusOr<Document> p = api_->Get(kube::PodPath(ns, pod));
  if (!p.ok()) return p.status();
  const std::string uid = kube::GetString(*p, {"metadata", "uid"});
  if (const std::string bound = kube::GetString(*p, {"spec", "nodeName"}); !bound.empty()) {
    return Placement{bound, false};
  }
  const std::string path = kube::ClaimPath(ns, claim_name);
  absl::StatusOr<Document> claim = api_->Get(path);
  if (!claim.ok()) return claim.status();
  auto& a = claim->GetAllocator();
  Placement out;
  if (Allocated(*claim)) {
    out.node = SelectorNode(*kube::Find(*claim, {"status", "allocation"}));
    if (std::find(nodes.begin(), nodes.end(), out.node) == nodes.end()) {
      // PostFilter: deallocate only what nobody else reserved.
      const Value* list = kube::Find(*claim, {"status", "reservedFor"});
      const bool others = list != nullptr && list->IsArray() &&
                          std::any_of(list->Begin(), list->End(), [&](const Value& e) {
                            return kube::GetString(e, {"uid"}) != uid;
                          });
      if (!others) {
        kube::Remove(*claim, {"status", "allocation"});
        kube::Remove(*claim, {"status", "reservedFor"});
        absl::StatusOr<Document> w = api_->Put(Cat(path, "/status"), *claim);
        if (!w.ok()) return w.status();
        if (deallocated != nullptr) *deallocated = true;
      }
      return absl::FailedPreconditionError(
          Cat("node(s) did not match the allocation of claim ", claim_name,
              " (node ", out.node, ")", others ? "; reserved by others, kept" : "; deallocated"));
    }
  } else {
    std::string request;
    absl::StatusOr<AllocatedDevice> d = PickDevice(*claim, nodes, &request);
    if (!d.ok()) return d.status();
    out.node = d->node;
    out.allocated_now = true;
    std::vector<std::string> f = kube::GetStrings(*claim, {"metadata", "finalizers"});
    if (std::find(f.begin(), f.end(), kFinalizer) == f.end()) {
      Value* fin = kube::FindMutable(*claim, {"metadata", "finalizers"});
      if (fin == nullptr || !fin->IsArray()) {
        kube::Set(*claim, {"metadata", "finalizers"}, Value(rapidjson::kArrayType), a);
        fin = kube::FindMutable(*claim, {"metadata", "finalizers"});
      }
      fin->PushBack(Value(std::string(kFinalizer).c_str(), a), a);
      absl::StatusOr<Document> w = api_->Put(path, *claim);
      if (!w.ok()) return w.status();
      claim->CopyFrom(*w, claim->GetAllocator());
    }
    Document alloc;
    const std::string json = AllocationJson(request, *d);
    alloc.Parse(json.data(), json.size());
    kube::Set(*claim, {"status", "allocation"}, Value(alloc, a), a);
  }
  Reserve(*claim, pod, uid);
  absl::StatusOr<Document> w = api_->Put(Cat(path, "/status"), *claim);
  if (!w.ok()) return w.status();
  if (absl::Status s = Bind(ns, pod, out.node); !s.ok()) return s;
  return out;
}

absl::Status DraSchedulerDouble::Bind(std::string_view ns, std::string_view pod,
                                      std::string_view node) {
  absl::StatusOr<Document> r = api_->Post(
      Cat(kube::PodPath(ns, pod), "/binding"),
      Cat(R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":")", pod,
          R"("},"target":{"apiVersion":"v1","kind":"Node","name":")", node, R"("}})"));
  return r.status();
}

}  // namespace pdc::testing
