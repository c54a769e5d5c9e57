// The kube-apiserver double's REST semantics against a real etcd: create,
// get, list (resourceVersion, limit/continue, 410 after compaction,
// selectors), optimistic concurrency, the status subresource, generation,
// merge patch, deletion with finalizers and preconditions, garbage
// collection of dependents, pods/binding, graceful pod deletion, errors as
// v1 Status objects.
#include "tests/kube/kube_test_util.h"
#include "tests/testing/fake_clock.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

using KubeApiServerDoubleTest = KubeDoubleTest;

std::vector<std::string> Names(const KubeReply& list) {
  std::vector<std::string> out;
  const kube::Value* items = kube::Find(list.json, {"items"});
  if (items == nullptr || !items->IsArray()) return out;
  for (const kube::Value& i : items->GetArray()) {
    out.push_back(kube::GetString(i, {"metadata", "name"}));
  }
  return out;
}

// The fields every v1 Status error has.
void ExpectStatus(const KubeReply& r, int code, std::string_view reason) {
  EXPECT_EQ(r.status, code) << r.text;
  EXPECT_EQ(r.Str({"kind"}), "Status") << r.text;
  EXPECT_EQ(r.Str({"apiVersion"}), "v1");
  EXPECT_EQ(r.Str({"status"}), "Failure");
  EXPECT_EQ(r.Str({"reason"}), reason) << r.text;
  EXPECT_EQ(r.Int({"code"}), code);
}

TEST_F(KubeApiServerDoubleTest, CreateFillsSystemFieldsAndGetReadsThemBack) {
  KubeReply created = CreateClaim("c1");
  EXPECT_THAT(created.Str({"metadata", "uid"}),
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]"
                           "{3}-[0-9a-f]{12}"));
  EXPECT_THAT(
      created.Str({"metadata", "creationTimestamp"}),
      MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"));
  EXPECT_EQ(created.Int({"metadata", "generation"}), 1);
  EXPECT_EQ(created.Str({"metadata", "namespace"}), ns_);
  EXPECT_GT(created.Rv(), 0);
  KubeReply got = Call("GET", Claims("/c1"));
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.text, created.text);
  // resourceVersion is the key's etcd mod_revision.
  ASSERT_OK_AND_ASSIGN(
      EtcdRangeResult kv,
      api_->etcd().Range(Cat(
          "/registry/pdc.kubevirt.io/persistentdeviceclaims/", ns_, "/c1")));
  ASSERT_EQ(kv.kvs.size(), 1u);
  EXPECT_EQ(kv.kvs[0].mod_revision, created.Rv());
  ExpectStatus(Call("GET", Claims("/nope")), 404, "NotFound");
  EXPECT_EQ(Call("GET", Claims("/nope")).Str({"message"}),
            "persistentdeviceclaims.pdc.kubevirt.io \"nope\" not found");
}

TEST_F(KubeApiServerDoubleTest, CreateOfAnExistingNameIsAlreadyExists) {
  CreateClaim("c1");
  KubeReply again = Call("POST", Claims(), ClaimJson("c1"));
  ExpectStatus(again, 409, "AlreadyExists");
  EXPECT_EQ(again.Str({"message"}),
            "persistentdeviceclaims.pdc.kubevirt.io \"c1\" already exists");
  EXPECT_EQ(again.Str({"details", "name"}), "c1");
  EXPECT_EQ(again.Str({"details", "group"}), "pdc.kubevirt.io");
}

TEST_F(KubeApiServerDoubleTest, GenerateNameAppendsFiveCharacters) {
  KubeReply r =
      Call("POST", Pods(),
           R"({"metadata":{"generateName":"virt-launcher-"},"spec":{}})");
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_THAT(r.Str({"metadata", "name"}),
              MatchesRegex("virt-launcher-[bcdfghjklmnpqrstvwxz2456789]{5}"));
  EXPECT_EQ(r.Str({"status", "phase"}), "Pending");
  ExpectStatus(Call("POST", Pods(), R"({"metadata":{},"spec":{}})"), 422,
               "Invalid");
  ExpectStatus(Call("POST", Pods(), R"({"metadata":{"name":"Bad_Name"}})"), 422,
               "Invalid");
  ExpectStatus(Call("POST", Pods(), "not json"), 400, "BadRequest");
}

