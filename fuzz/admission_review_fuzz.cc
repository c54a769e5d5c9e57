// The AdmissionReview decoder of pdc-extender's admission webhook
// (api/admission_json.h): never crashes, refuses with HTTP 400 only, and
// what it accepts it can answer: the uid is a bounded UID, the answer and any
// JSON Patch for the pod's affinity are valid JSON, and the answer echoes the
// uid.
#include <string>

#include "api/admission_json.h"
#include "api/scheduler_wire.h"
#include "api/validation.h"
#include "fuzz/fuzz_util.h"
#include "rapidjson/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  namespace api = pdc::api;
  std::string body(pdc::fuzz::AsText(data, size));
  rapidjson::Document doc;
  absl::StatusOr<api::AdmissionRequest> r = api::ParseAdmissionReview(body, &doc);
  if (!r.ok()) {
    if (api::json::HttpStatusFor(r.status()) != 400) {
      pdc::fuzz::Broken("a bad review is not a 400", r.status().ToString());
    }
    return 0;
  }
  if (!api::ValidateUid("uid", r->uid).ok()) pdc::fuzz::Broken("accepted a bad uid", r->uid);
  api::AdmissionResponse answer{r->uid, "", {"pdc: warning"}, true, ""};
  if (r->object != nullptr) {
    (void)api::PodToRequest(*r->object, {"devices.kubevirt.io/nvme"});
    if (auto pod = api::ReadAdmissionPod(*r->object); pod.ok()) {
      if (!(pod->affinity.terms_present && pod->affinity.terms.empty())) {
        answer.patch = api::WriteJsonPatch(
            api::RequireNodeNamePatch(pod->affinity, "node-a"));
        rapidjson::Document patch;
        if (!api::json::Parse(answer.patch, &patch).ok() || !patch.IsArray() ||
            patch.Empty()) {
          pdc::fuzz::Broken("the patch is not a non-empty JSON array", answer.patch);
        }
      }
    }
  }
  const std::string out = api::WriteAdmissionReview(answer);
  rapidjson::Document back;
  if (!api::json::Parse(out, &back).ok()) pdc::fuzz::Broken("the answer is not JSON", out);
  const api::json::Value* resp = api::json::Find(back, "response");
  const api::json::Value* uid = resp == nullptr ? nullptr : api::json::Find(*resp, "uid");
  if (uid == nullptr || !uid->IsString() || api::json::StringOf(*uid) != r->uid) {
    pdc::fuzz::Broken("the answer does not echo the uid", out);
  }
  return 0;
}
