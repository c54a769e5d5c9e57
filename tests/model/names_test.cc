// Kubernetes' name rules: the accepted sets and the messages of
// k8s.io/apimachinery/pkg/util/validation, case by case.
#include "model/names.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdc::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct NameCase {
  std::string value;
  bool label;      // a valid DNS-1123 label (namespace)
  bool subdomain;  // a valid DNS-1123 subdomain (object name)
};

TEST(NamesTest, LabelsAndSubdomainsAcceptWhatKubernetesAccepts) {
  const NameCase cases[] = {
      {"a", true, true},
      {"0", true, true},
      {"my-name", true, true},
      {"123-abc", true, true},
      {"a-b-c", true, true},
      {std::string(63, 'a'), true, true},
      // A subdomain has no per-label limit: only the whole name is bounded.
      {std::string(64, 'a'), false, true},
      {std::string(63, 'v') + "-nvme", false, true},
      {std::string(253, 'a'), false, true},
      {std::string(254, 'a'), false, false},
      {"example.com", false, true},
      {"a.b.c", false, true},
      {"", false, false},
      {"-a", false, false},
      {"a-", false, false},
      {"A", false, false},
      {"a_b", false, false},
      {"a..b", false, false},
      {".a", false, false},
      {"a.", false, false},
      {"a.-b", false, false},
      {"a/b", false, false},
      {"a b", false, false},
      {std::string("a\0b", 3), false, false},
      {"\xc3\xa9", false, false},
  };
  for (const NameCase& c : cases) {
    SCOPED_TRACE(c.value);
    EXPECT_EQ(IsDns1123Label(c.value).empty(), c.label);
    EXPECT_EQ(IsDns1123Subdomain(c.value).empty(), c.subdomain);
    EXPECT_EQ(ValidateNamespace("ns", c.value).ok(), c.label);
    EXPECT_EQ(ValidateObjectName("name", c.value).ok(), c.subdomain);
  }
}

TEST(NamesTest, MessagesAreKubernetesOwn) {
  EXPECT_THAT(IsDns1123Label(std::string(64, 'a')),
              ElementsAre("must be no more than 63 characters"));
  EXPECT_THAT(IsDns1123Label("a.b"), ElementsAre("must not contain dots"));
  EXPECT_THAT(
      IsDns1123Label("A"),
      ElementsAre("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                  "characters or '-', and must start and end with an alphanumeric character "
                  "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"));
  EXPECT_THAT(
      IsDns1123Subdomain("a..b"),
      ElementsAre("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric "
                  "character (e.g. 'example.com', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
  // Too long and malformed: both problems, as Kubernetes lists them.
  EXPECT_EQ(IsDns1123Subdomain(std::string(254, 'A')).size(), 2u);
}

TEST(NamesTest, QualifiedNames) {
  EXPECT_THAT(IsQualifiedName("devices.kubevirt.io/nvme"), IsEmpty());
  EXPECT_THAT(IsQualifiedName("nvidia.com/GP102GL_Tesla_P40"), IsEmpty());
  EXPECT_THAT(IsQualifiedName("MyName"), IsEmpty());
  EXPECT_THAT(IsQualifiedName("/nvme"), ElementsAre("prefix part must be non-empty"));
  EXPECT_THAT(IsQualifiedName("devices.kubevirt.io/"),
              ElementsAre("name part must be non-empty", HasSubstr("name part must consist")));
  EXPECT_THAT(IsQualifiedName("Devices.io/nvme"),
              ElementsAre(HasSubstr("prefix part a lowercase RFC 1123 subdomain")));
  EXPECT_THAT(IsQualifiedName("a/b/c"),
              ElementsAre(HasSubstr("with an optional DNS subdomain prefix and '/'")));
  EXPECT_THAT(IsQualifiedName("x.io/" + std::string(64, 'a')),
              ElementsAre("name part must be no more than 63 characters"));
  EXPECT_THAT(IsQualifiedName("x.io/-a"), ElementsAre(HasSubstr("name part must consist")));
}

TEST(NamesTest, ErrorsNameTheFieldAndQuoteTheValueSafely) {
  EXPECT_EQ(ValidateObjectName("spec.node", "Node_A").message(),
            "spec.node: \"Node_A\" is not a valid name: a lowercase RFC 1123 subdomain must "
            "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  EXPECT_EQ(ValidateNamespace("namespace", "").message(),
            "namespace: \"\" is not a valid namespace: must not be empty");
  // Control characters are escaped (a name cannot forge a log line) and a
  // long value is cut.
  EXPECT_THAT(ValidateObjectName("name", "a\nb").message(), HasSubstr("\"a\\nb\""));
  const std::string huge(1 << 20, 'X');
  const std::string message(ValidateObjectName("name", huge).message());
  EXPECT_LT(message.size(), 1000u);
  EXPECT_THAT(message, HasSubstr("(1048576 bytes)"));
  EXPECT_EQ(ValidateQualifiedName("resourceName", "devices.kubevirt.io/nvme"),
            absl::OkStatus());
  EXPECT_THAT(ValidateQualifiedName("resourceName", "a/b/c").message(),
              HasSubstr("resourceName: \"a/b/c\" is not a valid qualified name"));
}

}  // namespace
}  // namespace pdc::model
