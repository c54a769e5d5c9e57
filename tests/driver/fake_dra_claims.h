// The ResourceClaims of a test, seen both ways pdc-node's DRA driver reads
// them: one claim by name (ClaimSource, the apiserver now) and the watched
// copy of all of them (ClaimIndex). `lag` makes the copy lag behind: the
// claims put in it are the copy, `claims` the apiserver.
#ifndef PDC_TESTS_DRIVER_FAKE_DRA_CLAIMS_H_
#define PDC_TESTS_DRIVER_FAKE_DRA_CLAIMS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "driver/dra/claim_index.h"
#include "driver/dra/claim_source.h"

namespace pdc::driver::testing {

class FakeDraClaims : public dra::ClaimSource, public dra::ClaimIndex {
 public:
  absl::StatusOr<dra::ResourceClaimView> Get(std::string_view ns, std::string_view name) override {
    ++reads;
    if (!read_error.ok()) return read_error;
    auto it = claims.find(std::string(ns) + "/" + std::string(name));
    if (it == claims.end()) {
      return absl::NotFoundError("resourceclaims \"" + std::string(name) + "\" not found");
    }
    return it->second;
  }
  std::optional<dra::ClaimSnapshot> Snapshot() const override {
    if (!synced) return std::nullopt;
    dra::ClaimSnapshot s;
    for (const auto& [key, c] : lagging ? copy : claims) s.claims.push_back(c);
    s.unreadable = unreadable;
    return s;
  }

  // Sets claim ns/name (uid) allocated `devices` of driver/pool.
  void Allocate(const std::string& ns, const std::string& name, const std::string& uid,
                const std::string& driver, const std::string& pool,
                const std::vector<std::string>& devices) {
    dra::ResourceClaimView v;
    v.ns = ns;
    v.name = name;
    v.uid = uid;
    v.allocated = true;
    for (const std::string& d : devices) v.devices.push_back({"disk", driver, pool, d});
    claims[ns + "/" + name] = v;
  }
  void Delete(const std::string& ns, const std::string& name) { claims.erase(ns + "/" + name); }
  // status.allocation cleared, the object kept.
  void Deallocate(const std::string& ns, const std::string& name) {
    auto& c = claims.at(ns + "/" + name);
    c.allocated = false;
    c.devices.clear();
  }

  std::map<std::string, dra::ResourceClaimView> claims;  // By "ns/name".
  std::map<std::string, dra::ResourceClaimView> copy;    // The index's, when lagging.
  bool lagging = false;
  bool synced = true;
  std::set<std::string> unreadable;
  absl::Status read_error;
  int reads = 0;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_DRA_CLAIMS_H_