TEST_F(KubeApiServerDoubleTest, ListPagesWithContinueAtTheFirstPagesRevision) {
  for (const char* n : {"a", "b", "c", "d", "e"}) CreateClaim(n);
  KubeReply p1 = Call("GET", Claims("?limit=2"));
  ASSERT_EQ(p1.status, 200) << p1.text;
  EXPECT_EQ(p1.Str({"kind"}), "PersistentDeviceClaimList");
  EXPECT_THAT(Names(p1), ElementsAre("a", "b"));
  EXPECT_EQ(p1.Int({"metadata", "remainingItemCount"}), 3);
  const std::string token = p1.Str({"metadata", "continue"});
  ASSERT_FALSE(token.empty());
  // Changes after the first page are not seen by its continuation.
  CreateClaim("bb");
  ASSERT_EQ(Call("DELETE", Claims("/d")).status, 200);
  KubeReply p2 = Call("GET", Claims(Cat("?limit=2&continue=", token)));
  ASSERT_EQ(p2.status, 200) << p2.text;
  EXPECT_THAT(Names(p2), ElementsAre("c", "d"));
  EXPECT_EQ(p2.Str({"metadata", "resourceVersion"}),
            p1.Str({"metadata", "resourceVersion"}));
  KubeReply p3 =
      Call("GET",
           Claims(Cat("?limit=2&continue=", p2.Str({"metadata", "continue"}))));
  EXPECT_THAT(Names(p3), ElementsAre("e"));
  EXPECT_EQ(p3.Str({"metadata", "continue"}), "");
  // Without limit: the newest state, resourceVersion = etcd's revision.
  KubeReply now = Call("GET", Claims());
  EXPECT_THAT(Names(now), ElementsAre("a", "b", "bb", "c", "e"));
  ASSERT_OK_AND_ASSIGN(int64_t rev, api_->etcd().CurrentRevision());
  EXPECT_EQ(now.Rv(), rev);
  ExpectStatus(Call("GET", Claims("?continue=garbage")), 400, "BadRequest");
}

TEST_F(KubeApiServerDoubleTest, ContinueAfterCompactionIsExpired) {
  for (const char* n : {"a", "b", "c"}) CreateClaim(n);
  KubeReply p1 = Call("GET", Claims("?limit=1"));
  CreateClaim("d");  // The compaction must pass the list's revision.
  ASSERT_OK(api_->CompactEtcd().status());
  KubeReply p2 =
      Call("GET",
           Claims(Cat("?limit=1&continue=", p1.Str({"metadata", "continue"}))));
  ExpectStatus(p2, 410, "Expired");
  EXPECT_THAT(p2.Str({"message"}), HasSubstr("continue parameter is too old"));
}

TEST_F(KubeApiServerDoubleTest, ListResourceVersionSemantics) {
  KubeReply a = CreateClaim("a");
  CreateClaim("b");
  // Exact: the list as it was at that revision.
  KubeReply exact = Call("GET", Claims(Cat("?resourceVersion=", a.Rv(),
                                           "&resourceVersionMatch=Exact")));
  ASSERT_EQ(exact.status, 200) << exact.text;
  EXPECT_THAT(Names(exact), ElementsAre("a"));
  EXPECT_EQ(exact.Rv(), a.Rv());
  // NotOlderThan (and the legacy form without limit): the newest state.
  KubeReply newer = Call("GET", Claims(Cat("?resourceVersion=", a.Rv())));
  EXPECT_THAT(Names(newer), ElementsAre("a", "b"));
  KubeReply zero = Call("GET", Claims("?resourceVersion=0"));
  EXPECT_THAT(Names(zero), ElementsAre("a", "b"));
  // A revision etcd has not reached.
  KubeReply future =
      Call("GET", Claims(Cat("?resourceVersion=", newer.Rv() + 1000)));
  ExpectStatus(future, 504, "Timeout");
  EXPECT_THAT(future.Str({"message"}), HasSubstr("Too large resource version"));
  ExpectStatus(
      Call("GET", Claims("?resourceVersion=0&resourceVersionMatch=Exact")), 400,
      "BadRequest");
  ExpectStatus(Call("GET", Claims("?resourceVersionMatch=Exact")), 400,
               "BadRequest");
  // Compacted: an exact list is Expired.
  CreateClaim("c");
  ASSERT_OK(api_->CompactEtcd().status());
  KubeReply gone = Call("GET", Claims(Cat("?resourceVersion=", a.Rv(),
                                          "&resourceVersionMatch=Exact")));
  ExpectStatus(gone, 410, "Expired");
  EXPECT_EQ(gone.Str({"message"}),
            "The resourceVersion for the provided list is too old.");
}

