// Sizing the read buffer for an HTTP body, shared by pdc-extender's server
// and pdc's HTTP client. Beast reads at most the buffer's spare capacity per
// read_some (512 bytes at least), so a flat_buffer grown only to a header's
// size takes a 100 KB kube-scheduler request, or a 500 KB filter answer, in
// hundreds of reads, each a syscall that also re-arms the stream's timer.
// Sized for the body, the same message takes a few.
// Thread-safety: functions on caller-owned objects.
#ifndef PDC_NET_READ_BUFFER_H_
#define PDC_NET_READ_BUFFER_H_

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>

namespace pdc {

// Most body bytes one read asks the kernel for: a connection's buffer grows
// to this for large bodies and keeps it while open.
inline constexpr uint64_t kMaxBodyReadChunk = 256 * 1024;

// After the header is parsed: lets one read take min(Content-Length,
// kMaxBodyReadChunk) bytes. Bodies without a length are read as they come.
template <bool kIsRequest, class Body, class Allocator>
void ReserveForBody(boost::beast::flat_buffer& buffer,
                    const boost::beast::http::parser<kIsRequest, Body, Allocator>& parser) {
  const auto length = parser.content_length();
  if (!length.has_value()) return;
  const uint64_t want = std::min<uint64_t>(*length, kMaxBodyReadChunk);
  if (buffer.capacity() - buffer.size() < want) buffer.reserve(buffer.size() + want);
}

}  // namespace pdc

#endif  // PDC_NET_READ_BUFFER_H_
