// Helpers of the declared-pipeline tests (tests/cpp/pipeline/*_test.cc).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "rill/pipeline/options.h"

namespace rill::pipeline {

/// Scalar options as a DDL WITH list gives them, each placed "option 'name'".
inline Options Opts(std::initializer_list<std::pair<const char*, const char*>> kv) {
  Options out;
  for (const auto& [k, v] : kv) {
    out.emplace_back(k, OptionValue::Scalar(v, std::string("option '") + k + "'"));
  }
  return out;
}

/// Expect `status` to be an Invalid refusal with `sqlstate` whose message
/// holds each of `parts`.
inline void ExpectRefusedWith(const Status& status, const char* sqlstate,
                              const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsInvalid()) << status.ToString();
  EXPECT_EQ(SqlStateOf(status), sqlstate) << status.ToString();
  for (const auto& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << status.message();
  }
}

}  // namespace rill::pipeline
