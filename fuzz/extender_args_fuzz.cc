// kube-scheduler's ExtenderArgs (filter, prioritize): the SAX path the
// extender takes (ParseExtenderArgs, node names kept as views) and the DOM
// path (ParseInsitu + ReadExtenderArgs) must give the same answer, and an
// accepted request's filter result must be JSON that names the same nodes.
#include <string>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/scheduler_wire.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace api = pdc::api;
  std::string sax_body(pdc::fuzz::AsText(data, size));
  std::string dom_body = sax_body;
  rapidjson::Document sax_doc;
  rapidjson::Document dom_doc;
  auto sax = api::ParseExtenderArgs(sax_body, &sax_doc);
  const absl::Status parsed = api::json::ParseInsitu(dom_body, &dom_doc);
  absl::StatusOr<api::ExtenderArgs> dom =
      parsed.ok() ? api::ReadExtenderArgs(dom_doc) : absl::StatusOr<api::ExtenderArgs>(parsed);
  if (sax.ok() != dom.ok()) pdc::fuzz::Broken("SAX and DOM paths disagree on acceptance");
  if (!sax.ok()) return 0;
  if (sax->node_names != dom->node_names || sax->node_list_mode != dom->node_list_mode) {
    pdc::fuzz::Broken("SAX and DOM paths read different nodes");
  }
  api::FilterOutput out;
  for (size_t i = 0; i < sax->node_names.size(); ++i) out.passed.push_back(i);
  const std::string result = api::WriteFilterResult(*sax, out);
  rapidjson::Document back;
  if (absl::Status s = api::json::Parse(result, &back); !s.ok()) {
    pdc::fuzz::Broken("filter result is not JSON", absl::StrCat(s.ToString(), "\n", result));
  }
  return 0;
}
