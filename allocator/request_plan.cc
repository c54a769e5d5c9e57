#include "allocator/request_plan.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "allocator/validation.h"
#include "model/names.h"

namespace pdc {
namespace {

constexpr char kClaimsAnnotation[] = "pdc.kubevirt.io/claims";

uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Collects explicit claims; returns a problem or "".
std::string AddExplicitClaims(const ClusterState& state, const SchedulingRequest& request,
                              RequestPlan& plan, std::vector<size_t>& explicit_count) {
  std::vector<std::string> names = request.claim_names;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& name : names) {
    if (absl::Status s = model::ValidateObjectName(kClaimsAnnotation, name); !s.ok()) {
      return std::string(s.message());
    }
    ClaimKey key{request.ns, name};
    const ClaimEntry* claim = state.FindClaim(key);
    if (claim == nullptr) {
      return absl::StrCat("claim ", key.ToString(), " (annotation ", kClaimsAnnotation,
                          ") does not exist");
    }
    int16_t cls = state.ClassIndex(claim->spec.resource_name());
    if (cls == kNoClass) {
      return absl::StrCat("claim ", key.ToString(), " asks for ", claim->spec.resource_name(),
                          ", which is not a configured device class");
    }
    explicit_count[cls] += static_cast<size_t>(claim->count);
    plan.claims.push_back(ResolvedClaim{key, true, claim->ToClaim()});
  }
  return "";
}

// Adds one template claim per class the explicit claims do not cover.
std::string AddTemplateClaims(const ClusterState& state, const AllocatorOptions& options,
                              const SchedulingRequest& request,
                              const std::vector<size_t>& requested,
                              const std::vector<size_t>& explicit_count, RequestPlan& plan) {
  const auto& classes = state.classes();
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::string& resource = classes[c].resource_name;
    if (explicit_count[c] > requested[c]) {
      return absl::StrCat("the pod's claims provide ", explicit_count[c], " ", resource,
                          " but the pod requests ", requested[c]);
    }
    const size_t rest = requested[c] - explicit_count[c];
    if (rest == 0) continue;
    if (rest > static_cast<size_t>(kMaxClaimCount)) {
      return absl::StrCat("the pod requests ", rest, " ", resource,
                          " beyond its named claims, more than one claim may hold (",
                          kMaxClaimCount, "); name claims in the annotation ",
                          kClaimsAnnotation, " for the rest");
    }
    ClaimKey key{request.ns, absl::StrCat(request.vm, "-", ResourceShortName(resource))};
    if (absl::Status s = model::ValidateObjectName("template claim name", key.name); !s.ok()) {
      return std::string(s.message());
    }
    for (const ResolvedClaim& r : plan.claims) {
      if (r.key == key) {
        return absl::StrCat("claim ", key.ToString(),
                            " is named explicitly but is also the template claim of VM ",
                            request.vm, " for ", resource);
      }
    }
    if (const ClaimEntry* existing = state.FindClaim(key)) {
      if (existing->spec.owner_vm != request.vm ||
          existing->spec.resource_name() != resource) {
        return absl::StrCat("claim ", key.ToString(), " exists but is not VM ", request.vm,
                            "'s template claim for ", resource);
      }
      if (!existing->spec.owner_vm_uid.empty() && !request.vm_uid.empty() &&
          existing->spec.owner_vm_uid != request.vm_uid) {
        plan.problem_may_clear = true;
        return absl::StrCat("claim ", key.ToString(), " was made for an earlier VM named ",
                            request.vm, " (uid ", existing->spec.owner_vm_uid,
                            "); this VM (uid ", request.vm_uid,
                            ") gets its own once that claim is deleted");
      }
      if (static_cast<size_t>(existing->count) != rest) {
        return absl::StrCat("claim ", key.ToString(), " holds ", existing->count, " ",
                            resource, " but the pod requests ", rest,
                            "; delete the claim to change its size");
      }
      plan.claims.push_back(ResolvedClaim{key, true, existing->ToClaim()});
      continue;
    }
    if (options.template_name_taken) {
      if (std::string why = options.template_name_taken(key); !why.empty()) {
        plan.problem_may_clear = true;
        return why;
      }
    }
    ResolvedClaim r;
    r.key = key;
    r.exists = false;
    r.claim.key = key;
    r.claim.spec.resource_name = resource;
    r.claim.spec.count = static_cast<int32_t>(rest);
    r.claim.spec.reclaim_policy = options.template_reclaim_policy;
    r.claim.spec.owner_vm = request.vm;
    r.claim.spec.owner_vm_uid = request.vm_uid;
    plan.claims.push_back(std::move(r));
  }
  return "";
}