TEST_F(KubeApiServerDoubleTest, ListAcrossNamespacesWithSelectors) {
  const std::string other = Cat(ns_, "-other");
  auto pod = [](std::string_view name, std::string_view app) {
    return Cat(R"({"metadata":{"name":")", name, R"(","labels":{"app":")", app,
               R"("}},"spec":{"nodeName":""}})");
  };
  ASSERT_EQ(Call("POST", Pods(), pod("p1", "vm")).status, 201);
  ASSERT_EQ(Call("POST", Pods(), pod("p2", "db")).status, 201);
  ASSERT_EQ(
      Call("POST", Cat("/api/v1/namespaces/", other, "/pods"), pod("p3", "vm"))
          .status,
      201);
  KubeReply all = Call("GET", Cat("/api/v1/pods?labelSelector=app%3Dvm"));
  std::vector<std::string> mine;
  for (const std::string& n : Names(all)) {
    if (n == "p1" || n == "p3") mine.push_back(n);
  }
  // In etcd key order: "<ns>-other/p3" sorts before "<ns>/p1".
  EXPECT_THAT(mine, ElementsAre("p3", "p1"));
  EXPECT_THAT(Names(Call("GET", Pods("?labelSelector=app!%3Dvm"))),
              ElementsAre("p2"));
  EXPECT_THAT(Names(Call("GET", Pods("?labelSelector=app+in+(db,web)"))),
              ElementsAre("p2"));
  EXPECT_THAT(Names(Call("GET", Pods("?fieldSelector=metadata.name%3Dp1"))),
              ElementsAre("p1"));
  // A selector filter still fills the page.
  EXPECT_THAT(Names(Call("GET", Pods("?limit=1&labelSelector=app%3Ddb"))),
              ElementsAre("p2"));
  ExpectStatus(Call("GET", Pods("?labelSelector=app+in+db")), 400,
               "BadRequest");
}

TEST_F(KubeApiServerDoubleTest, UpdateWithAStaleResourceVersionIsAConflict) {
  KubeReply c = CreateClaim("c1");
  kube::Document obj;
  obj.CopyFrom(c.json, obj.GetAllocator());
  kube::SetString(obj, {"spec", "count"}, "2", obj.GetAllocator());
  KubeReply updated = Call("PUT", Claims("/c1"), kube::ToJson(obj));
  ASSERT_EQ(updated.status, 200) << updated.text;
  EXPECT_GT(updated.Rv(), c.Rv());
  EXPECT_EQ(updated.Int({"metadata", "generation"}), 2);
  // The same body again carries the old resourceVersion.
  KubeReply stale = Call("PUT", Claims("/c1"), kube::ToJson(obj));
  ExpectStatus(stale, 409, "Conflict");
  EXPECT_EQ(stale.Str({"message"}),
            "Operation cannot be fulfilled on "
            "persistentdeviceclaims.pdc.kubevirt.io \"c1\": the "
            "object has been modified; please apply your changes to the latest "
            "version and try "
            "again");
  // An update that changes nothing writes nothing: the version stays.
  KubeReply same = Call("PUT", Claims("/c1"), updated.text);
  EXPECT_EQ(same.status, 200);
  EXPECT_EQ(same.Rv(), updated.Rv());
  // Without a resourceVersion the update is unconditional.
  kube::Remove(obj, {"metadata", "resourceVersion"});
  EXPECT_EQ(Call("PUT", Claims("/c1"), kube::ToJson(obj)).status, 200);
  ExpectStatus(Call("PUT", Claims("/missing"), ClaimJson("missing")), 404,
               "NotFound");
  ExpectStatus(Call("PUT", Claims("/c1"), ClaimJson("other")), 400,
               "BadRequest");
}

