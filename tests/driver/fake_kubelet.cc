#include "tests/driver/fake_kubelet.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pdc::driver::testing {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

// kubelet's Registration service: validates like kubelet (version,
// endpoint, resource name) and hands the connecting to another thread, as
// kubelet does.
class FakeKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet* kubelet) : kubelet_(kubelet) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    if (request->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unsupported device plugin API version " + request->version());
    }
    if (request->endpoint().empty() || request->endpoint().find('/') != std::string::npos ||
        request->resource_name().find('/') == std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad endpoint or resource name");
    }
    kubelet_->OnRegister(*request);
    return grpc::Status::OK;
  }

 private:
  FakeKubelet* const kubelet_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

absl::Status FakeKubelet::Start() { return Serve(); }

absl::Status FakeKubelet::Serve() {
  const std::string path = dir_ + "/kubelet.sock";
  std::error_code ec;
  std::filesystem::remove(path, ec);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<RegistrationService>(this);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) return absl::UnavailableError("cannot serve " + path);
  connect_thread_ = std::thread([this] { ConnectLoop(); });
  return absl::OkStatus();
}

void FakeKubelet::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    to_connect_.clear();
  }
  if (connect_thread_.joinable()) connect_thread_.join();
  {
    absl::MutexLock lock(&endpoints_mu_);
    for (auto& [name, ep] : endpoints_) ep->stream_context->TryCancel();
    for (auto& [name, ep] : endpoints_) {
      if (ep->reader.joinable()) ep->reader.join();
    }
    endpoints_.clear();
  }
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
  service_.reset();
}

void FakeKubelet::Stop() { Shutdown(); }

absl::Status FakeKubelet::Restart() {
  Shutdown();
  // kubelet's device manager empties the directory when it starts.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.is_socket()) std::filesystem::remove(entry.path(), ec);
  }
  {
    absl::MutexLock lock(&mu_);
    devices_.clear();
    options_.clear();
  }
  return Serve();
}

void FakeKubelet::OnRegister(const v1beta1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  registrations_.push_back(request);
  to_connect_.push_back(request);
}

void FakeKubelet::ConnectLoop() {
  while (true) {
    v1beta1::RegisterRequest request;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !to_connect_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      request = std::move(to_connect_.front());
      to_connect_.pop_front();
    }
    Connect(request);
  }
}

void FakeKubelet::Connect(const v1beta1::RegisterRequest& request) {
  const std::string resource = request.resource_name();
  auto channel = grpc::CreateChannel("unix:" + dir_ + "/" + request.endpoint(),
                                     grpc::InsecureChannelCredentials());
  auto ep = std::make_unique<Endpoint>();
  ep->stub = v1beta1::DevicePlugin::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    context.set_wait_for_ready(true);
    v1beta1::DevicePluginOptions options;
    if (ep->stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok()) {
      absl::MutexLock lock(&mu_);
      options_[resource] = options;
    }
  }
  ep->stream_context = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<Endpoint> old;
  {
    // In the map before the stream delivers anything: a test that saw the
    // devices can call the plugin at once.
    absl::MutexLock lock(&endpoints_mu_);
    old = std::move(endpoints_[resource]);
    Endpoint* e = ep.get();
    endpoints_[resource] = std::move(ep);
    e->reader = std::thread([this, resource, stub = e->stub.get(),
                             context = e->stream_context.get()] {
      auto reader = stub->ListAndWatch(context, v1beta1::Empty());
      v1beta1::ListAndWatchResponse update;
      while (reader->Read(&update)) {
        absl::MutexLock lock(&mu_);
        devices_[resource].assign(update.devices().begin(), update.devices().end());
      }
      (void)reader->Finish();
    });
  }
  if (old) {  // A plugin registering again replaces its old connection.
    old->stream_context->TryCancel();
    if (old->reader.joinable()) old->reader.join();
  }
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

