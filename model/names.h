// Kubernetes' name rules, in one place: object names (DNS-1123 subdomains),
// namespaces (DNS-1123 labels) and qualified names (the `<prefix>/<name>` of
// extended resources and label keys). Each follows the function of the same
// name in k8s.io/apimachinery/pkg/util/validation exactly: the same accepted
// set and the same messages, so a name pdc refuses is one kube-apiserver would
// refuse too, and the reverse. In particular an object name has no per-label
// length limit: only the whole name is bounded (253), so a VM named with 63
// characters has a valid template claim "<vm>-nvme".
// Thread-safety: pure functions.
#ifndef PDC_MODEL_NAMES_H_
#define PDC_MODEL_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace pdc::model {

inline constexpr size_t kDns1123LabelMaxLength = 63;
inline constexpr size_t kDns1123SubdomainMaxLength = 253;
inline constexpr size_t kQualifiedNameMaxLength = 63;

// What is wrong with `value`, in Kubernetes' words; empty when it is valid.
std::vector<std::string> IsDns1123Label(std::string_view value);
std::vector<std::string> IsDns1123Subdomain(std::string_view value);
// `[prefix/]name`: prefix a DNS-1123 subdomain, name at most 63 characters of
// [A-Za-z0-9-_.] starting and ending alphanumeric.
std::vector<std::string> IsQualifiedName(std::string_view value);

// `"<value>" is not a valid name: <problems>` unless `value` is a valid
// object name (DNS-1123 subdomain), else "". The value is quoted C-escaped and
// cut to a readable length: it may come from anyone.
std::string ObjectNameProblem(std::string_view value);
// Same for a namespace (DNS-1123 label): `… is not a valid namespace: …`.
std::string NamespaceProblem(std::string_view value);

// InvalidArgument `<field>: <ObjectNameProblem>` unless `value` is a valid
// object name.
absl::Status ValidateObjectName(std::string_view field, std::string_view value);
// Same for a namespace (DNS-1123 label): `… is not a valid namespace: …`.
absl::Status ValidateNamespace(std::string_view field, std::string_view value);
// Same for a qualified name: `… is not a valid qualified name: …`.
absl::Status ValidateQualifiedName(std::string_view field, std::string_view value);

// `value` as an error message shows it: C-escaped, at most 80 bytes of it.
std::string QuoteForMessage(std::string_view value);

}  // namespace pdc::model

#endif  // PDC_MODEL_NAMES_H_
