#include "tests/driver/fake_dra_kubelet.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "driver/dra/pluginregistration/v1/api.grpc.pb.h"
#include "driver/dra/v1/api.grpc.pb.h"
#include "driver/dra/v1beta1/api.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace pdc::driver::testing {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drabeta = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

namespace {

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

// Calls the service kubelet chose for the plugin (dra_plugin.go switches on
// chosenService the same way).
template <typename Request, typename Response>
grpc::Status CallDra(const RegisteredDraPlugin& plugin, bool prepare, const Request& req,
                     Response* resp) {
  auto channel = grpc::CreateChannel("unix:" + plugin.endpoint, grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(45)));  // defaultClientCallTimeout
  if (plugin.chosen_service == "v1beta1.DRAPlugin") {
    auto stub = drabeta::DRAPlugin::NewStub(channel);
    if constexpr (std::is_same_v<Request, drapb::NodePrepareResourcesRequest>) {
      (void)prepare;
      return stub->NodePrepareResources(&ctx, req, resp);
    } else {
      return stub->NodeUnprepareResources(&ctx, req, resp);
    }
  }
  auto stub = drapb::DRAPlugin::NewStub(channel);
  if constexpr (std::is_same_v<Request, drapb::NodePrepareResourcesRequest>) {
    return stub->NodePrepareResources(&ctx, req, resp);
  } else {
    return stub->NodeUnprepareResources(&ctx, req, resp);
  }
}

}  // namespace

FakeDraKubelet::FakeDraKubelet(std::string registry_dir, std::vector<std::string> services)
    : registry_dir_(std::move(registry_dir)), services_(std::move(services)) {}

int FakeDraKubelet::WatchOnce() {
  int handled = 0;
  std::error_code ec;
  std::vector<std::string> sockets;
  for (const auto& entry : std::filesystem::directory_iterator(registry_dir_, ec)) {
    sockets.push_back(entry.path().string());
  }
  std::sort(sockets.begin(), sockets.end());
  for (const std::string& path : sockets) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (!seen_.insert({path, st.st_ino}).second) continue;
    ++handled;
    auto channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
    auto stub = pluginregistration::Registration::NewStub(channel);
    pluginregistration::PluginInfo info;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(std::chrono::seconds(1)));
      ctx.set_wait_for_ready(true);
      if (!stub->GetInfo(&ctx, pluginregistration::InfoRequest(), &info).ok()) {
        // Still desired, not registered: kubelet's plugin manager reconciler
        // (pkg/kubelet/pluginmanager/reconciler/reconciler.go) tries it again
        // on its next pass.
        seen_.erase({path, st.st_ino});
        continue;
      }
    }
    auto notify = [&](bool ok, const std::string& error) {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(std::chrono::seconds(5)));  // notifyTimeoutDuration
      pluginregistration::RegistrationStatus status;
      status.set_plugin_registered(ok);
      status.set_error(error);
      pluginregistration::RegistrationStatusResponse resp;
      (void)stub->NotifyRegistrationStatus(&ctx, status, &resp);
      verdicts_.push_back(error);
    };
    if (info.type() != "DRAPlugin") {
      notify(false, absl::StrCat("RegisterPlugin error -- no handler registered for plugin type: ",
                                 info.type(), " at socket ", path));
      continue;
    }
    std::string endpoint = info.endpoint().empty() ? path : info.endpoint();
    std::string chosen;
    for (const std::string& s : info.supported_versions()) {
      if (std::find(services_.begin(), services_.end(), s) != services_.end()) {
        chosen = s;
        break;
      }
    }
    if (chosen.empty()) {
      notify(false,
             absl::StrCat("RegisterPlugin error -- plugin validation failed with err: invalid "
                          "supported gRPC versions of DRA driver plugin ",
                          info.name(), " at endpoint ", endpoint,
                          ": none of services supported by the plugin are supported by the "
                          "kubelet (",
                          absl::StrJoin(services_, ", "), ")"));
      continue;
    }
    plugins_[info.name()] = {info.name(), endpoint, chosen};
    notify(true, "");
  }
  return handled;
}

