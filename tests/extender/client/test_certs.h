// Self-signed test certificates (EC P-256, valid 2000-01-01 to 2999-12-31 so
// no real or fake clock makes them expire, basicConstraints CA:TRUE,
// subjectAltName IP:127.0.0.1 and DNS:localhost), generated once with
// Python's `cryptography` package. Test-only keys; they protect nothing.
#ifndef PDC_TESTS_EXTENDER_CLIENT_TEST_CERTS_H_
#define PDC_TESTS_EXTENDER_CLIENT_TEST_CERTS_H_

namespace pdc::testing {

inline constexpr char kTestServerCert[] = R"(-----BEGIN CERTIFICATE-----
MIIBVDCB+6ADAgECAhRGYJp1vq9QLXDsCybWRAn32MCJTjAKBggqhkjOPQQDAjAR
MQ8wDQYDVQQDDAZzZXJ2ZXIwIBcNMDAwMTAxMDAwMDAwWhgPMjk5OTEyMzEwMDAw
MDBaMBExDzANBgNVBAMMBnNlcnZlcjBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IA
BIRJhJf/13hSuCMrk+X2cqxYmhcPCMPUojT4qPqSEBWAUTjd/m8ECZqpuaKBzlyD
B6i6xraJWY3f9qVsu8C69lqjLzAtMA8GA1UdEwEB/wQFMAMBAf8wGgYDVR0RBBMw
EYcEfwAAAYIJbG9jYWxob3N0MAoGCCqGSM49BAMCA0gAMEUCIGNQkiFCYKQvMl3m
tU6L2oCzc3O5zzeYkv1Q0BM1MClHAiEAzkTdw1QnrIz+K6DOCeWhmcOH2lGlB4e9
qtPnUHZEnWw=
-----END CERTIFICATE-----
)";
inline constexpr char kTestServerKey[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/YYxflvko1A3Av3s
IRrHp9mqTyupLHX44nsKljQFxoyhRANCAASESYSX/9d4UrgjK5Pl9nKsWJoXDwjD
1KI0+Kj6khAVgFE43f5vBAmaqbmigc5cgweousa2iVmN3/albLvAuvZa
-----END PRIVATE KEY-----
)";
// An unrelated self-signed certificate: a CA that did not sign the server's.
inline constexpr char kTestOtherCert[] = R"(-----BEGIN CERTIFICATE-----
MIIBUzCB+aADAgECAhRkS+CbCTS62coxvcmQ0iwgIbqGSTAKBggqhkjOPQQDAjAQ
MQ4wDAYDVQQDDAVvdGhlcjAgFw0wMDAxMDEwMDAwMDBaGA8yOTk5MTIzMTAwMDAw
MFowEDEOMAwGA1UEAwwFb3RoZXIwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQX
h1NSBuANhZLxatcV5C0lwgeKFe2BjJ588h5hMI9CVw96x1bZsamMJHAj3NYkSSgo
Y2840jiFBkwcpswYCQ02oy8wLTAPBgNVHRMBAf8EBTADAQH/MBoGA1UdEQQTMBGH
BH8AAAGCCWxvY2FsaG9zdDAKBggqhkjOPQQDAgNJADBGAiEA5z8vpSNP6oUEs8Gy
cb0g4cpvDh1SbaMgrl746wUNTScCIQC7oN6Yo4RoOYt6SShPQAdYGhsgmfG17mdz
ttVG9IZpDw==
-----END CERTIFICATE-----
)";

}  // namespace pdc::testing

#endif  // PDC_TESTS_EXTENDER_CLIENT_TEST_CERTS_H_
