// Values that arrive from the network, checked before they reach the
// allocator, a log line or the store: Kubernetes' name rules (model/names.h)
// and bounds on the other strings, answered as an HTTP 422 that names the
// field. Messages quote the value cut to a readable length
// (model::QuoteForMessage), so a refused value never travels on in full.
// Thread-safety: pure functions.
#ifndef PDC_API_VALIDATION_H_
#define PDC_API_VALIDATION_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/types.h"

namespace pdc::api {

// FieldError (HTTP 422) naming `field` unless `s` is a valid object name
// (DNS-1123 subdomain, at most 253) / namespace (DNS-1123 label, at most 63).
// Pod, VM, claim and node names are object names.
absl::Status ValidateObjectName(std::string_view field, std::string_view s);
absl::Status ValidateNamespace(std::string_view field, std::string_view s);

// Longest UID accepted. kube-apiserver makes every UID an RFC 4122 UUID (36
// characters), but the type (types.UID) is any string and clients and tests
// send others, so a UID is not required to be a UUID: only bounded, at most
// this many bytes of printable ASCII without spaces, safe to log and store.
inline constexpr size_t kMaxUidLength = 128;
// FieldError unless `s` is a non-empty UID as above.
absl::Status ValidateUid(std::string_view field, std::string_view s);

// FieldError unless `s` is "" or a serial number: printable ASCII (spaces
// allowed: NVMe pads its SN with them), at most kMaxSerialLength bytes.
absl::Status ValidateSerial(std::string_view field, std::string_view s);
// FieldError unless `s` is "" or a kernel driver name: printable ASCII
// without spaces, at most kMaxDriverNameLength bytes.
absl::Status ValidateDriverName(std::string_view field, std::string_view s);
// FieldError unless `s` is a resource name: a qualified name
// (`<DNS subdomain>/<name>`, model::IsQualifiedName), at most 317 bytes.
absl::Status ValidateResourceName(std::string_view field, std::string_view s);

// A PCI address field; FieldError (422) naming `field` when malformed.
absl::StatusOr<PciAddress> ParseAddress(std::string_view s, std::string_view field);

}  // namespace pdc::api

#endif  // PDC_API_VALIDATION_H_
