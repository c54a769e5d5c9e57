#include "tests/testing/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/testing/http_stream.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing {
namespace {

// A free loopback port: bind port 0, read what the kernel chose, release it.
// Another process may take it before etcd binds it; Start() then retries.
absl::StatusOr<uint16_t> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Cat("socket: ", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(Cat("bind 127.0.0.1:0: ", std::strerror(err)));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Waits up to `grace` for `pid` to exit; true when it did (and was reaped).
bool WaitExit(pid_t pid, absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (absl::Now() >= deadline) return false;
    // A child's exit has no descriptor to poll; a short nap is the cheapest
    // portable wait.
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::string> EtcdProcess::FindBinary(std::string_view binary) {
  auto executable = [](const std::string& p) {
    return ::access(p.c_str(), X_OK) == 0;
  };
  if (binary.find('/') != std::string_view::npos) {
    if (executable(std::string(binary))) return std::string(binary);
  } else if (const char* path = std::getenv("PATH")) {
    for (std::string_view dir : Split(path, ':', absl::SkipEmpty())) {
      const std::string candidate = Cat(dir, "/", binary);
      if (executable(candidate)) return candidate;
    }
  }
  return absl::NotFoundError(
      Cat("etcd is not installed: no executable \"", binary,
          "\" in PATH; on Debian 12 install the package etcd-server "
          "(apt-get install etcd-server, or scripts/install-deps.sh)"));
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(
    EtcdOptions options) {
  return StartCluster(1, std::move(options));
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::StartCluster(
    int members, EtcdOptions options) {
  if (members < 1) {
    return absl::InvalidArgumentError(
        Cat("an etcd cluster needs at least one member, asked for ", members));
  }
  absl::StatusOr<std::string> binary = FindBinary(options.binary);
  if (!binary.ok()) return binary.status();
  std::string parent = options.parent_dir;
  if (parent.empty()) {
    const char* t = std::getenv("TEST_TMPDIR");
    parent = t != nullptr ? t : "/tmp";
  }
  std::string tmpl = parent + "/pdc-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(Cat("cannot create a directory under ", parent,
                                   ": ", std::strerror(errno)));
  }
  std::unique_ptr<EtcdProcess> p(new EtcdProcess(*binary, options, tmpl));
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, options.attempts); ++attempt) {
    last = p->TryStart(members);
    if (last.ok()) return p;
    if (!absl::IsAborted(last)) break;  // Not a port collision: give up.
  }
  return last;
}

absl::Status EtcdProcess::TryStart(int count) {
  Stop();
  std::error_code ec;
  for (const Member& m : members_) std::filesystem::remove_all(m.data_dir, ec);
  members_.clear();
  std::random_device rd;
  cluster_token_ = Cat("pdc-test-", rd());
  for (int i = 0; i < count; ++i) {
    Member m;
    m.name = Cat("m", i);
    absl::StatusOr<uint16_t> c = FreePort();
    if (!c.ok()) return c.status();
    absl::StatusOr<uint16_t> pp = FreePort();
    if (!pp.ok()) return pp.status();
    m.client_port = *c;
    m.peer_port = *pp;
    m.data_dir = Cat(root_, "/", m.name);
    m.log_file = Cat(root_, "/", m.name, ".log");
    members_.push_back(std::move(m));
  }
  for (int i = 0; i < count; ++i) {
    if (absl::Status s = Spawn(i, /*new_cluster=*/true); !s.ok()) return s;
  }
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (int i = 0; i < count; ++i) {
    absl::Status s = WaitHealthy(i, deadline);
    if (!s.ok()) {
      const bool collision = Contains(Log(i), "address already in use");
      Stop();
      if (collision) return absl::AbortedError(s.message());
      return s;
    }
  }
  return absl::OkStatus();
}

std::string EtcdProcess::InitialCluster() const {
  std::vector<std::string> parts;
  for (const Member& m : members_) {
    parts.push_back(Cat(m.name, "=http://127.0.0.1:", m.peer_port));
  }
  return absl::StrJoin(parts, ",");
}