std::string ClassifyClaims(const ClusterState& state, RequestPlan& plan) {
  const ResolvedClaim* first_bound = nullptr;
  const ResolvedClaim* first_pinned = nullptr;
  for (size_t i = 0; i < plan.claims.size(); ++i) {
    const ResolvedClaim& r = plan.claims[i];
    const ClaimStatus& st = r.claim.status;
    switch (st.phase) {
      case ClaimPhase::kLost:
        return absl::StrCat("claim ", r.key.ToString(), " is Lost: ", st.lost_reason);
      case ClaimPhase::kBound:
        if (first_bound != nullptr && st.node != plan.bound_node) {
          return absl::StrCat("claims ", first_bound->key.ToString(), " and ",
                              r.key.ToString(), " are bound to different nodes (",
                              plan.bound_node, ", ", st.node,
                              "); one pod cannot use both");
        }
        if (first_bound == nullptr) first_bound = &r;
        plan.bound_node = st.node;
        plan.bound.push_back(i);
        break;
      case ClaimPhase::kPending: {
        int16_t cls = state.ClassIndex(r.claim.spec.resource_name);
        if (!r.claim.spec.node.empty()) {
          if (first_pinned != nullptr && r.claim.spec.node != plan.pin_node) {
            return absl::StrCat("claims ", first_pinned->key.ToString(), " and ",
                                r.key.ToString(), " are pinned to different nodes");
          }
          if (first_pinned == nullptr) first_pinned = &r;
          plan.pin_node = r.claim.spec.node;
        }
        plan.pending.push_back(PendingClaim{&r.key, &r.claim.spec, cls});
        plan.need[cls] += static_cast<size_t>(r.claim.spec.count);
        break;
      }
    }
  }
  if (!plan.bound_node.empty() && !plan.pin_node.empty() && plan.bound_node != plan.pin_node) {
    return absl::StrCat("claim ", first_pinned->key.ToString(), " is pinned to node ",
                        plan.pin_node, " but claim ", first_bound->key.ToString(),
                        " is bound to node ", plan.bound_node);
  }
  if (first_pinned != nullptr) {
    plan.pinned_elsewhere = absl::StrCat("claim ", first_pinned->key.ToString(),
                                         " is pinned to node ", plan.pin_node);
  }
  if (first_bound != nullptr) {
    plan.bound_elsewhere =
        absl::StrCat("claim ", first_bound->key.ToString(), " is bound to node ",
                     plan.bound_node, " (a persistent device claim keeps its node)");
  }
  return "";
}

}  // namespace

void BuildRequestPlan(const ClusterState& state, const AllocatorOptions& options,
                      const SchedulingRequest& request, RequestPlan& plan) {
  const auto& classes = state.classes();
  std::vector<size_t> requested(classes.size(), 0);
  bool wants_managed = false;
  // Requests beyond what any node holds can never be met; checked here as
  // well as by the wire codec, so no caller can size a claim from them.
  int64_t too_many = 0;
  std::string too_many_resource;
  for (const auto& [resource, count] : request.resources) {
    int16_t cls = state.ClassIndex(resource);
    if (cls == kNoClass || count <= 0) continue;
    if (count > kMaxNodeDevices) {
      too_many = count;
      too_many_resource = resource;
      continue;
    }
    requested[cls] = std::max(requested[cls], static_cast<size_t>(count));
    wants_managed = true;
  }
  if (!wants_managed && too_many == 0 && request.claim_names.empty()) {
    plan.pass_through = true;
    return;
  }
  plan.need.assign(classes.size(), 0);
  plan.uses_class.assign(classes.size(), 0);
  plan.ns = request.ns;
  plan.vm = request.vm;
  plan.vm_uid = request.vm_uid;
  plan.pod_uid = request.pod_uid;
  plan.pod_name = request.pod_name;
  plan.vmi_uid = request.vmi_uid;
  if (too_many > 0) {
    plan.problem = absl::StrCat("the pod requests ", too_many, " ", too_many_resource,
                                ", more than one node may hold (", kMaxNodeDevices, ")");
    return;
  }
  if (absl::Status s = model::ValidateNamespace("pod namespace", request.ns); !s.ok()) {
    plan.problem = std::string(s.message());
    return;
  }
  if (request.vm.empty()) {
    plan.problem = "the pod has no VM identity (label vm.kubevirt.io/name, annotation "
                   "kubevirt.io/domain, or a name)";
    return;
  }
  if (absl::Status s = ValidateVmUid("VM uid", request.vm_uid); !s.ok()) {
    plan.problem = std::string(s.message());
    return;
  }
  std::vector<size_t> explicit_count(classes.size(), 0);
  plan.problem = AddExplicitClaims(state, request, plan, explicit_count);
  if (plan.problem.empty()) {
    plan.problem =
        AddTemplateClaims(state, options, request, requested, explicit_count, plan);
  }
  if (!plan.problem.empty()) return;
  std::sort(plan.claims.begin(), plan.claims.end(),
            [](const ResolvedClaim& a, const ResolvedClaim& b) { return a.key < b.key; });
  plan.problem = ClassifyClaims(state, plan);
  for (const ResolvedClaim& r : plan.claims) {
    const int16_t cls = state.ClassIndex(r.claim.spec.resource_name);
    if (cls != kNoClass) plan.uses_class[cls] = 1;
  }
}

std::optional<int16_t> BoundNuma(const RequestPlan& plan, const NodeState& node) {
  for (size_t i : plan.bound) {
    for (const BoundDevice& b : plan.claims[i].claim.status.devices) {
      if (const DeviceSlot* s = node.Find(b.address)) return s->device.numa_node;
    }
  }
  return std::nullopt;
}

std::string MakeClaimUid(const ClaimKey& key, uint64_t revision) {
  const uint64_t h = Fnv1a(key.name, Fnv1a("/", Fnv1a(key.ns)));
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-8%03x-%012llx",
                static_cast<unsigned>(h >> 32), static_cast<unsigned>((h >> 16) & 0xffff),
                static_cast<unsigned>(h & 0xfff), static_cast<unsigned>((revision >> 48) & 0xfff),
                static_cast<unsigned long long>(revision & 0xffffffffffffull));
  return buf;
}

}  // namespace pdc
