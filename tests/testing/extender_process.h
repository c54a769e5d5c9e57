// pdc-extender as a child process, for tests that kill it (-9) and start it
// again: started with the given flags (a port-0 listener among them), its
// port read from the first line of its stdout ("pdc-extender listening on
// <addr>:<port>"; logs go to stderr). A child that does not start has port
// 0. The destructor kills (-9) a child still running.
#ifndef PDC_TESTS_TESTING_EXTENDER_PROCESS_H_
#define PDC_TESTS_TESTING_EXTENDER_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "net/http_client.h"

namespace pdc::testing {

class ExtenderProcess {
 public:
  // `binary`: the pdc-extender executable; `flags`: its arguments.
  ExtenderProcess(const std::string& binary, const std::vector<std::string>& flags) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>("pdc-extender"));
      for (const std::string& f : flags) argv.push_back(const_cast<char*>(f.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      _exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    char line[256] = {};
    if (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
      std::string s(line);
      const size_t colon = s.rfind(':');
      int port = 0;
      if (s.find("listening on") != std::string::npos && colon != std::string::npos &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(s.substr(colon + 1)), &port)) {
        port_ = static_cast<uint16_t>(port);
      }
    }
    if (f != nullptr) std::fclose(f);
  }
  ~ExtenderProcess() {
    if (pid_ > 0 && !reaped_) Kill(SIGKILL);
  }
  ExtenderProcess(const ExtenderProcess&) = delete;
  ExtenderProcess& operator=(const ExtenderProcess&) = delete;

  uint16_t port() const { return port_; }
  // Sends `sig` (0: none, the child is exiting) and returns the wait status.
  int Kill(int sig) {
    if (sig != 0) ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }
  std::unique_ptr<HttpClient> Client(absl::Duration timeout = absl::Seconds(20)) const {
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", port_);
    o.timeout = timeout;
    auto c = HttpClient::Create(o);
    return c.ok() ? *std::move(c) : nullptr;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool reaped_ = false;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_EXTENDER_PROCESS_H_