TEST_F(KubeApiServerDoubleTest, StatusSubresourceChangesOnlyStatus) {
  KubeReply c = CreateClaim("c1");
  // Status in a create or a main-resource update is dropped.
  KubeReply put =
      Call("PUT", Claims("/c1"),
           Cat(R"({"metadata":{"name":"c1","resourceVersion":")", c.Rv(),
               R"("},"spec":{"count":1},"status":{"phase":"Bound"}})"));
  ASSERT_EQ(put.status, 200) << put.text;
  EXPECT_EQ(kube::Find(put.json, {"status"}), nullptr);
  EXPECT_EQ(put.Int({"metadata", "generation"}), 1);
  EXPECT_EQ(put.Rv(), c.Rv());  // Nothing changed.
  // The status write ignores spec and labels, keeps generation.
  KubeReply st = Call(
      "PUT", Claims("/c1/status"),
      Cat(R"({"metadata":{"name":"c1","resourceVersion":")", c.Rv(),
          R"(","labels":{"x":"y"}},"spec":{"count":9},"status":{"phase":"Bound"}})"));
  ASSERT_EQ(st.status, 200) << st.text;
  EXPECT_EQ(st.Str({"status", "phase"}), "Bound");
  EXPECT_EQ(st.Int({"spec", "count"}), 1);
  EXPECT_EQ(kube::Find(st.json, {"metadata", "labels"}), nullptr);
  EXPECT_EQ(st.Int({"metadata", "generation"}), 1);
  // Its resourceVersion precondition holds too.
  ExpectStatus(Call("PUT", Claims("/c1/status"),
                    Cat(R"({"metadata":{"name":"c1","resourceVersion":")",
                        c.Rv(), R"("},"status":{"phase":"Lost"}})")),
               409, "Conflict");
  // A spec change bumps generation; status survives it.
  KubeReply spec =
      Call("PATCH", Claims("/c1"), R"({"spec":{"count":2},"status":null})",
           "application/merge-patch+json");
  ASSERT_EQ(spec.status, 200) << spec.text;
  EXPECT_EQ(spec.Int({"metadata", "generation"}), 2);
  EXPECT_EQ(spec.Str({"status", "phase"}), "Bound");
  KubeReply st2 =
      Call("PATCH", Claims("/c1/status"), R"({"status":{"phase":"Lost"}})",
           "application/merge-patch+json");
  EXPECT_EQ(st2.Str({"status", "phase"}), "Lost");
  EXPECT_EQ(st2.Int({"metadata", "generation"}), 2);
}

TEST_F(KubeApiServerDoubleTest, MergePatchAnnotationsAndFinalizers) {
  KubeReply c = CreateClaim("c1");
  const std::string mp = "application/merge-patch+json";
  KubeReply p = Call(
      "PATCH", Claims("/c1"),
      R"({"metadata":{"annotations":{"a":"1","b":"2"},"finalizers":["pdc.kubevirt.io/release"]}})",
      mp);
  ASSERT_EQ(p.status, 200) << p.text;
  EXPECT_EQ(p.Str({"metadata", "annotations", "a"}), "1");
  EXPECT_THAT(kube::GetStrings(p.json, {"metadata", "finalizers"}),
              ElementsAre("pdc.kubevirt.io/release"));
  EXPECT_EQ(p.Int({"metadata", "generation"}), 1);  // Metadata only.
  // null removes a key (RFC 7386).
  KubeReply q = Call("PATCH", Claims("/c1"),
                     R"({"metadata":{"annotations":{"a":null}}})", mp);
  EXPECT_EQ(kube::Find(q.json, {"metadata", "annotations", "a"}), nullptr);
  EXPECT_EQ(q.Str({"metadata", "annotations", "b"}), "2");
  // A resourceVersion in the patch is a precondition.
  ExpectStatus(Call("PATCH", Claims("/c1"),
                    Cat(R"({"metadata":{"resourceVersion":")", c.Rv(),
                        R"(","labels":{"l":"v"}}})"),
                    mp),
               409, "Conflict");
  EXPECT_EQ(Call("PATCH", Claims("/c1"),
                 Cat(R"({"metadata":{"resourceVersion":")", q.Rv(),
                     R"(","labels":{"l":"v"}}})"),
                 mp)
                .status,
            200);
  ExpectStatus(
      Call("PATCH", Claims("/c1"), R"({"metadata":{"uid":"other"}})", mp), 409,
      "Conflict");
  ExpectStatus(
      Call("PATCH", Claims("/c1"), R"([{"op":"remove","path":"/metadata"}])",
           "application/json-patch+json"),
      415, "UnsupportedMediaType");
  ExpectStatus(Call("PATCH", Claims("/none"), "{}", mp), 404, "NotFound");
}

