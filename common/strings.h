// Bridges between std::string_view and absl::string_view. Debian 12's abseil
// is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view is a
// distinct type and absl::StrCat / StrJoin / hash-map lookups do not accept a
// std::string_view directly. pdc's interfaces use std::string_view; wrap with
// Sv() where an absl function wants its own type.
// Thread-safety: pure functions.
#ifndef PDC_COMMON_STRINGS_H_
#define PDC_COMMON_STRINGS_H_

#include <cstdint>
#include <string_view>

#include "absl/strings/string_view.h"

namespace pdc {

inline absl::string_view Sv(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

inline std::string_view StdSv(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

// Value of one hexadecimal digit (either case), or -1.
inline int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses exactly `digits` hex digits (at most 8); -1 on any other input.
inline int64_t ParseFixedHex(std::string_view s, size_t digits) {
  if (s.size() != digits || digits > 8) return -1;
  int64_t v = 0;
  for (char c : s) {
    const int d = HexDigitValue(c);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace pdc

#endif  // PDC_COMMON_STRINGS_H_