absl::Status EtcdProcess::Spawn(int i, bool new_cluster) {
  Member& m = members_[i];
  const std::string client = Cat("http://127.0.0.1:", m.client_port);
  const std::string peer = Cat("http://127.0.0.1:", m.peer_port);
  std::vector<std::string> args = {
      binary_,
      "--name",
      m.name,
      "--data-dir",
      m.data_dir,
      "--listen-client-urls",
      client,
      "--advertise-client-urls",
      client,
      "--listen-peer-urls",
      peer,
      "--initial-advertise-peer-urls",
      peer,
      "--initial-cluster",
      InitialCluster(),
      "--initial-cluster-token",
      cluster_token_,
      "--initial-cluster-state",
      new_cluster ? "new" : "existing",
      "--experimental-watch-progress-notify-interval",
      Cat(absl::ToInt64Milliseconds(options_.progress_notify_interval), "ms"),
      "--logger",
      "zap",
      "--log-outputs",
      "stderr",
  };
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(Cat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int log =
        ::open(m.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  m.pid = pid;
  return absl::OkStatus();
}

absl::Status EtcdProcess::WaitHealthy(int i, absl::Time deadline) {
  Member& m = members_[i];
  std::string last = "no answer yet";
  for (;;) {
    int status = 0;
    if (::waitpid(m.pid, &status, WNOHANG) == m.pid) {
      m.pid = -1;
      return absl::UnavailableError(Cat("etcd member ", m.name,
                                        " exited during start-up (status ",
                                        status, "); its log:\n", Log(i)));
    }
    absl::StatusOr<std::unique_ptr<HttpStream>> s =
        HttpStream::Open(m.client_port, "GET", "/health", {},
                         {{"Connection", "close"}}, absl::Seconds(2));
    if (s.ok()) {
      absl::StatusOr<std::string> body =
          (*s)->ReadAll(absl::Now() + absl::Seconds(2));
      if (body.ok() && (*s)->status() == 200 &&
          Contains(*body, "\"health\":\"true\"")) {
        return absl::OkStatus();
      }
      last = body.ok() ? *body : std::string(body.status().message());
    } else {
      last = std::string(s.status().message());
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          Cat("etcd member ", m.name, " on 127.0.0.1:", m.client_port,
              " not healthy in time (last: ", last, "); its log:\n", Log(i)));
    }
    // etcd has no readiness descriptor to wait on; poll /health.
    absl::SleepFor(absl::Milliseconds(20));
  }
}

EtcdProcess::~EtcdProcess() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::string EtcdProcess::client_url(int member) const {
  return Cat("http://127.0.0.1:", members_[member].client_port);
}

std::vector<uint16_t> EtcdProcess::client_ports() const {
  std::vector<uint16_t> out;
  for (const Member& m : members_) out.push_back(m.client_port);
  return out;
}

std::string EtcdProcess::Log(int member) const {
  return ReadFileOrEmpty(members_[member].log_file);
}

absl::Status EtcdProcess::StopMember(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return absl::OkStatus();
  ::kill(m.pid, SIGTERM);
  if (!WaitExit(m.pid, options_.stop_grace)) {
    ::kill(m.pid, SIGKILL);
    WaitExit(m.pid, absl::Seconds(10));
  }
  m.pid = -1;
  return absl::OkStatus();
}

absl::Status EtcdProcess::KillMember(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return absl::OkStatus();
  ::kill(m.pid, SIGKILL);
  WaitExit(m.pid, absl::Seconds(10));
  m.pid = -1;
  return absl::OkStatus();
}

absl::Status EtcdProcess::RestartMember(int i) {
  if (members_[i].pid > 0) {
    return absl::FailedPreconditionError(
        Cat("etcd member ", members_[i].name, " is still running"));
  }
  // With its data directory in place etcd ignores the --initial-* flags and
  // rejoins with the membership it stored.
  if (absl::Status s = Spawn(i, /*new_cluster=*/false); !s.ok()) return s;
  return WaitHealthy(i, absl::Now() + options_.start_timeout);
}

void EtcdProcess::Stop() {
  for (int i = 0; i < members(); ++i) StopMember(i).IgnoreError();
}

}  // namespace pdc::testing
