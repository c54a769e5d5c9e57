// The Lease codec (api/lease_json.h): what client-go's leader election
// writes reads back the same, and a Lease pdc cannot trust is refused with
// the field named.
#include "api/lease_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdc::api {
namespace {

using ::testing::HasSubstr;

// What kube-apiserver answers: the object with uid and resourceVersion.
std::string Answered(std::string_view spec) {
  return std::string(
             R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":)"
             R"({"name":"pdc-extender","namespace":"pdc-system","uid":"u-1",)"
             R"("resourceVersion":"42"},"spec":)") +
         std::string(spec) + "}";
}

TEST(LeaseJsonTest, WhatIsWrittenReadsBack) {
  LeaderRecord r;
  r.holder = "pdc-extender-7d9f_1a2b3c4d";
  r.lease_duration_seconds = 15;
  r.acquire_time = absl::FromUnixMicros(1764662400123456);
  r.renew_time = absl::FromUnixMicros(1764662410654321);
  r.transitions = 3;
  const std::string json = LeaseJson("pdc-system", "pdc-extender", "41", r);
  EXPECT_THAT(json, HasSubstr(R"("resourceVersion":"41")"));
  EXPECT_THAT(json, HasSubstr(R"("renewTime":"2025-12-02T08:00:10.654321Z")"));
  // The API adds the uid; the rest is what was sent.
  std::string answered = json;
  answered.replace(answered.find(R"("resourceVersion")"), 0, R"("uid":"u-1",)");
  absl::StatusOr<Lease> l = ReadLease(answered);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->record, r);
  EXPECT_EQ(l->meta.resource_version, "41");
  EXPECT_EQ(MicroTime(r.acquire_time), "2025-12-02T08:00:00.123456Z");
}

TEST(LeaseJsonTest, AReleasedLeaseHasNoHolderAndNoCreateHasAVersion) {
  LeaderRecord released;
  released.lease_duration_seconds = 1;
  const std::string json = LeaseJson("ns", "l", "", released);
  EXPECT_THAT(json, HasSubstr(R"("holderIdentity":"")"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("resourceVersion")));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("renewTime")));
  absl::StatusOr<Lease> empty = ReadLease(Answered("{}"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->record, LeaderRecord{});
}

TEST(LeaseJsonTest, ALeaseThatCannotBeTrustedIsRefusedNamingTheField) {
  struct Case {
    std::string spec;
    std::string field;
  };
  const Case cases[] = {
      {R"({"renewTime":"yesterday"})", "Lease.spec.renewTime"},
      {R"({"acquireTime":7})", "Lease.spec.acquireTime"},
      {R"({"holderIdentity":")" + std::string(600, 'x') + R"("})",
       "Lease.spec.holderIdentity"},
      {R"({"holderIdentity":"a\nb"})", "Lease.spec.holderIdentity"},
      {R"({"leaseDurationSeconds":-1})", "Lease.spec.leaseDurationSeconds"},
      {R"({"leaseDurationSeconds":"15"})", "Lease.spec.leaseDurationSeconds"},
      {R"({"leaseTransitions":-2})", "Lease.spec.leaseTransitions"},
      {R"([])", "Lease.spec"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Lease> l = ReadLease(Answered(c.spec));
    ASSERT_FALSE(l.ok()) << c.spec;
    EXPECT_THAT(std::string(l.status().message()), HasSubstr(c.field))
        << c.spec;
  }
  EXPECT_FALSE(ReadLease(R"({"spec":{}})").ok());  // No metadata.
  EXPECT_FALSE(ReadLease("not json").ok());
}

}  // namespace
}  // namespace pdc::api
