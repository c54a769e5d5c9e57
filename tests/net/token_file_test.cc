// TokenFile (net/token_file.h): a bearer token file read again when it is
// replaced, as kubelet replaces a projected service-account token.
#include "net/token_file.h"

#include <unistd.h>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TokenFileTest, ReadsAgainOnlyWhenReplaced) {
  ::pdc::testing::TempDir dir;
  const std::string path = dir.Join("token");
  ASSERT_OK(WriteFileAtomically(path, "first\n"));
  TokenFile f(path);
  ASSERT_OK_AND_ASSIGN(std::string t, f.Get());
  EXPECT_EQ(t, "first");
  ASSERT_OK_AND_ASSIGN(t, f.Get());
  EXPECT_EQ(f.reads(), 1);  // Unchanged: not read again.
  // Replaced by a rename, as kubelet's atomic writer does: a new inode.
  ASSERT_OK(WriteFileAtomically(path, "second"));
  ASSERT_OK_AND_ASSIGN(t, f.Get());
  EXPECT_EQ(t, "second");
  EXPECT_EQ(f.reads(), 2);
}

TEST(TokenFileTest, KeepsTheLastTokenWhenTheFileGoesAway) {
  ::pdc::testing::TempDir dir;
  const std::string path = dir.Join("token");
  TokenFile f(path);
  EXPECT_THAT(f.Get(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(path)));
  ASSERT_OK(WriteFileAtomically(path, "kept"));
  ASSERT_OK_AND_ASSIGN(std::string t, f.Get());
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_OK_AND_ASSIGN(t, f.Get());
  EXPECT_EQ(t, "kept");
}

TEST(TokenFileTest, EmptyFileIsAnError) {
  ::pdc::testing::TempDir dir;
  const std::string path = dir.Join("token");
  ASSERT_OK(WriteFileAtomically(path, " \n"));
  TokenFile f(path);
  EXPECT_THAT(f.Get(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is empty")));
}

}  // namespace
}  // namespace pdc
