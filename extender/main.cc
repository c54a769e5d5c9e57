// pdc-extender: the kube-scheduler extender and REST API of pdc.
//
// main only loads the configuration (config/: YAML + flags), sets up
// logging, blocks SIGTERM/SIGINT, starts an ExtenderApp (extender_app.h:
// store, allocator, server, background loops) and waits for a signal; then
// it stops the app gracefully (requests in flight finish, a last checkpoint
// is written, a leader releases its lease) and exits 0. A replica that lost
// the leader lease exits 1.
//
// Prints "pdc-extender listening on <addr>:<port>" on stdout once serving
// (tests start it with port 0 and read the port from that line).
#include <signal.h>
#include <time.h>

#include <iostream>
#include <memory>

#include "common/log_format.h"
#include "config/config.h"
#include "extender/extender_app.h"
#include "spdlog/spdlog.h"

#ifndef PDC_VERSION
#define PDC_VERSION "dev"
#endif

namespace pdc::extender {
namespace {

constexpr char kUsage[] =
    "pdc-extender: kube-scheduler extender and REST API for persistent device "
    "claims (KubeVirt).\n\n"
    "Usage: pdc-extender [--config=FILE] [--<field>=<value> ...]\n\n"
    "Serves on extender.listen:\n"
    "  POST <extender.schedulerPathPrefix>/{filter,prioritize,bind,preempt}\n"
    "       kube-scheduler extender verbs (KubeSchedulerConfiguration "
    "`extenders:`)\n"
    "  /v1/...   REST API: claims, nodes, devices, node inventory and "
    "allocations\n"
    "  /healthz /readyz /metrics\n\n"
    "Signals: SIGTERM or SIGINT stop gracefully (requests in flight finish).\n\n"
    "Fields (YAML path = flag name):\n";

int Fail(const absl::Status& s) {
  spdlog::critical("pdc-extender: {}", s.ToString());
  std::cerr << "pdc-extender: " << s.message() << "\n";
  return 1;
}

int Run(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<PdcConfig> config =
      LoadConfigFromArgs(argc, argv, Component::kExtender, &help);
  if (help) {
    std::cout << kUsage << ConfigHelp();
    return 0;
  }
  if (!config.ok()) {
    std::cerr << "pdc-extender: " << config.status().message()
              << "\n(run pdc-extender --help for the fields)\n";
    return 2;
  }
  // Logs on stderr; stdout carries only the "listening on" line.
  InstallLogging("pdc-extender", config->log_format == LogFormat::kJson, config->log_level);

  // Signals are handled by sigwait() in this thread; block them before any
  // thread starts so that none of them receives one.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<ExtenderApp>> app =
      ExtenderApp::Start(*config, {.clock = RealClock(), .version = PDC_VERSION});
  if (!app.ok()) return Fail(app.status());
  std::cout << "pdc-extender listening on " << (*app)->address() << ":" << (*app)->port()
            << std::endl;

  // A signal, or (extender.leaderElection) the lease lost: a replica that
  // lost it exits non-zero and is restarted as a follower, as
  // kube-scheduler does ("leaderelection lost").
  int sig = 0;
  const timespec poll = {0, 200 * 1000 * 1000};
  while ((sig = sigtimedwait(&signals, nullptr, &poll)) < 0) {
    if ((*app)->LeadershipLost()) {
      spdlog::critical("leader election lost: exiting, to start again as a follower");
      (*app)->Stop();
      return 1;
    }
  }
  spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*app)->Stop();
  app->reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace pdc::extender

int main(int argc, char** argv) { return pdc::extender::Run(argc, argv); }
