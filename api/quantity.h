// Kubernetes resource quantities (resource.Quantity of
// k8s.io/apimachinery): the grammar ParseQuantity accepts and the value it
// gives, for the device counts of a pod's extended resources.
//
//   <quantity>     ::= <signedNumber><suffix>
//   <signedNumber> ::= [+-] <digits> | [+-] <digits>.<digits> | [+-] .<digits>
//                      | [+-] <digits>.   (and, as Go accepts them, "+", "-", "."
//                      and a bare suffix: all zero)
//   <suffix>       ::= n u m "" k M G T P E  (decimal SI)
//                    | Ki Mi Gi Ti Pi Ei     (binary SI)
//                    | e<int> | E<int>       (decimal exponent, <int> signed)
//
// No whitespace anywhere. As in Go, a non-zero value is rounded up (away
// from zero) to a whole number of nano units, and the exponent of e<int> is
// read as a 64-bit integer and then truncated to 32 bits.
//
// Extended resources (devices) must be whole numbers (kube-apiserver refuses
// a fractional request), so only the whole-number reading is offered here:
// everything that is not a whole number in [0, max] is refused with a message
// saying which of the rules it broke.
// Thread-safety: pure functions.
#ifndef PDC_API_QUANTITY_H_
#define PDC_API_QUANTITY_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace pdc::api {

// Why a text is not an acceptable whole quantity.
enum class QuantityProblem : uint8_t {
  kNone,
  kSyntax,    // Not a Kubernetes quantity at all ("1 ", "1i", "", "1.1.M").
  kNegative,  // Below zero ("-1").
  kNotWhole,  // Has a fractional part ("0.5", "1500m", "1n").
  kTooLarge,  // Above the caller's maximum ("1E", "9223372036854775807").
};

struct WholeQuantity {
  QuantityProblem problem = QuantityProblem::kNone;
  int64_t value = 0;  // Meaningful when problem is kNone.
};

// Reads `text` as Kubernetes reads a quantity and classifies its value:
// kNone with the value when it is a whole number in [0, max]. Linear in the
// size of `text` (no big-number arithmetic).
// REQUIRES: max >= 0.
WholeQuantity ParseWholeQuantity(std::string_view text, int64_t max);

// FieldError (HTTP 422) naming `field` unless `text` is a whole quantity in
// [0, max]; the message quotes the text (cut to a readable length) and says
// what is wrong ("must be a whole number", "at most <max>", ...). `what`
// names the unit in messages ("devices").
absl::StatusOr<int64_t> ParseWholeQuantityField(std::string_view text, int64_t max,
                                                std::string_view field,
                                                std::string_view what);

}  // namespace pdc::api

#endif  // PDC_API_QUANTITY_H_
