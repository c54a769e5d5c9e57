// EtcdProcess: a real etcd (the Debian package etcd-server ships
// /usr/bin/etcd 3.4) started for a test, on loopback ports picked like port 0
// (bind port 0, read the port, release it; the whole start is retried on a
// collision), with its data in a fresh temporary directory. One member
// (Start) or a cluster of n members (StartCluster) for high-availability
// tests; members can be stopped, killed and restarted on the same ports and
// data. The destructor stops every member and removes the data.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start());
//   etcd->client_port(0)  // etcd's v3 JSON gateway and gRPC, plain HTTP
//
// Each member dies with the thread that started it (PR_SET_PDEATHSIG), so a
// crashed test leaves no etcd behind: start it from the test's main thread
// (a fixture's SetUp or SetUpTestSuite).
// Thread-safety: not thread-safe; one controlling thread.
#ifndef PDC_TESTS_TESTING_ETCD_PROCESS_H_
#define PDC_TESTS_TESTING_ETCD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdc::testing {

struct EtcdOptions {
  // The program; without a '/', looked up in PATH.
  std::string binary = "etcd";
  // Where the data directories go: "" is $TEST_TMPDIR, else /tmp.
  std::string parent_dir;
  // How long a start may take until every member answers /health.
  absl::Duration start_timeout = absl::Seconds(30);
  // SIGTERM, then SIGKILL after this long.
  absl::Duration stop_grace = absl::Seconds(5);
  // etcd's --experimental-watch-progress-notify-interval: how often a watch
  // with progress_notify gets an empty response carrying the revision up to
  // which it has seen every event (the double's BOOKMARK events use it).
  absl::Duration progress_notify_interval = absl::Milliseconds(100);
  // Start attempts with fresh ports when one was taken meanwhile.
  int attempts = 5;
};

class EtcdProcess {
 public:
  // The absolute path of `binary` (PATH lookup); NotFound naming the Debian
  // package etcd-server when there is none.
  static absl::StatusOr<std::string> FindBinary(
      std::string_view binary = "etcd");

  // One member, healthy on return.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      EtcdOptions options = {});
  // `members` members (1, 3, 5...) forming one cluster, all healthy on return.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> StartCluster(
      int members, EtcdOptions options = {});

  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  int members() const { return static_cast<int>(members_.size()); }
  // REQUIRES: 0 <= member < members().
  uint16_t client_port(int member = 0) const {
    return members_[member].client_port;
  }
  uint16_t peer_port(int member = 0) const {
    return members_[member].peer_port;
  }
  // "http://127.0.0.1:<client port>".
  std::string client_url(int member = 0) const;
  // Every member's client port, in member order.
  std::vector<uint16_t> client_ports() const;
  bool running(int member) const { return members_[member].pid > 0; }
  // What the member wrote to stdout/stderr (for failure messages).
  std::string Log(int member) const;

  // SIGTERM, then SIGKILL after stop_grace; waits for the exit.
  absl::Status StopMember(int member);
  // SIGKILL at once (a crash).
  absl::Status KillMember(int member);
  // Starts a stopped member again on its ports and data; waits for /health.
  absl::Status RestartMember(int member);
  // Stops every member (the destructor calls it); the data stays until
  // destruction.
  void Stop();

 private:
  struct Member {
    std::string name;
    uint16_t client_port = 0;
    uint16_t peer_port = 0;
    std::string data_dir;
    std::string log_file;
    pid_t pid = -1;
  };
  EtcdProcess(std::string binary, EtcdOptions options, std::string root)
      : binary_(std::move(binary)),
        options_(std::move(options)),
        root_(std::move(root)) {}

  absl::Status TryStart(int members);
  absl::Status Spawn(int member, bool new_cluster);
  absl::Status WaitHealthy(int member, absl::Time deadline);
  std::string InitialCluster() const;

  const std::string binary_;
  const EtcdOptions options_;
  const std::string
      root_;  // The temporary directory; every member's data is below.
  std::string cluster_token_;
  std::vector<Member> members_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_ETCD_PROCESS_H_
