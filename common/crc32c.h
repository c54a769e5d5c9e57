// CRC-32C (Castagnoli), the checksum of every write-ahead-log record and
// snapshot. Debian 12's abseil predates absl/crc, so pdc carries its own.
// Thread-safety: pure functions.
#ifndef PDC_COMMON_CRC32C_H_
#define PDC_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pdc::crc32c {

// Returns the CRC-32C of data[0..n) continuing from `init` (the CRC of the
// bytes before it; 0 for a fresh checksum).
uint32_t Extend(uint32_t init, const char* data, size_t n);

inline uint32_t Value(std::string_view data) {
  return Extend(0, data.data(), data.size());
}

// A CRC stored next to the data it covers is masked, as leveldb does, so that
// a checksum of a buffer that itself contains checksums is still strong.
inline uint32_t Mask(uint32_t crc) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

inline uint32_t Unmask(uint32_t masked) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  uint32_t rot = masked - kMaskDelta;
  return ((rot >> 17) | (rot << 15));
}

}  // namespace pdc::crc32c

#endif  // PDC_COMMON_CRC32C_H_
