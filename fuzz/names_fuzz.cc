// Kubernetes name rules: never crash on any bytes, and the message quotes
// stay bounded (QuoteForMessage cuts at 80 bytes).
#include "fuzz/fuzz_util.h"
#include "model/names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = pdc::fuzz::AsText(data, size);
  (void)pdc::model::IsDns1123Label(text);
  (void)pdc::model::IsDns1123Subdomain(text);
  (void)pdc::model::IsQualifiedName(text);
  const std::string problem = pdc::model::ObjectNameProblem(text);
  if (problem.size() > 4096) pdc::fuzz::Broken("a name problem longer than 4 KiB");
  (void)pdc::model::NamespaceProblem(text);
  return 0;
}
