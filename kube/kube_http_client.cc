#include "kube/kube_http_client.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "api/json_util.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"
#include "net/http_client.h"
#include "yaml-cpp/yaml.h"

namespace pdc::kube {

namespace json = api::json;
namespace {

absl::StatusOr<std::string> ReadTrimmed(const std::string& path,
                                        std::string_view what) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(Sv(what), ": ", text.status().message()));
  }
  return std::string(absl::StripAsciiWhitespace(*text));
}

class HttpKubeClient final : public KubeClient {
 public:
  explicit HttpKubeClient(std::unique_ptr<KubeApi> api) : api_(std::move(api)) {}

  absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name,
                                     absl::Duration timeout) override {
    RETURN_IF_ERROR(CheckNames(ns, name));
    const std::string what = absl::StrCat("get pod ", Sv(ns), "/", Sv(name));
    ASSIGN_OR_RETURN(pdc::HttpResponse r, Call("GET", PodPath(ns, name), "", "", what, timeout));
    if (r.status != 200) return FromApiserver(r.status, r.body, what);
    return std::move(r.body);
  }

  absl::Status AnnotatePod(std::string_view ns, std::string_view name,
                           std::string_view key, std::string_view value,
                           absl::Duration timeout) override {
    RETURN_IF_ERROR(CheckNames(ns, name));
    const std::string what = absl::StrCat("annotate pod ", Sv(ns), "/", Sv(name));
    ASSIGN_OR_RETURN(pdc::HttpResponse r,
                     Call("PATCH", PodPath(ns, name), AnnotationPatchJson(key, value),
                          "application/merge-patch+json", what, timeout));
    if (r.status != 200) return FromApiserver(r.status, r.body, what);
    return absl::OkStatus();
  }

  absl::Status BindPod(std::string_view ns, std::string_view name,
                       std::string_view uid, std::string_view node,
                       absl::Duration timeout) override {
    RETURN_IF_ERROR(CheckNames(ns, name));
    const std::string what =
        absl::StrCat("bind pod ", Sv(ns), "/", Sv(name), " to node ", Sv(node));
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        Call("POST", absl::StrCat(PodPath(ns, name), "/binding"),
             BindingJson(ns, name, uid, node), "application/json", what, timeout));
    if (r.status != 201 && r.status != 200) {
      return FromApiserver(r.status, r.body, what);
    }
    return absl::OkStatus();
  }

 private:
  static std::string PodPath(std::string_view ns, std::string_view name) {
    return absl::StrCat("/api/v1/namespaces/", Sv(ns), "/pods/", Sv(name));
  }

  // Names go into the URL path: only DNS names, never '/', '?' or '%'.
  static absl::Status CheckNames(std::string_view ns, std::string_view name) {
    RETURN_IF_ERROR(model::ValidateNamespace("pod namespace", ns));
    return model::ValidateObjectName("pod name", name);
  }

  absl::StatusOr<pdc::HttpResponse> Call(std::string_view method, const std::string& path,
                                         const std::string& body,
                                         std::string_view content_type, std::string_view what,
                                         absl::Duration timeout) {
    return api_->Call(method, path, body, content_type, what, timeout);
  }

  const std::unique_ptr<KubeApi> api_;
};

std::string Resolve(const std::filesystem::path& base, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (base / p).string();
}

absl::StatusOr<std::string> WriteData(const std::string& dir,
                                      const std::string& name,
                                      const std::string& b64,
                                      std::string_view field) {
  std::string pem;
  if (!absl::Base64Unescape(b64, &pem)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", Sv(field), ": not valid base64"));
  }
  const std::string path = absl::StrCat(dir, "/", name);
  RETURN_IF_ERROR(WriteFileAtomically(path, pem));
  ::chmod(path.c_str(), 0600);
  return path;
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].as<std::string>();
}

