// Bridges between std::string_view and absl::string_view. Debian 12's abseil
// is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view is a
// distinct type and absl::StrCat / StrJoin / hash-map lookups do not accept a
// std::string_view directly. pdc's interfaces use std::string_view; wrap with
// Sv() where an absl function wants its own type.
// Thread-safety: pure functions.
#ifndef PDC_COMMON_STRINGS_H_
#define PDC_COMMON_STRINGS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace pdc {

inline absl::string_view Sv(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

inline std::string_view StdSv(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace pdc

#endif  // PDC_COMMON_STRINGS_H_