TEST_F(KubeApiServerDoubleTest,
       DeleteWithFinalizersMarksThenRemovesWhenTheyAreGone) {
  CreateClaim("c1");
  const std::string mp = "application/merge-patch+json";
  KubeReply f =
      Call("PATCH", Claims("/c1"),
           R"({"metadata":{"finalizers":["pdc.kubevirt.io/release"]}})", mp);
  // Preconditions in DeleteOptions.
  ExpectStatus(
      Call("DELETE", Claims("/c1"), R"({"preconditions":{"uid":"not-it"}})"),
      409, "Conflict");
  KubeReply wrong_rv = Call(
      "DELETE", Claims("/c1"),
      Cat(R"({"preconditions":{"resourceVersion":")", f.Rv() - 1, R"("}})"));
  ExpectStatus(wrong_rv, 409, "Conflict");
  EXPECT_THAT(
      wrong_rv.Str({"message"}),
      HasSubstr("Precondition failed: ResourceVersion in precondition"));
  KubeReply d = Call("DELETE", Claims("/c1"),
                     Cat(R"({"preconditions":{"uid":")",
                         f.Str({"metadata", "uid"}), R"("}})"));
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_FALSE(d.Str({"metadata", "deletionTimestamp"}).empty());
  EXPECT_EQ(d.Int({"metadata", "deletionGracePeriodSeconds"}), 0);
  EXPECT_EQ(d.Int({"metadata", "generation"}), 2);
  KubeReply still = Call("GET", Claims("/c1"));
  EXPECT_EQ(still.status, 200);
  EXPECT_EQ(still.Str({"metadata", "deletionTimestamp"}),
            d.Str({"metadata", "deletionTimestamp"}));
  // A second delete changes nothing.
  EXPECT_EQ(Call("DELETE", Claims("/c1")).Rv(), d.Rv());
  // No new finalizers on a deleting object; deletionTimestamp cannot be
  // cleared.
  KubeReply add = Call(
      "PATCH", Claims("/c1"),
      R"({"metadata":{"finalizers":["pdc.kubevirt.io/release","x/y"]}})", mp);
  ExpectStatus(add, 422, "Invalid");
  EXPECT_THAT(
      add.Str({"message"}),
      StartsWith("PersistentDeviceClaim.pdc.kubevirt.io \"c1\" is invalid: "
                 "metadata.finalizers: Forbidden: no new finalizers can be "
                 "added if the "
                 "object is being deleted"));
  KubeReply clear =
      Call("PATCH", Claims("/c1"),
           R"({"metadata":{"deletionTimestamp":null,"labels":{"a":"b"}}})", mp);
  EXPECT_EQ(clear.Str({"metadata", "deletionTimestamp"}),
            d.Str({"metadata", "deletionTimestamp"}));
  // Emptying the finalizers removes it.
  KubeReply last =
      Call("PATCH", Claims("/c1"), R"({"metadata":{"finalizers":null}})", mp);
  EXPECT_EQ(last.status, 200) << last.text;
  ExpectStatus(Call("GET", Claims("/c1")), 404, "NotFound");
  // Without finalizers a delete removes at once and answers the last state.
  CreateClaim("c2");
  KubeReply d2 = Call("DELETE", Claims("/c2"));
  EXPECT_EQ(d2.status, 200);
  EXPECT_EQ(d2.Str({"metadata", "name"}), "c2");
  ExpectStatus(Call("GET", Claims("/c2")), 404, "NotFound");
  ExpectStatus(Call("DELETE", Claims("/c2")), 404, "NotFound");
}