// The entry named `name` of a kubeconfig list (clusters, users, contexts),
// i.e. its `cluster`/`user`/`context` map.
YAML::Node Named(const YAML::Node& list, const std::string& name,
                 const char* inner) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const YAML::Node& e : list) {  // binds the value `*it` returns: lives as long as `e`
    if (Str(e, "name") == name && e[inner] && e[inner].IsMap()) return e[inner];
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace

// Maps an apiserver answer that is not 2xx to a Status, using the v1 Status
// object it sends ({"kind":"Status","message":...,"reason":...,"code":...}).
absl::Status FromApiserver(int http, std::string_view body, std::string_view what) {
  std::string message;
  std::string reason;
  rapidjson::Document doc;
  if (json::Parse(body, &doc).ok() && doc.IsObject()) {
    if (auto m = json::OptString(doc, "message", "message"); m.ok()) {
      message = std::string(*m);
    }
    if (auto r = json::OptString(doc, "reason", "reason"); r.ok()) {
      reason = std::string(*r);
    }
  }
  if (message.empty()) message = std::string(body.substr(0, 200));
  const std::string text = absl::StrCat(Sv(what), ": kube-apiserver answered ", http,
                                        reason.empty() ? "" : " ", reason, ": ",
                                        message);
  switch (http) {
    case 404:
      return absl::NotFoundError(text);
    case 409:
      return absl::AbortedError(text);
    case 401:
      return absl::UnauthenticatedError(text);
    case 403:
      return absl::PermissionDeniedError(text);
    case 422:
    case 400:
      return absl::InvalidArgumentError(text);
    default:
      if (http == 429 || http >= 500) return absl::UnavailableError(text);
      return absl::InternalError(text);
  }
}

KubeEndpoint::KubeEndpoint(KubeClientConfig config) : config_(std::move(config)) {}

absl::StatusOr<std::unique_ptr<HttpClient>> KubeEndpoint::NewClient() const {
  HttpClientOptions o;
  o.base_url = config_.server;
  o.ca_file = config_.ca_file;
  o.cert_file = config_.cert_file;
  o.key_file = config_.key_file;
  o.timeout = config_.timeout;
  o.user_agent = "pdc-extender";
  o.peer_name = "kube-apiserver";
  return HttpClient::Create(o);
}

absl::StatusOr<HttpRequestOptions> KubeEndpoint::RequestOptions() const {
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    ASSIGN_OR_RETURN(token, ReadTrimmed(config_.token_file, "service-account token"));
  }
  HttpRequestOptions ro;
  ro.headers.emplace_back("Accept", "application/json");
  if (!token.empty()) ro.headers.emplace_back("Authorization", absl::StrCat("Bearer ", token));
  return ro;
}

std::string BindingJson(std::string_view ns, std::string_view name,
                        std::string_view uid, std::string_view node) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "apiVersion");
  json::Str(w, "v1");
  json::Key(w, "kind");
  json::Str(w, "Binding");
  json::Key(w, "metadata");
  w.StartObject();
  json::Key(w, "name");
  json::Str(w, name);
  json::Key(w, "namespace");
  json::Str(w, ns);
  json::Key(w, "uid");
  json::Str(w, uid);
  w.EndObject();
  json::Key(w, "target");
  w.StartObject();
  json::Key(w, "apiVersion");
  json::Str(w, "v1");
  json::Key(w, "kind");
  json::Str(w, "Node");
  json::Key(w, "name");
  json::Str(w, node);
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string AnnotationPatchJson(std::string_view key, std::string_view value) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "metadata");
  w.StartObject();
  json::Key(w, "annotations");
  w.StartObject();
  json::Key(w, key);
  json::Str(w, value);
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<KubeClientConfig> InClusterConfig(const GetEnv& getenv,
                                                 const std::string& sa_dir) {
  auto env = [&](std::string_view k) -> std::string {
    if (getenv) return getenv(k).value_or("");
    const char* v = std::getenv(std::string(k).c_str());
    return v ? v : "";
  };
  const std::string host = env("KUBERNETES_SERVICE_HOST");
  const std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "kubernetes.mode in-cluster: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT are not set (not running in a pod?)");
  }
  KubeClientConfig c;
  c.server = host.find(':') != std::string::npos
                 ? absl::StrCat("https://[", host, "]:", port)
                 : absl::StrCat("https://", host, ":", port);
  c.token_file = sa_dir + "/token";
  c.ca_file = sa_dir + "/ca.crt";
  // Fail at start-up, not at the first bind.
  RETURN_IF_ERROR(ReadTrimmed(c.token_file, "service-account token").status());
  RETURN_IF_ERROR(ReadFileToString(c.ca_file).status());
  return c;
}

