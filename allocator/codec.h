// Little-endian varint encoder/decoder used by the record format. Internal to
// allocator/. The decoder is bounds-checked everywhere: it never reads past
// its input and reports the first inconsistency.
// Thread-safety: single-owner objects.
#ifndef PDC_ALLOCATOR_CODEC_H_
#define PDC_ALLOCATOR_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pdc::codec {

class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void Fixed32(uint32_t v) {
    char b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_->append(b, 4);
  }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  void Signed(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void String(std::string_view s) {
    Varint(s.size());
    out_->append(s.data(), s.size());
  }

 private:
  std::string* out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }
  size_t position() const { return pos_; }

  uint8_t U8() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint32_t Fixed32() {
    if (!Need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= uint32_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    }
    pos_ += 4;
    return v;
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!Need(1)) return 0;
      uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok_ = false;  // More than 10 bytes: not a varint.
    return 0;
  }
  int64_t Signed() {
    uint64_t u = Varint();
    return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  std::string_view String() {
    uint64_t n = Varint();
    if (!ok_ || n > in_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // Reads a count of items that each take at least `min_bytes`; rejects a
  // count the remaining input cannot hold, so garbage cannot make us reserve
  // gigabytes.
  uint64_t Count(size_t min_bytes) {
    uint64_t n = Varint();
    if (ok_ && min_bytes > 0 && n > (in_.size() - pos_) / min_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  void Fail() { ok_ = false; }

 private:
  bool Need(size_t n) {
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace pdc::codec

#endif  // PDC_ALLOCATOR_CODEC_H_
