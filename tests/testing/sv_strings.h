// absl::StrCat / StrAppend and the few other absl string functions the
// test doubles use, taking std::string_view: Debian 12's abseil has its own
// absl::string_view (common/strings.h explains), and the doubles mix both.
// Thread-safety: pure functions.
#ifndef PDC_TESTS_TESTING_SV_STRINGS_H_
#define PDC_TESTS_TESTING_SV_STRINGS_H_

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace pdc::testing {

template <typename T>
decltype(auto) AbslArg(const T& v) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return Sv(v);
  } else {
    return (v);
  }
}

template <typename... T>
std::string Cat(const T&... v) {
  return absl::StrCat(AbslArg(v)...);
}

template <typename... T>
void Append(std::string* out, const T&... v) {
  absl::StrAppend(out, AbslArg(v)...);
}

inline std::string_view ToStd(std::string_view s) { return s; }
inline std::string_view ToStd(absl::string_view s) { return StdSv(s); }
inline std::string_view ToStd(const std::string& s) { return s; }
inline std::string_view ToStd(const char* s) { return s; }

template <typename A, typename B>
bool Contains(const A& haystack, const B& needle) {
  return ToStd(haystack).find(ToStd(needle)) != std::string_view::npos;
}
template <typename A, typename B>
bool StartsWith(const A& s, const B& prefix) {
  return ToStd(s).starts_with(ToStd(prefix));
}
inline bool IEquals(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(Sv(a), Sv(b));
}
inline std::string_view Strip(std::string_view s) {
  return StdSv(absl::StripAsciiWhitespace(Sv(s)));
}
inline bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (!s->starts_with(prefix)) return false;
  s->remove_prefix(prefix.size());
  return true;
}
inline bool ConsumeSuffix(std::string_view* s, std::string_view suffix) {
  if (!s->ends_with(suffix)) return false;
  s->remove_suffix(suffix.size());
  return true;
}
template <typename T>
bool Atoi(std::string_view s, T* out) {
  return absl::SimpleAtoi(Sv(s), out);
}
template <typename T>
bool HexAtoi(std::string_view s, T* out) {
  return absl::SimpleHexAtoi(Sv(s), out);
}
// absl::StrSplit into std::string_views (of `s`).
template <typename Delimiter, typename Predicate = absl::AllowEmpty>
std::vector<std::string_view> Split(std::string_view s, Delimiter d,
                                    Predicate p = Predicate()) {
  std::vector<std::string_view> out;
  for (absl::string_view part : absl::StrSplit(Sv(s), d, p))
    out.push_back(StdSv(part));
  return out;
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_SV_STRINGS_H_