absl::StatusOr<std::vector<std::string>> FakeDraKubelet::PreparePod(
    const std::string& pod_uid, const std::vector<FakeClaimRef>& claims) {
  std::map<std::string, std::vector<std::string>> batches;  // driver -> claim keys
  for (const FakeClaimRef& ref : claims) {
    if (!plugins_.contains(ref.driver)) {
      return absl::FailedPreconditionError(
          absl::StrCat("DRA driver ", ref.driver, " is not registered"));
    }
    const std::string key = ref.ns + "/" + ref.name;
    ClaimInfo& info = claims_[key];
    if (!info.pods.empty() && info.ref.uid != ref.uid) {
      return absl::FailedPreconditionError(absl::StrCat("old ResourceClaim with same name ",
                                                        ref.name, " and different UID ",
                                                        info.ref.uid, " still exists"));
    }
    info.ref = ref;
    info.pods.insert(pod_uid);
    if (!info.prepared) batches[ref.driver].push_back(key);
  }
  for (const auto& [driver, keys] : batches) {
    drapb::NodePrepareResourcesRequest req;
    for (const std::string& key : keys) {
      drapb::Claim* c = req.add_claims();
      c->set_namespace_(claims_[key].ref.ns);
      c->set_uid(claims_[key].ref.uid);
      c->set_name(claims_[key].ref.name);
    }
    drapb::NodePrepareResourcesResponse resp;
    ++prepare_calls_;
    grpc::Status s = CallDra(plugins_.at(driver), true, req, &resp);
    if (!s.ok()) return absl::UnavailableError("NodePrepareResources: " + s.error_message());
    for (const std::string& key : keys) {
      ClaimInfo& info = claims_[key];
      auto it = resp.claims().find(info.ref.uid);
      if (it == resp.claims().end()) {
        return absl::UnavailableError("NodePrepareResources skipped ResourceClaim " + key);
      }
      if (!it->second.error().empty()) {
        return absl::UnavailableError(absl::StrCat("NodePrepareResources failed for ResourceClaim ",
                                                   info.ref.name, ": ", it->second.error()));
      }
      info.cdi_ids.clear();
      for (const drapb::Device& d : it->second.devices()) {
        for (const std::string& id : d.cdi_device_ids()) info.cdi_ids.push_back(id);
      }
      info.prepared = true;
    }
  }
  std::vector<std::string> ids;
  for (const FakeClaimRef& ref : claims) {
    const ClaimInfo& info = claims_[ref.ns + "/" + ref.name];
    ids.insert(ids.end(), info.cdi_ids.begin(), info.cdi_ids.end());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::Status FakeDraKubelet::UnpreparePod(const std::string& pod_uid) {
  std::map<std::string, std::vector<std::string>> batches;
  for (auto& [key, info] : claims_) {
    if (info.pods.erase(pod_uid) == 0 || !info.pods.empty()) continue;
    batches[info.ref.driver].push_back(key);
  }
  for (const auto& [driver, keys] : batches) {
    auto plugin = plugins_.find(driver);
    if (plugin == plugins_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("DRA driver ", driver, " is not registered"));
    }
    drapb::NodeUnprepareResourcesRequest req;
    for (const std::string& key : keys) {
      drapb::Claim* c = req.add_claims();
      c->set_namespace_(claims_[key].ref.ns);
      c->set_uid(claims_[key].ref.uid);
      c->set_name(claims_[key].ref.name);
    }
    drapb::NodeUnprepareResourcesResponse resp;
    ++unprepare_calls_;
    grpc::Status s = CallDra(plugin->second, false, req, &resp);
    if (!s.ok()) return absl::UnavailableError("NodeUnprepareResources: " + s.error_message());
    for (const std::string& key : keys) {
      auto it = resp.claims().find(claims_[key].ref.uid);
      if (it == resp.claims().end()) {
        return absl::UnavailableError("NodeUnprepareResources skipped ResourceClaim " + key);
      }
      if (!it->second.error().empty()) {
        return absl::UnavailableError(
            absl::StrCat("NodeUnprepareResources failed for ", key, ": ", it->second.error()));
      }
      claims_.erase(key);
    }
  }
  return absl::OkStatus();
}

void FakeDraKubelet::Restart() {
  plugins_.clear();
  seen_.clear();  // The new watcher's first pass sees every socket.
  for (auto& [key, info] : claims_) info.prepared = false;
}

}  // namespace pdc::driver::testing
