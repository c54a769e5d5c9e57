// kube-scheduler's bind and preempt arguments and the HostPriorityList a
// client reads; the first byte picks which. Accepted preempt arguments
// written back (every node kept) must be JSON.
#include <string>
#include <vector>

#include "api/json_util.h"
#include "api/scheduler_wire.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace api = pdc::api;
  if (size == 0) return 0;
  const std::string_view text = pdc::fuzz::AsText(data + 1, size - 1);
  rapidjson::Document doc;
  switch (data[0] % 3) {
    case 0:
      if (api::json::Parse(text, &doc).ok()) (void)api::ReadBindingArgs(doc);
      break;
    case 1: {
      if (!api::json::Parse(text, &doc).ok()) break;
      auto args = api::ReadPreemptionArgs(doc);
      if (!args.ok()) break;
      std::vector<size_t> keep;
      for (size_t i = 0; i < args->nodes.size(); ++i) keep.push_back(i);
      rapidjson::Document back;
      if (!api::json::Parse(api::WritePreemptionResult(*args, keep), &back).ok()) {
        pdc::fuzz::Broken("preemption result is not JSON");
      }
      break;
    }
    default:
      (void)api::ParseHostPriorityList(text);
      break;
  }
  return 0;
}