TEST_F(KubeApiServerDoubleTest,
       GarbageCollectorDeletesDependentsWhoseOwnersAreGone) {
  KubeReply vm =
      Call("POST", Vms(), R"({"metadata":{"name":"vm1"},"spec":{}})");
  ASSERT_EQ(vm.status, 201);
  KubeReply keep =
      Call("POST", Vms(), R"({"metadata":{"name":"vm2"},"spec":{}})");
  auto owned = [](std::string_view name,
                  std::vector<std::pair<std::string, std::string>> owners,
                  std::string_view finalizers) {
    std::string refs;
    for (const auto& [kind_name, uid] : owners) {
      if (!refs.empty()) refs += ",";
      refs += Cat(
          R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":")",
          kind_name, R"(","uid":")", uid, R"(","controller":false})");
    }
    return Cat(R"({"metadata":{"name":")", name, R"(","ownerReferences":[)",
               refs, "]", finalizers, R"(},"spec":{}})");
  };
  const std::string uid1 = vm.Str({"metadata", "uid"});
  const std::string uid2 = keep.Str({"metadata", "uid"});
  KubeReply vmi = Call("POST", Vmis(), owned("vm1", {{"vm1", uid1}}, ""));
  ASSERT_EQ(vmi.status, 201) << vmi.text;
  // A claim owned by the VMI (a second generation), held by a finalizer.
  const std::string vmi_uid = vmi.Str({"metadata", "uid"});
  KubeReply claim = Call(
      "POST", Claims(),
      Cat(R"({"metadata":{"name":"c1","finalizers":["pdc.kubevirt.io/release"],)",
          R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm1","uid":")",
          vmi_uid, R"("}]},"spec":{}})"));
  ASSERT_EQ(claim.status, 201) << claim.text;
  // Owned by both VMs: survives, loses the dangling reference.
  ASSERT_EQ(
      Call("POST", Claims(), owned("c2", {{"vm1", uid1}, {"vm2", uid2}}, ""))
          .status,
      201);
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  ASSERT_TRUE(api_->WaitGarbageCollectorIdle(absl::Seconds(20)));
  ExpectStatus(Call("GET", Vmis("/vm1")), 404, "NotFound");
  KubeReply c1 = Call("GET", Claims("/c1"));
  ASSERT_EQ(c1.status, 200);
  EXPECT_FALSE(c1.Str({"metadata", "deletionTimestamp"}).empty());
  KubeReply c2 = Call("GET", Claims("/c2"));
  ASSERT_EQ(c2.status, 200);
  const kube::Value* refs =
      kube::Find(c2.json, {"metadata", "ownerReferences"});
  ASSERT_NE(refs, nullptr);
  ASSERT_EQ(refs->Size(), 1u);
  EXPECT_EQ(kube::GetString((*refs)[0], {"uid"}), uid2);
  EXPECT_TRUE(c2.Str({"metadata", "deletionTimestamp"}).empty());
  EXPECT_EQ(Call("GET", Vms("/vm2")).status, 200);
}

TEST_F(KubeApiServerDoubleTest, BindingSetsTheNodeOnceAndChecksTheUid) {
  KubeReply pod = Call(
      "POST", Pods(), R"({"metadata":{"name":"p1"},"spec":{"containers":[]}})");
  ASSERT_EQ(pod.status, 201);
  auto binding = [](std::string_view node, std::string_view uid) {
    return Cat(
        R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"p1","uid":")",
        uid, R"("},"target":{"apiVersion":"v1","kind":"Node","name":")", node,
        R"("}})");
  };
  KubeReply bad_uid = Call("POST", Pods("/p1/binding"), binding("n1", "0000"));
  ExpectStatus(bad_uid, 409, "Conflict");
  EXPECT_THAT(bad_uid.Str({"message"}),
              HasSubstr("Precondition failed: UID in precondition: 0000"));
  KubeReply ok = Call("POST", Pods("/p1/binding"),
                      binding("n1", pod.Str({"metadata", "uid"})));
  EXPECT_EQ(ok.status, 201) << ok.text;
  EXPECT_EQ(ok.Str({"status"}), "Success");
  KubeReply got = Call("GET", Pods("/p1"));
  EXPECT_EQ(got.Str({"spec", "nodeName"}), "n1");
  const kube::Value* conds = kube::Find(got.json, {"status", "conditions"});
  ASSERT_NE(conds, nullptr);
  ASSERT_EQ(conds->Size(), 1u);
  EXPECT_EQ(kube::GetString((*conds)[0], {"type"}), "PodScheduled");
  EXPECT_EQ(kube::GetString((*conds)[0], {"status"}), "True");
  KubeReply again = Call("POST", Pods("/p1/binding"), binding("n2", ""));
  ExpectStatus(again, 409, "Conflict");
  EXPECT_EQ(again.Str({"message"}),
            "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is "
            "already assigned to "
            "node \"n1\"");
  ExpectStatus(
      Call(
          "POST", Pods("/p9/binding"),
          R"({"metadata":{"name":"p9"},"target":{"kind":"Node","name":"n1"}})"),
      404, "NotFound");
  ExpectStatus(
      Call(
          "POST", Pods("/p1/binding"),
          R"({"metadata":{"name":"p2"},"target":{"kind":"Node","name":"n1"}})"),
      400, "BadRequest");
}

