// pdcctl's command line: arguments are the input cut at NUL bytes.
#include <optional>
#include <string>
#include <vector>

#include "pdcctl/pdcctl_args.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = pdc::fuzz::SplitAtNul(pdc::fuzz::AsText(data, size));
  (void)pdc::pdcctl::ParseArgs(args, std::nullopt);
  (void)pdc::pdcctl::ParseArgs(args, std::string("http://127.0.0.1:8888"));
  return 0;
}
