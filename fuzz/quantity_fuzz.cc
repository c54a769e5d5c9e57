// Kubernetes quantities read as whole device counts (api/quantity.h): never
// crash on any bytes, never answer a value outside [0, max], and keep the
// properties of resource.ParseQuantity: an explicit '+' changes nothing, a
// '-' makes a non-zero value negative, and a value written back as decimal
// digits reads as itself. Refusal messages stay short whatever the input.
// The first byte picks the bound, the rest is the text.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/quantity.h"
#include "fuzz/fuzz_util.h"

namespace {

using pdc::api::ParseWholeQuantity;
using pdc::api::QuantityProblem;
using pdc::api::WholeQuantity;

constexpr int64_t kMaxes[] = {0, 1, 256, 4096, int64_t{1} << 40, INT64_MAX};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t max = kMaxes[data[0] % (sizeof(kMaxes) / sizeof(kMaxes[0]))];
  const std::string text(pdc::fuzz::AsText(data + 1, size - 1));
  const WholeQuantity q = ParseWholeQuantity(text, max);
  const WholeQuantity wide = ParseWholeQuantity(text, INT64_MAX);
  if (q.problem == QuantityProblem::kNone) {
    if (q.value < 0 || q.value > max) pdc::fuzz::Broken("a value outside [0, max]", text);
    if (wide.problem != QuantityProblem::kNone || wide.value != q.value) {
      pdc::fuzz::Broken("a wider bound changed an accepted value", text);
    }
    const WholeQuantity back = ParseWholeQuantity(absl::StrCat(q.value), INT64_MAX);
    if (back.problem != QuantityProblem::kNone || back.value != q.value) {
      pdc::fuzz::Broken("the value written back does not read as itself", text);
    }
  } else if (q.problem == QuantityProblem::kTooLarge) {
    if (wide.problem == QuantityProblem::kNone && wide.value <= max) {
      pdc::fuzz::Broken("too large, yet within the bound", text);
    }
  } else if (wide.problem != q.problem) {
    pdc::fuzz::Broken("the bound changed a problem other than too large", text);
  }
  if (!text.empty() && text[0] != '+' && text[0] != '-') {
    const WholeQuantity plus = ParseWholeQuantity("+" + text, max);
    if (plus.problem != q.problem || plus.value != q.value) {
      pdc::fuzz::Broken("an explicit '+' changed the answer", text);
    }
    const WholeQuantity minus = ParseWholeQuantity("-" + text, max);
    if (q.problem == QuantityProblem::kNone && q.value == 0 &&
        minus.problem != QuantityProblem::kNone) {
      pdc::fuzz::Broken("minus zero is not zero", text);
    }
    if (q.problem == QuantityProblem::kNone && q.value > 0 &&
        minus.problem != QuantityProblem::kNegative) {
      pdc::fuzz::Broken("a '-' did not make a value negative", text);
    }
  }
  const absl::StatusOr<int64_t> field =
      pdc::api::ParseWholeQuantityField(text, max, "q", "devices");
  if (field.ok() != (q.problem == QuantityProblem::kNone)) {
    pdc::fuzz::Broken("the field reader disagrees with the classifier", text);
  }
  if (!field.ok() && field.status().message().size() > 1024) {
    pdc::fuzz::Broken("a refusal longer than 1 KiB", text);
  }
  return 0;
}
