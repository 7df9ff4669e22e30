// Status and Expected behaviour.
#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace kiln {
namespace status_tests {

Expected<int> Half(int x) {
  if (x % 2) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Expected<int> Quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, Half(x));
  KILN_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = NotFound("tensor {} missing", "a.b");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: tensor a.b missing");
  EXPECT_EQ(s.WithContext("model.gguf").message(), "model.gguf: tensor a.b missing");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Expected, PropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
}

TEST(Expected, HoldsMoveOnlyValues) {
  Expected<std::unique_ptr<int>> e(std::make_unique<int>(5));
  ASSERT_TRUE(e.ok());
  std::unique_ptr<int> p = std::move(e).value();
  EXPECT_EQ(*p, 5);
}

}  // namespace status_tests
}  // namespace kiln
