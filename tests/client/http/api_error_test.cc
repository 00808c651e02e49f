#include "client/http/api_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/http/routes.h"

namespace tpserve::http {
namespace {

TEST(ApiError, CoordinatorErrorsMapToHttpStatuses) {
  struct Case {
    proto::ErrorKind kind;
    unsigned status;
    int retry_after;
  };
  const Case cases[] = {
      {proto::ErrorKind::kInvalidRequest, 400, 0}, {proto::ErrorKind::kPromptTooLong, 400, 0},
      {proto::ErrorKind::kOverloaded, 429, 1},     {proto::ErrorKind::kUnavailable, 503, 1},
      {proto::ErrorKind::kWorkerLost, 503, 1},     {proto::ErrorKind::kUnauthenticated, 401, 0},
      {proto::ErrorKind::kInternal, 500, 0},
  };
  for (const Case& c : cases) {
    const ApiError e = FromCoordinatorError({c.kind, "why"});
    EXPECT_EQ(e.status, c.status) << proto::ErrorKindName(c.kind);
    EXPECT_EQ(e.retry_after_s, c.retry_after) << proto::ErrorKindName(c.kind);
    EXPECT_EQ(e.code, proto::ErrorKindName(c.kind));
    EXPECT_EQ(e.message, "why");
  }
}

TEST(ApiError, JsonHasOpenAisShape) {
  const nlohmann::json j = nlohmann::json::parse(InvalidRequest("top_p", "top_p must be > 0").ToJson());
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "top_p must be > 0");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_TRUE(j["error"]["code"].is_null());
  const nlohmann::json too_large = nlohmann::json::parse(BodyTooLarge(1024).ToJson());
  EXPECT_NE(too_large["error"]["message"].get<std::string>().find("1024"), std::string::npos);
  EXPECT_EQ(BodyTooLarge(1024).status, 413u);
  EXPECT_EQ(Unauthorized().status, 401u);
  EXPECT_EQ(ModelNotFound("x").status, 404u);
  // Invalid UTF-8 in a message (from a client's field) still gives valid JSON.
  EXPECT_TRUE(nlohmann::json::accept(InvalidRequest("", "bad \xff byte").ToJson()));
}

TEST(ApiKey, BearerKeysAreChecked) {
  const std::vector<std::string> keys = {"alpha", "beta-key"};
  EXPECT_TRUE(IsAuthorized("", {}));
  EXPECT_TRUE(IsAuthorized("Bearer alpha", keys));
  EXPECT_TRUE(IsAuthorized("Bearer beta-key", keys));
  EXPECT_FALSE(IsAuthorized("Bearer alph", keys));
  EXPECT_FALSE(IsAuthorized("Bearer alphaa", keys));
  EXPECT_FALSE(IsAuthorized("Bearer ", keys));
  EXPECT_FALSE(IsAuthorized("alpha", keys));
  EXPECT_FALSE(IsAuthorized("", keys));
  EXPECT_FALSE(IsAuthorized("Basic alpha", keys));
}

}  // namespace
}  // namespace tpserve::http
