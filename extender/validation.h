// Validation of names and values that arrive from the network, so that bad
// input is rejected with a message naming the field before it reaches the
// allocator.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_VALIDATION_H_
#define PDC_EXTENDER_VALIDATION_H_

#include <string_view>

#include "absl/status/status.h"

namespace pdc::extender {

// Kubernetes object names: DNS-1123 subdomain (lower-case alphanumerics, '-'
// and '.', starting and ending alphanumeric, at most 253 characters).
bool IsDns1123Subdomain(std::string_view s);
// Namespaces: DNS-1123 label (no '.', at most 63 characters).
bool IsDns1123Label(std::string_view s);

// FieldError (HTTP 422) naming `field` unless valid.
absl::Status ValidateObjectName(std::string_view field, std::string_view s);
absl::Status ValidateNamespace(std::string_view field, std::string_view s);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_VALIDATION_H_
