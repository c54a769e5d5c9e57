// pdcctl's program logic: parse the command line, make one REST call to
// pdc-extender, print the answer. main() only gathers the environment, so
// tests run whole commands against a fake server.
// Thread-safety: Run() uses only its arguments.
#ifndef PDC_EXTENDER_CLIENT_PDCCTL_RUN_H_
#define PDC_EXTENDER_CLIENT_PDCCTL_RUN_H_

#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace pdc::pdcctl {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;  // The extender said no (4xx/5xx).
inline constexpr int kExitUsage = 2;        // Bad command line / token file.
inline constexpr int kExitUnreachable = 3;  // Cannot connect, timed out.

struct Environment {
  std::optional<std::string> pdc_server;  // $PDC_SERVER
  absl::Time now;                         // For ages.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// `args` excludes argv[0]. Returns the process exit code.
int Run(absl::Span<const std::string> args, const Environment& env);

}  // namespace pdc::pdcctl

#endif  // PDC_EXTENDER_CLIENT_PDCCTL_RUN_H_
