// Runs a pdc-extender binary as a child process for demos, sweeps and tests:
// on 127.0.0.1 port 0, the embedded file store in a fresh temporary data
// directory, the scenario's device classes in a generated config file. Start
// returns once the child printed "pdc-extender listening on host:port"; Stop
// sends SIGTERM and waits for the exit (the extender writes a last
// checkpoint and exits 0), then removes the temporary directory.
// Thread-safety: one controlling thread.
#ifndef PDC_SIM_EXTENDER_PROCESS_H_
#define PDC_SIM_EXTENDER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/types.h"

namespace pdc::sim {

struct ExtenderProcessOptions {
  std::string binary;                       // Path to pdc-extender.
  std::vector<DeviceClass> device_classes;  // Written to the config file.
  bool spread = false;                      // extender.scoring
  int worker_threads = 4;
  std::string log_level = "warn";
  std::vector<std::string> extra_flags;     // e.g. --extender.serializeHandoffs=false
};

class ExtenderProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ExtenderProcess>> Start(
      const ExtenderProcessOptions& options);
  ~ExtenderProcess();  // Stop() if still running.

  // "http://127.0.0.1:<port>"
  const std::string& url() const { return url_; }
  const std::string& data_dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, wait; the exit status (0 = clean) or an error.
  absl::StatusOr<int> Stop();

 private:
  ExtenderProcess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string url_;
  std::string dir_;
};

}  // namespace pdc::sim

#endif  // PDC_SIM_EXTENDER_PROCESS_H_
