// ClaimInvariants: what every Kubernetes-mode test that drives VMs checks
// after each step, from what kube-apiserver holds (the durable record, not
// pdc-extender's memory):
//  1. every acknowledged bind whose pod still exists (not deleted, not
//     ended) has each of its claims Bound in the API, on the pod's node,
//     reserved for that pod (UID), and the pod's devices annotation names
//     exactly those claims' devices;
//  2. no device (node, address) is in the status of two claims;
//  3. no device of a claim whose VM has a pod (a pod that exists and has
//     not ended, whose devices annotation or whose claim names it) is on
//     the way to being erased (a node's returnToHost hold).
// Check() returns the violations, each a sentence naming the objects.
// Thread-safety: none; one test thread.
#ifndef PDC_TESTS_KUBE_CLAIM_INVARIANTS_H_
#define PDC_TESTS_KUBE_CLAIM_INVARIANTS_H_

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/claim_object.h"
#include "api/json_util.h"
#include "net/http_client.h"
#include "rapidjson/document.h"

namespace pdc::testing {

class ClaimInvariants {
 public:
  // A bind pdc-extender answered OK.
  struct Ack {
    std::string pod;
    std::string pod_uid;
    std::vector<std::string> claims;  // Names, in the pod's namespace.
  };

  // `api`: a client of the apiserver; `ns`: the namespace of the VMs, their
  // claims and (extender.kubernetes.namespace) the holds.
  ClaimInvariants(HttpClient* api, std::string ns) : api_(api), ns_(std::move(ns)) {}

  void Acknowledged(Ack ack) { acks_.push_back(std::move(ack)); }
  // The claim's object was removed by hand (its finalizer taken off): no
  // acknowledged bind can count on it any more.
  void RemovedByHand(const std::string& claim) {
    for (Ack& a : acks_) std::erase(a.claims, claim);
  }

