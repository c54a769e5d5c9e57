// Registrar: registers a DRA driver with kubelet through kubelet's plugin
// watcher. It serves the pluginregistration v1 Registration service on
// <registry dir>/<driver>-reg.sock; kubelet notices the socket, calls
// GetInfo (answered: type DRAPlugin, the driver name, the DRA service's
// socket, the services served, v1.DRAPlugin first), validates and registers
// the plugin, and calls NotifyRegistrationStatus with its verdict
// (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go).
// A refusal is logged with kubelet's reason; kubelet does not ask again for
// a socket it already tried, so the next Ensure() serves a new socket (the
// watcher sees it created) and kubelet validates it again. A socket that
// vanished (kubelet's directory cleaned) is served anew the same way.
// Thread-safety: Ensure/Stop from one thread at a time; the rest from any.
#ifndef PDC_DRIVER_DRA_REGISTRAR_H_
#define PDC_DRIVER_DRA_REGISTRAR_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace pdc::driver::dra {

struct RegistrarOptions {
  std::string driver_name;
  std::string registry_dir;                     // kubelet's plugins_registry/.
  std::string service_endpoint;                 // The DRA service's socket path.
  std::vector<std::string> supported_services;  // Default: v1, v1beta1.
};

class Registrar {
 public:
  explicit Registrar(RegistrarOptions options);
  ~Registrar();

  // Serving afterwards; a new socket when kubelet refused the last one or
  // the socket is gone. An error says what failed (retried next time).
  absl::Status Ensure();
  void Stop();

  std::string socket_path() const;
  // kubelet's verdicts so far.
  uint64_t accepted() const;
  uint64_t refused() const;
  std::string last_error() const;  // kubelet's reason of the last refusal.
  uint64_t server_starts() const;
  // Waits until kubelet accepted at least `n` times or refused at least
  // `r` times; false on timeout.
  bool WaitForVerdicts(uint64_t n, uint64_t r, absl::Duration timeout) const;

 private:
  class Service;
  void OnStatus(bool registered, const std::string& error);
  void StopServer();

  const RegistrarOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  ino_t socket_inode_ = 0;
  mutable absl::Mutex mu_;
  uint64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t server_starts_ ABSL_GUARDED_BY(mu_) = 0;
  bool serve_anew_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_REGISTRAR_H_
