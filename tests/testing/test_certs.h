// Test PKI made at run time with OpenSSL (no key is checked in, nothing is
// fetched): a CA; a server certificate for 127.0.0.1/localhost and a client
// certificate, both signed by that CA; and a second, unrelated "rogue" CA
// with a client certificate of its own, which every peer must refuse. All
// are EC P-256, valid from an hour ago for a day, and written as PEM files
// into a directory the test owns; the server's certificate and key are also
// kept in memory for servers that take PEM text.
// Tests linking this header link OpenSSL (libcrypto).
// Thread-safety: MakeTestPki may be called from any thread; it touches only
// its own objects and files.
#ifndef PDC_TESTS_TESTING_TEST_CERTS_H_
#define PDC_TESTS_TESTING_TEST_CERTS_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace pdc::testing {

struct TestPki {
  // PEM files.
  std::string ca_cert, server_cert, server_key, client_cert, client_key;
  // The rogue CA (did not sign the server's certificate) and a client
  // certificate it signed.
  std::string rogue_ca_cert, rogue_cert, rogue_key;
  // The contents of server_cert and server_key.
  std::string server_cert_pem, server_key_pem;
};

namespace certs_internal {

inline void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext != nullptr) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
}

// Signs a new certificate for `key` named `cn` with (issuer, issuer_key);
// self-signed when issuer is null.
inline X509* MakeCert(EVP_PKEY* key, const char* cn, X509* issuer,
                      EVP_PKEY* issuer_key, long serial, bool ca,
                      const char* san) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1,
                             0);
  X509* signer = issuer ? issuer : cert;
  X509_set_issuer_name(cert, X509_get_subject_name(signer));
  AddExt(cert, signer, NID_basic_constraints,
         ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) AddExt(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (san != nullptr) AddExt(cert, signer, NID_subject_alt_name, san);
  X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256());
  return cert;
}

inline void WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  if (cert) PEM_write_X509(f, cert);
  if (key) {
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  }
  std::fclose(f);
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace certs_internal

// Makes the PKI in `dir` (which must exist).
inline TestPki MakeTestPki(const std::string& dir) {
  using certs_internal::MakeCert;
  using certs_internal::WritePem;
  TestPki p;
  p.ca_cert = dir + "/ca.crt";
  p.server_cert = dir + "/server.crt";
  p.server_key = dir + "/server.key";
  p.client_cert = dir + "/client.crt";
  p.client_key = dir + "/client.key";
  p.rogue_ca_cert = dir + "/rogue-ca.crt";
  p.rogue_cert = dir + "/rogue.crt";
  p.rogue_key = dir + "/rogue.key";
  EVP_PKEY* ca_key = EVP_EC_gen("P-256");
  X509* ca =
      MakeCert(ca_key, "pdc test CA", nullptr, nullptr, 1, true, nullptr);
  EVP_PKEY* server_key = EVP_EC_gen("P-256");
  X509* server = MakeCert(server_key, "pdc-extender", ca, ca_key, 2, false,
                          "IP:127.0.0.1,DNS:localhost");
  EVP_PKEY* client_key = EVP_EC_gen("P-256");
  X509* client =
      MakeCert(client_key, "kube-scheduler", ca, ca_key, 3, false, nullptr);
  EVP_PKEY* rogue_ca_key = EVP_EC_gen("P-256");
  X509* rogue_ca =
      MakeCert(rogue_ca_key, "rogue CA", nullptr, nullptr, 4, true, nullptr);
  EVP_PKEY* rogue_key = EVP_EC_gen("P-256");
  X509* rogue =
      MakeCert(rogue_key, "rogue", rogue_ca, rogue_ca_key, 5, false, nullptr);
  WritePem(p.ca_cert, ca, nullptr);
  WritePem(p.server_cert, server, nullptr);
  WritePem(p.server_key, nullptr, server_key);
  WritePem(p.client_cert, client, nullptr);
  WritePem(p.client_key, nullptr, client_key);
  WritePem(p.rogue_ca_cert, rogue_ca, nullptr);
  WritePem(p.rogue_cert, rogue, nullptr);
  WritePem(p.rogue_key, nullptr, rogue_key);
  for (X509* c : {ca, server, client, rogue_ca, rogue}) X509_free(c);
  for (EVP_PKEY* k :
       {ca_key, server_key, client_key, rogue_ca_key, rogue_key}) {
    EVP_PKEY_free(k);
  }
  p.server_cert_pem = certs_internal::ReadAll(p.server_cert);
  p.server_key_pem = certs_internal::ReadAll(p.server_key);
  return p;
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_TEST_CERTS_H_
