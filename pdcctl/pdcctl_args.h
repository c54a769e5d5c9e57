// pdcctl's command line, parsed into a value (no I/O), kubectl style:
//   pdcctl get claims|nodes|devices [NAME] [-n NS | -A] [-o table|json]
//   pdcctl describe claim NAME [-n NS]
//   pdcctl create claim NAME --resource R [--count N] [--node N]
//          [--serial S] [--address A] [--reclaim-policy Retain|Delete]
//   pdcctl delete claim NAME [--force]
//   pdcctl release claim NAME [--pod-uid UID]
//   pdcctl release device NODE ADDRESS   (a Released device, for any claim)
//   pdcctl release device NODE ADDRESS --to NAMESPACE/NAME
//                                        (hand a Released device over)
//   pdcctl release device NODE ADDRESS --abandon-erase
//                                        (end an erase that will not finish)
//   pdcctl get handoffs [--node N]       (VM pods waiting for their devices)
//   pdcctl get draclaims [-n NS | -A]    (the DRA claims the keeper follows)
//   pdcctl delete handoff POD_UID --node N   (the pod is gone; free the slot)
// Global: --server URL (default $PDC_SERVER, else http://127.0.0.1:8888),
// --token-file FILE, --timeout DURATION, -h/--help. Flags may appear
// anywhere, as `--flag=value` or `--flag value`.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_CLIENT_PDCCTL_ARGS_H_
#define PDC_EXTENDER_CLIENT_PDCCTL_ARGS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/types.h"

namespace pdc::pdcctl {

enum class Verb { kHelp, kGet, kDescribe, kCreate, kDelete, kRelease };
enum class Kind { kNone, kClaims, kNodes, kDevices, kHandoffs, kDraClaims };
enum class Output { kTable, kJson };

inline constexpr std::string_view kDefaultServer = "http://127.0.0.1:8888";

struct Command {
  Verb verb = Verb::kHelp;
  Kind kind = Kind::kNone;
  std::string name;  // "" for lists.
  std::string ns = "default";
  bool all_namespaces = false;
  Output output = Output::kTable;
  std::string server;  // Resolved: flag, else $PDC_SERVER, else default.
  std::string token_file;
  absl::Duration timeout = absl::Seconds(30);
  // create claim
  std::string resource;
  int count = 1;
  // create: pin; get devices/handoffs: filter; delete handoff; release device.
  std::string node;
  std::string serial;
  std::optional<PciAddress> address;  // create: pin; release device.
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;
  // delete / release
  bool force = false;
  std::string pod_uid;
  // release device: hand it over to this claim instead of freeing it.
  std::optional<ClaimKey> hand_over_to;
  // release device: end the erase of a returning device (it stays held).
  bool abandon_erase = false;
};

// `args` excludes argv[0]. `env_server` is $PDC_SERVER if set. Errors are
// InvalidArgument with a message for the user (usage errors, exit code 2).
absl::StatusOr<Command> ParseArgs(absl::Span<const std::string> args,
                                  std::optional<std::string> env_server);

// The --help text.
std::string Usage();

}  // namespace pdc::pdcctl

#endif  // PDC_EXTENDER_CLIENT_PDCCTL_ARGS_H_
