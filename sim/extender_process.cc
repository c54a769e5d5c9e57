#include "sim/extender_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace pdc::sim {
namespace {

constexpr std::string_view kListening = "pdc-extender listening on ";

std::string ConfigYaml(const ExtenderProcessOptions& o, const std::string& dir) {
  std::string y = "deviceClasses:\n";
  for (const DeviceClass& c : o.device_classes) {
    absl::StrAppend(&y, "  - resourceName: ", c.resource_name, "\n    selectors: [");
    for (size_t i = 0; i < c.selectors.size(); ++i) {
      absl::StrAppendFormat(&y, "%s\"%04x:%04x\"", i ? ", " : "", c.selectors[i].vendor_id,
                            c.selectors[i].device_id);
    }
    y += "]\n";
  }
  absl::StrAppend(&y, "logLevel: ", o.log_level, "\n",
                  "extender:\n"
                  "  listen: \"127.0.0.1:0\"\n"
                  "  dataDir: \"", dir, "/data\"\n"
                  "  store: file\n"
                  "  scoring: ", o.spread ? "spread" : "binpack", "\n",
                  "  workerThreads: ", o.worker_threads, "\n",
                  // The simulator reports inventories again as heartbeats, but
                  // a long sweep step must not see nodes go stale between them.
                  "  nodeStaleAfter: 1h\n");
  return y;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExtenderProcess>> ExtenderProcess::Start(
    const ExtenderProcessOptions& options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("pdc-extender binary ", options.binary, " is not executable: ",
                     std::strerror(errno)));
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "pdc-sim-extender-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus("mkdtemp", tmpl, errno);
  auto p = std::unique_ptr<ExtenderProcess>(new ExtenderProcess());
  p->dir_ = tmpl;
  const std::string config = p->dir_ + "/pdc.yaml";
  RETURN_IF_ERROR(WriteFileAtomically(config, ConfigYaml(options, p->dir_)));

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe", "", errno);
  std::vector<std::string> args = {options.binary, "--config=" + config};
  for (const std::string& f : options.extra_flags) args.push_back(f);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork", options.binary, errno);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    // The extender's log goes to a file in the temp dir: the demo's output
    // stays readable and a failing start can be diagnosed.
    const std::string log = p->dir_ + "/extender.log";
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  p->pid_ = pid;
  // Read stdout until the "listening on" line (10 s at most).
  std::string buf;
  const absl::Time deadline = RealClock()->Deadline(absl::Seconds(10));
  auto complete = [&] {
    const size_t at = buf.find(kListening);
    return at != std::string::npos && buf.find('\n', at) != std::string::npos;
  };
  p->stdout_fd_ = out[0];
  while (!complete()) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - RealClock()->Now());
    pollfd pfd{out[0], POLLIN, 0};
    if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) <= 0) {
      (void)p->Stop();
      return absl::DeadlineExceededError(
          absl::StrCat("pdc-extender did not say it was listening within 10 s; see ",
                       p->dir_, "/extender.log"));
    }
    char chunk[512];
    const ssize_t n = read(out[0], chunk, sizeof chunk);
    if (n <= 0) {
      std::string log = ReadFileToString(p->dir_ + "/extender.log").value_or("");
      (void)p->Stop();
      return absl::UnavailableError(
          absl::StrCat("pdc-extender exited before listening: ", log));
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
  const size_t at = buf.find(kListening) + kListening.size();
  const std::string hostport = buf.substr(at, buf.find('\n', at) - at);
  p->url_ = "http://" + hostport;
  return p;
}

absl::StatusOr<int> ExtenderProcess::Stop() {
  if (pid_ < 0) return 0;
  kill(pid_, SIGTERM);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = -1;
  // Kept open until the child is gone so that it never writes to a closed pipe.
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (r < 0) return ErrnoStatus("waitpid", "pdc-extender", errno);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

ExtenderProcess::~ExtenderProcess() { (void)Stop(); }

}  // namespace pdc::sim
