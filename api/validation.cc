#include "api/validation.h"

#include <string>

#include "api/json_util.h"
#include "model/names.h"

namespace pdc::api {

absl::Status ValidateObjectName(std::string_view field, std::string_view s) {
  const std::string problem = model::ObjectNameProblem(s);
  return problem.empty() ? absl::OkStatus() : json::FieldError(field, problem);
}

absl::Status ValidateNamespace(std::string_view field, std::string_view s) {
  const std::string problem = model::NamespaceProblem(s);
  return problem.empty() ? absl::OkStatus() : json::FieldError(field, problem);
}

}  // namespace pdc::api