  // The violations now ("" entries never); counts steps and violations.
  std::vector<std::string> Check() {
    ++steps_;
    std::vector<std::string> out;
    rapidjson::Document claims, pods, holds;
    if (!List(absl::StrCat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns_,
                           "/persistentdeviceclaims"),
              &claims, &out) ||
        !List(absl::StrCat("/api/v1/namespaces/", ns_, "/pods"), &pods, &out) ||
        !List(absl::StrCat("/api/v1/namespaces/", ns_, "/configmaps"), &holds, &out)) {
      violations_ += out.size();
      return out;
    }
    // Claims by name, and devices by owner.
    std::map<std::string, api::ClaimObject> by_name;
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> owners;
    for (const rapidjson::Value& item : claims["items"].GetArray()) {
      absl::StatusOr<api::ClaimObject> c = api::ReadClaimObject(item);
      if (!c.ok()) continue;
      const ClaimStatus& st = c->claim.status;
      if (st.phase != ClaimPhase::kPending && !st.node.empty()) {
        for (const BoundDevice& d : st.devices) {
          owners[{st.node, d.address.ToString()}].push_back(c->claim.key.name);
        }
      }
      by_name.emplace(c->claim.key.name, *std::move(c));
    }
    for (const auto& [where, names] : owners) {
      if (names.size() > 1) {
        out.push_back(absl::StrCat("device ", where.second, " on node ", where.first,
                                   " is in the status of claims ", absl::StrJoin(names, ", ")));
      }
    }
    // What nodes return to their host driver (erase path).
    std::set<std::pair<std::string, std::string>> returning;
    for (const rapidjson::Value& item : holds["items"].GetArray()) {
      absl::StatusOr<api::NodeHoldsObject> h = api::ReadNodeHolds(item);
      if (!h.ok()) continue;
      for (PciAddress a : h->return_to_host) returning.insert({h->node, a.ToString()});
    }
    // Live pods: uid -> (name, node, devices annotation).
    struct Pod {
      std::string name, node, devices;
    };
    std::map<std::string, Pod> live;
    for (const rapidjson::Value& item : pods["items"].GetArray()) {
      const std::string uid = Str(item, "metadata", "uid");
      if (Has(item, "metadata", "deletionTimestamp")) continue;
      const std::string phase = Str(item, "status", "phase");
      if (phase == "Succeeded" || phase == "Failed") continue;
      Pod p{Str(item, "metadata", "name"), Str(item, "spec", "nodeName"), ""};
      const api::json::Value* ann = Find(item, "metadata", "annotations");
      if (ann != nullptr && ann->IsObject() && ann->HasMember("pdc.kubevirt.io/devices") &&
          (*ann)["pdc.kubevirt.io/devices"].IsString()) {
        p.devices = (*ann)["pdc.kubevirt.io/devices"].GetString();
      }
      live.emplace(uid, std::move(p));
    }
    // 1. Acknowledged binds.
    for (const Ack& ack : acks_) {
      auto pod = live.find(ack.pod_uid);
      if (pod == live.end()) continue;
      for (const std::string& name : ack.claims) {
        auto c = by_name.find(name);
        if (c == by_name.end()) {
          out.push_back(absl::StrCat("bind of pod ", ack.pod, " was acknowledged but claim ",
                                     name, " is not in the API"));
          continue;
        }
        const ClaimStatus& st = c->second.claim.status;
        if (st.phase != ClaimPhase::kBound || !st.reserved_for.has_value() ||
            st.reserved_for->pod_uid != ack.pod_uid) {
          out.push_back(absl::StrCat(
              "bind of pod ", ack.pod, " was acknowledged but claim ", name,
              " (UID ", c->second.meta.uid, ") is ", std::string(ToString(st.phase)), " reserved for ",
              st.reserved_for.has_value() ? st.reserved_for->pod_name : "nobody"));
          continue;
        }
        if (!pod->second.node.empty() && pod->second.node != st.node) {
          out.push_back(absl::StrCat("pod ", ack.pod, " runs on ", pod->second.node,
                                     " but its claim ", name, " is bound to ", st.node));
        }
        for (const BoundDevice& d : st.devices) {
          if (pod->second.devices.find(d.address.ToString()) == std::string::npos) {
            out.push_back(absl::StrCat("pod ", ack.pod, "'s devices annotation (",
                                       pod->second.devices, ") does not name ",
                                       d.address.ToString(), " of its claim ", name));
          }
        }
      }
    }
    // 3. No device a live pod may hold on the erase path: the pod's
    // annotation, and the claims reserved for it.
    for (const auto& [uid, pod] : live) {
      if (pod.node.empty()) continue;
      for (const auto& [node, address] : returning) {
        if (node == pod.node && !pod.devices.empty() &&
            pod.devices.find(address) != std::string::npos) {
          out.push_back(absl::StrCat("device ", address, " on node ", node, " of pod ",
                                     pod.name, " is on the way to being erased"));
        }
      }
    }
    for (const auto& [name, c] : by_name) {
      const ClaimStatus& st = c.claim.status;
      if (!st.reserved_for.has_value() || !live.contains(st.reserved_for->pod_uid)) continue;
      for (const BoundDevice& d : st.devices) {
        if (returning.contains({st.node, d.address.ToString()})) {
          out.push_back(absl::StrCat("device ", d.address.ToString(), " of claim ", name,
                                     ", reserved for live pod ", st.reserved_for->pod_name,
                                     ", is on the way to being erased"));
        }
      }
    }
    violations_ += out.size();
    return out;
  }

  int64_t steps() const { return steps_; }
  int64_t violations() const { return violations_; }

 private:
  bool List(const std::string& path, rapidjson::Document* doc, std::vector<std::string>* out) {
    absl::StatusOr<HttpResponse> r = api_->Get(path);
    if (!r.ok() || r->status != 200) {
      out->push_back(absl::StrCat("cannot list ", path, ": ",
                                  r.ok() ? absl::StrCat(r->status, " ", r->body)
                                         : r.status().ToString()));
      return false;
    }
    doc->Parse(r->body.data(), r->body.size());
    if (doc->HasParseError() || !doc->IsObject() || !doc->HasMember("items") ||
        !(*doc)["items"].IsArray()) {
      out->push_back(absl::StrCat("list ", path, " is not a list: ", r->body));
      return false;
    }
    return true;
  }
  static const api::json::Value* Find(const api::json::Value& v, const char* a, const char* b) {
    if (!v.IsObject() || !v.HasMember(a) || !v[a].IsObject() || !v[a].HasMember(b)) {
      return nullptr;
    }
    return &v[a][b];
  }
  static bool Has(const api::json::Value& v, const char* a, const char* b) {
    return Find(v, a, b) != nullptr;
  }
  static std::string Str(const api::json::Value& v, const char* a, const char* b) {
    const api::json::Value* x = Find(v, a, b);
    return x != nullptr && x->IsString() ? std::string(x->GetString(), x->GetStringLength())
                                         : "";
  }

  HttpClient* const api_;
  const std::string ns_;
  std::vector<Ack> acks_;
  int64_t steps_ = 0;
  int64_t violations_ = 0;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_KUBE_CLAIM_INVARIANTS_H_
