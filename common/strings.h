// Bridges between std::string_view and absl::string_view. Debian 12's abseil
// is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view is a
// distinct type and absl::StrCat / StrJoin / hash-map lookups do not accept a
// std::string_view directly. pdc's interfaces use std::string_view; wrap with
// Sv() where an absl function wants its own type.
// Thread-safety: pure functions.
#ifndef PDC_COMMON_STRINGS_H_
#define PDC_COMMON_STRINGS_H_

#include <cstddef>
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

// True when `s` holds no white space and no control character: it can be a
// field of a space-separated line and read back (the node driver's
// journals).
inline bool IsSpaceFreeWord(std::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

// Value of one hexadecimal digit (either case), or -1.
// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode 15,
// table 3-7: no overlongs, no surrogates, nothing above U+10FFFF): 1 for
// ASCII, 2 to 4, or 0 when the bytes there are not one.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto at = [&](size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u;
  };
  const auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    const unsigned c = at(k);
    return c >= lo && c <= hi;
  };
  const unsigned b = at(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b >= 0xF1 && b <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

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
