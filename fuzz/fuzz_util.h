// Helpers shared by the libFuzzer harnesses: a harness gets raw bytes and
// turns them into the inputs of one decoder.
// Thread-safety: value functions.
#ifndef PDC_FUZZ_FUZZ_UTIL_H_
#define PDC_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace pdc::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at NUL bytes: several strings from one input.
inline std::vector<std::string> SplitAtNul(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// A property the decoder promises does not hold: report and crash, so that
// libFuzzer saves the input.
[[noreturn]] inline void Broken(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "property broken: %s\n", what);
  if (!detail.empty()) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(std::min<size_t>(detail.size(), 4096)),
                 detail.data());
  }
  std::abort();
}

}  // namespace pdc::fuzz

#endif  // PDC_FUZZ_FUZZ_UTIL_H_
