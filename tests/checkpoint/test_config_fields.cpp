// Tests: the typed config.json field reads every model's config reader uses (checkpoint/config_fields.h):
// a field of the wrong type is an error naming it (before, a "hidden_act": 5 silently became the default), null
// and absence give the default, sizes are range-checked rather than truncated.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "checkpoint/config_fields.h"
#include "util/error.h"

namespace lmforge::checkpoint {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFields, PresentFieldOfTheWrongTypeIsAnErrorNamingFileAndKey) {
  const JsonObject o = parse_json_object(R"({"hidden_act": 5, "eps": "1e-5", "head": 1, "n": 2.5})", "c.json");
  EXPECT_EQ(error_of([&] { config_string(o, "hidden_act", "gelu", "c.json"); }),
            "c.json: \"hidden_act\" must be a string");
  EXPECT_EQ(error_of([&] { config_number(o, "eps", 1e-12, "c.json"); }), "c.json: \"eps\" must be a number");
  EXPECT_EQ(error_of([&] { config_bool(o, "head", true, "c.json"); }), "c.json: \"head\" must be true or false");
  EXPECT_EQ(error_of([&] { config_int(o, "n", "c.json"); }), "c.json: \"n\" must be an integer");
}

TEST(ConfigFields, AbsentOrNullOptionalFieldsTakeTheDefault) {
  const JsonObject o = parse_json_object(R"({"a": null, "i": 3})", "c.json");
  EXPECT_EQ(config_string(o, "a", "gelu", "c.json"), "gelu");
  EXPECT_EQ(config_string(o, "missing", "x", "c.json"), "x");
  EXPECT_EQ(config_number(o, "a", 0.5, "c.json"), 0.5);
  EXPECT_EQ(config_number(o, "i", 0.5, "c.json"), 3.0);  // an integer is a number, as in Python
  EXPECT_FALSE(config_bool(o, "a", false, "c.json"));
  EXPECT_EQ(error_of([&] { config_int(o, "missing", "c.json"); }), "c.json: missing \"missing\"");
}

TEST(ConfigFields, SizesOutsideOneToIntMaxAreErrorsNotTruncated) {
  const JsonObject o = parse_json_object(R"({"big": 4294967298, "zero": 0, "neg": -3, "ok": 2147483647})", "c.json");
  EXPECT_EQ(error_of([&] { config_positive_int(o, "big", "c.json"); }),
            "c.json: \"big\" is 4294967298, outside [1, 2147483647]");
  EXPECT_NE(error_of([&] { config_positive_int(o, "zero", "c.json"); }), "");
  EXPECT_NE(error_of([&] { config_positive_int(o, "neg", "c.json"); }), "");
  EXPECT_EQ(config_positive_int(o, "ok", "c.json"), 2147483647);
}

TEST(ConfigFields, ShortestDecimalReadsBackAsTheSameFloat) {
  EXPECT_EQ(shortest_decimal(0.02f), 0.02);
  for (float x : {0.1f, 1e-12f, 3.0e38f, 1.17549435e-38f, 0.0f})
    EXPECT_EQ((float)shortest_decimal(x), x) << x;
}

}  // namespace
}  // namespace lmforge::checkpoint