absl::StatusOr<KubeClientConfig> KubeconfigFile(const std::string& path,
                                                const std::string& scratch_dir) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("kubernetes.kubeconfig: ", text.status().message()));
  }
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": ", e.what()));
  }
  const std::string context_name = Str(root, "current-context");
  const YAML::Node context = Named(root["contexts"], context_name, "context");
  if (!context || !context.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", path, ": current-context \"", context_name, "\" not found"));
  }
  const YAML::Node cluster = Named(root["clusters"], Str(context, "cluster"), "cluster");
  const YAML::Node user = Named(root["users"], Str(context, "user"), "user");
  if (!cluster || !cluster.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", path, ": cluster \"", Str(context, "cluster"), "\" not found"));
  }
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  KubeClientConfig c;
  c.server = Str(cluster, "server");
  if (c.server.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": the cluster has no server"));
  }
  c.ca_file = Resolve(base, Str(cluster, "certificate-authority"));
  c.token = Str(user, "token");
  c.token_file = Resolve(base, Str(user, "tokenFile"));
  c.cert_file = Resolve(base, Str(user, "client-certificate"));
  c.key_file = Resolve(base, Str(user, "client-key"));
  const std::string ca_data = Str(cluster, "certificate-authority-data");
  const std::string cert_data = Str(user, "client-certificate-data");
  const std::string key_data = Str(user, "client-key-data");
  if (!ca_data.empty() || !cert_data.empty() || !key_data.empty()) {
    std::string dir = scratch_dir;
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/pdc-kubeconfig-XXXXXX");
      if (::mkdtemp(tmpl.data()) == nullptr) {
        return absl::InternalError("cannot create a directory for kubeconfig data");
      }
      dir = tmpl;
    }
    if (!ca_data.empty()) {
      ASSIGN_OR_RETURN(c.ca_file, WriteData(dir, "ca.crt", ca_data,
                                            "certificate-authority-data"));
    }
    if (!cert_data.empty()) {
      ASSIGN_OR_RETURN(c.cert_file, WriteData(dir, "client.crt", cert_data,
                                              "client-certificate-data"));
    }
    if (!key_data.empty()) {
      ASSIGN_OR_RETURN(c.key_file,
                       WriteData(dir, "client.key", key_data, "client-key-data"));
    }
  }
  if (c.token.empty() && c.token_file.empty() && c.cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", path, ": user \"", Str(context, "user"),
        "\" has neither a token nor a client certificate (exec and auth-provider "
        "plugins are not supported)"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<KubeApi>> KubeApi::Connect(KubeClientConfig config) {
  std::unique_ptr<KubeApi> api(new KubeApi(std::move(config)));
  // One client to validate the URL and TLS files now, not at first use.
  ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> c, api->endpoint_.NewClient());
  absl::MutexLock lock(&api->mu_);
  api->idle_.push_back(std::move(c));
  return api;
}

absl::StatusOr<pdc::HttpResponse> KubeApi::Call(std::string_view method,
                                               const std::string& path,
                                               const std::string& body,
                                               std::string_view content_type,
                                               std::string_view what, absl::Duration timeout) {
  ASSIGN_OR_RETURN(HttpRequestOptions ro, endpoint_.RequestOptions());
  ro.timeout = std::min(timeout, endpoint_.config().timeout);
  if (ro.timeout <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat(Sv(what), ": no time left"));
  }
  if (!content_type.empty()) ro.content_type = std::string(content_type);

  std::unique_ptr<HttpClient> client;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      client = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (client == nullptr) {
    ASSIGN_OR_RETURN(client, endpoint_.NewClient());
  }
  absl::StatusOr<pdc::HttpResponse> r = client->Do(method, path, body, ro);
  if (!r.ok()) {
    return absl::Status(r.status().code(), absl::StrCat(Sv(what), ": ", r.status().message()));
  }
  absl::MutexLock lock(&mu_);
  if (idle_.size() < 8) idle_.push_back(std::move(client));
  return r;
}

absl::StatusOr<std::unique_ptr<KubeClient>> NewHttpKubeClient(KubeClientConfig config) {
  ASSIGN_OR_RETURN(std::unique_ptr<KubeApi> api, KubeApi::Connect(std::move(config)));
  return std::unique_ptr<KubeClient>(std::make_unique<HttpKubeClient>(std::move(api)));
}

}  // namespace pdc::kube
