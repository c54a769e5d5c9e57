// Names that arrive from the network, checked before they reach the
// allocator: Kubernetes' rules (model/names.h) answered as an HTTP 422 that
// names the field.
// Thread-safety: pure functions.
#ifndef PDC_API_VALIDATION_H_
#define PDC_API_VALIDATION_H_

#include <string_view>

#include "absl/status/status.h"

namespace pdc::api {

// FieldError (HTTP 422) naming `field` unless `s` is a valid object name
// (DNS-1123 subdomain) / namespace (DNS-1123 label).
absl::Status ValidateObjectName(std::string_view field, std::string_view s);
absl::Status ValidateNamespace(std::string_view field, std::string_view s);

}  // namespace pdc::api

#endif  // PDC_API_VALIDATION_H_
