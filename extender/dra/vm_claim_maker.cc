#include "extender/dra/vm_claim_maker.h"

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/dra/resource_claim.h"
#include "extender/dra/vm_claims.h"
#include "spdlog/spdlog.h"

namespace pdc::extender::dra {

absl::StatusOr<std::string> VmClaimMaker::Ensure(std::string_view ns, std::string_view entry,
                                                 std::string_view template_name,
                                                 std::string_view vm, std::string_view vm_uid,
                                                 bool dry_run) {
  ASSIGN_OR_RETURN(std::string name, VmClaimName(vm, entry));
  const std::string what = absl::StrCat("ResourceClaim ", Sv(ns), "/", name);
  // Two rounds at most: a create that finds the claim made meanwhile
  // judges the one it finds.
  for (int round = 0; round < 2; ++round) {
    const std::string read = absl::StrCat("read ", what);
    ASSIGN_OR_RETURN(HttpResponse got,
                     api_->Call("GET", ResourceClaimPath(ns, name), "", "", read, timeout_));
    if (got.status == 200) {
      rapidjson::Document doc;
      RETURN_IF_ERROR(api::json::ParseObject(got.body, &doc));
      RETURN_IF_ERROR(JudgeVmClaim(doc, ns, name, vm, vm_uid));
      return name;
    }
    if (got.status != 404) return kube::FromApiserver(got.status, got.body, read);
    const std::string read_template =
        absl::StrCat("read ResourceClaimTemplate ", Sv(ns), "/", Sv(template_name));
    ASSIGN_OR_RETURN(HttpResponse t,
                     api_->Call("GET", ResourceClaimTemplatePath(ns, template_name), "", "",
                                read_template, timeout_));
    if (t.status != 200) return kube::FromApiserver(t.status, t.body, read_template);
    rapidjson::Document tdoc;
    RETURN_IF_ERROR(api::json::ParseObject(t.body, &tdoc));
    ASSIGN_OR_RETURN(std::string body, VmClaimJson(tdoc, ns, name, entry, vm, vm_uid));
    if (dry_run) return name;
    const std::string create = absl::StrCat("create ", what, " from ResourceClaimTemplate ",
                                            Sv(template_name));
    ASSIGN_OR_RETURN(HttpResponse made, api_->Call("POST", ResourceClaimsPath(ns), body,
                                                   "application/json", create, timeout_));
    if (made.status == 201 || made.status == 200) {
      spdlog::info("DRA: {} made for VirtualMachine {} (uid {}) from ResourceClaimTemplate {}",
                   what, vm, vm_uid, template_name);
      return name;
    }
    if (made.status != 409) return kube::FromApiserver(made.status, made.body, create);
    // AlreadyExists: made meanwhile (by another replica, or by someone
    // else); judge what is there.
  }
  return absl::AbortedError(absl::StrCat(what, " was created and deleted again meanwhile"));
}

}  // namespace pdc::extender::dra