bool FakeKubelet::WaitForRegistrations(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return registrations_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

bool FakeKubelet::WaitForDevices(const std::string& resource, const DevicesPredicate& pred,
                                 absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = devices_.find(resource);
    return it != devices_.end() && pred(it->second);
  };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

std::vector<v1beta1::Device> FakeKubelet::devices(const std::string& resource) const {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(resource);
  return it == devices_.end() ? std::vector<v1beta1::Device>{} : it->second;
}

std::optional<v1beta1::DevicePluginOptions> FakeKubelet::options(
    const std::string& resource) const {
  absl::MutexLock lock(&mu_);
  auto it = options_.find(resource);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

v1beta1::DevicePlugin::Stub* FakeKubelet::StubFor(const std::string& resource) {
  absl::MutexLock lock(&endpoints_mu_);
  auto it = endpoints_.find(resource);
  return it == endpoints_.end() ? nullptr : it->second->stub.get();
}

absl::StatusOr<std::vector<std::string>> FakeKubelet::GetPreferredAllocation(
    const std::string& resource, const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  v1beta1::DevicePlugin::Stub* stub = StubFor(resource);
  if (stub == nullptr) return absl::NotFoundError("no plugin registered for " + resource);
  v1beta1::PreferredAllocationRequest request;
  auto* c = request.add_container_requests();
  for (const std::string& id : available) c->add_available_deviceids(id);
  for (const std::string& id : must_include) c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1beta1::PreferredAllocationResponse response;
  grpc::Status s = stub->GetPreferredAllocation(&context, request, &response);
  if (!s.ok()) return FromGrpc(s);
  if (response.container_responses_size() != 1) {
    return absl::InternalError("GetPreferredAllocation answered for the wrong number of containers");
  }
  const auto& ids = response.container_responses(0).deviceids();
  return std::vector<std::string>(ids.begin(), ids.end());
}

absl::StatusOr<v1beta1::ContainerAllocateResponse> FakeKubelet::Allocate(
    const std::string& resource, const std::vector<std::string>& ids) {
  v1beta1::DevicePlugin::Stub* stub = StubFor(resource);
  if (stub == nullptr) return absl::NotFoundError("no plugin registered for " + resource);
  v1beta1::AllocateRequest request;
  auto* c = request.add_container_requests();
  for (const std::string& id : ids) c->add_devices_ids(id);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1beta1::AllocateResponse response;
  grpc::Status s = stub->Allocate(&context, request, &response);
  if (!s.ok()) return FromGrpc(s);
  if (response.container_responses_size() != 1) {
    return absl::InternalError("Allocate answered for the wrong number of containers");
  }
  return response.container_responses(0);
}

FakeKubelet::Admission FakeKubelet::Admit(const std::string& pod, const std::string& resource,
                                          int count, bool reverse, bool ignore_preferred) {
  absl::MutexLock admit(&admit_mu_);
  Admission a{{}, {}, absl::UnknownError("not admitted")};
  std::vector<std::string> available;
  bool preferred_available = false;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::string> used;
    for (const auto& [p, ids] : in_use_) used.insert(ids.begin(), ids.end());
    for (const v1beta1::Device& d : devices_[resource]) {
      if (d.health() == "Healthy" && !used.contains(d.id())) available.push_back(d.id());
    }
    if (auto it = options_.find(resource); it != options_.end()) {
      preferred_available = it->second.get_preferred_allocation_available();
    }
  }
  if (reverse) std::reverse(available.begin(), available.end());
  if (static_cast<int>(available.size()) < count) {
    a.response = absl::ResourceExhaustedError(absl::StrCat(
        "kubelet: requested ", count, " ", resource, ", available ", available.size()));
    return a;
  }
  // kubelet asks only when there is a choice (devicesToAllocate: needed <
  // aligned.Len()), then keeps the preferred IDs that are available.
  if (preferred_available && static_cast<int>(available.size()) > count) {
    auto p = GetPreferredAllocation(resource, available, {}, count);
    if (p.ok()) a.preferred = *p;
  }
  const bool usable =
      !ignore_preferred && static_cast<int>(a.preferred.size()) == count &&
      std::all_of(a.preferred.begin(), a.preferred.end(), [&](const std::string& id) {
        return std::find(available.begin(), available.end(), id) != available.end();
      });
  a.chosen = usable ? a.preferred
                    : std::vector<std::string>(available.begin(), available.begin() + count);
  a.response = Allocate(resource, a.chosen);
  if (a.response.ok()) {
    absl::MutexLock lock(&mu_);
    in_use_[pod] = std::set<std::string>(a.chosen.begin(), a.chosen.end());
  }
  return a;
}

void FakeKubelet::Release(const std::string& pod) {
  absl::MutexLock lock(&mu_);
  in_use_.erase(pod);
}

}  // namespace pdc::driver::testing