TEST_F(KubeApiServerDoubleTest, ScheduledPodDeletionWaitsForItsGracePeriod) {
  ASSERT_EQ(
      Call(
          "POST", Pods(),
          R"({"metadata":{"name":"p1"},"spec":{"nodeName":"n1","terminationGracePeriodSeconds":5}})")
          .status,
      201);
  KubeReply d = Call("DELETE", Pods("/p1"));
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.Int({"metadata", "deletionGracePeriodSeconds"}), 5);
  EXPECT_EQ(Call("GET", Pods("/p1")).status, 200);
  // The kubelet's final delete.
  EXPECT_EQ(Call("DELETE", Pods("/p1?gracePeriodSeconds=0")).status, 200);
  ExpectStatus(Call("GET", Pods("/p1")), 404, "NotFound");
  // An unscheduled pod goes at once.
  ASSERT_EQ(
      Call("POST", Pods(), R"({"metadata":{"name":"p2"},"spec":{}})").status,
      201);
  EXPECT_EQ(Call("DELETE", Pods("/p2")).status, 200);
  ExpectStatus(Call("GET", Pods("/p2")), 404, "NotFound");
}

TEST_F(KubeApiServerDoubleTest, UnknownPathsAndMethodsAreStatusErrors) {
  ExpectStatus(Call("GET", "/api/v1/namespaces/x/secrets"), 404, "NotFound");
  ExpectStatus(Call("GET", "/healthz/x"), 404, "NotFound");
  ExpectStatus(Call("DELETE", Claims()), 405, "MethodNotAllowed");
  ExpectStatus(Call("POST", Claims("/c1/status"), "{}"), 405,
               "MethodNotAllowed");
  ExpectStatus(Call("GET", Pods("/p1/exec")), 404, "NotFound");
}

TEST(KubeApiServerDoubleAuthTest, BearerTokenIsRequiredWhenConfigured) {
  if (absl::StatusOr<std::string> bin = EtcdProcess::FindBinary(); !bin.ok()) {
    GTEST_SKIP() << bin.status().message();
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start());
  KubeApiServerOptions o;
  o.bearer_token = "s3cret";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeApiServerDouble> api,
                       KubeApiServerDouble::Start(etcd->client_ports(), o));
  HttpClientOptions co;
  co.base_url = api->url();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpClient> anonymous,
                       HttpClient::Create(co));
  ASSERT_OK_AND_ASSIGN(HttpResponse denied,
                       anonymous->Get("/api/v1/namespaces/a/pods"));
  EXPECT_EQ(denied.status, 401);
  EXPECT_THAT(denied.body, HasSubstr(R"("reason":"Unauthorized")"));
  co.bearer_token = "s3cret";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpClient> client,
                       HttpClient::Create(co));
  ASSERT_OK_AND_ASSIGN(HttpResponse ok,
                       client->Get("/api/v1/namespaces/a/pods"));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(KubeApiServerDoubleClockTest, TimestampsComeFromTheInjectedClock) {
  if (absl::StatusOr<std::string> bin = EtcdProcess::FindBinary(); !bin.ok()) {
    GTEST_SKIP() << bin.status().message();
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start());
  FakeClock clock(
      absl::FromUnixSeconds(1'700'000'000));  // 2023-11-14T22:13:20Z
  KubeApiServerOptions o;
  o.clock = &clock;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KubeApiServerDouble> api,
                       KubeApiServerDouble::Start(etcd->client_ports(), o));
  HttpClientOptions co;
  co.base_url = api->url();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpClient> client,
                       HttpClient::Create(co));
  ASSERT_OK_AND_ASSIGN(
      HttpResponse created,
      client->Post("/api/v1/namespaces/t/pods",
                   R"({"metadata":{"name":"p1"},"spec":{"nodeName":"n1"}})"));
  EXPECT_THAT(created.body,
              HasSubstr(R"("creationTimestamp":"2023-11-14T22:13:20Z")"));
  clock.Advance(absl::Seconds(10));
  // A scheduled pod without terminationGracePeriodSeconds gets 30 s.
  ASSERT_OK_AND_ASSIGN(HttpResponse deleted,
                       client->Delete("/api/v1/namespaces/t/pods/p1"));
  EXPECT_THAT(deleted.body,
              HasSubstr(R"("deletionTimestamp":"2023-11-14T22:14:00Z")"));
  EXPECT_THAT(deleted.body, HasSubstr(R"("deletionGracePeriodSeconds":30)"));
}

}  // namespace
}  // namespace pdc::testing
