// Client parameters as SQL literals: binary arrays (asyncpg sends lists so)
// with every count checked against the bytes present, and DuckDB's type names
// as PostgreSQL OIDs for ParameterDescription.
#include <gtest/gtest.h>

#include "pgwire_test_util.h"
#include "rill/server/pgwire/pg_types.h"

namespace rill::pgwire {
namespace {

using testing::Put32;

// A 1-D binary array of int8 elements (nullopt = NULL).
std::string Int8Array(const std::vector<std::optional<int64_t>>& values,
                      int32_t claimed = -1) {
  std::string b;
  Put32(&b, 1);                  // ndim
  Put32(&b, 0);                  // has nulls (ignored)
  Put32(&b, oid::kInt8);         // element type
  Put32(&b, claimed >= 0 ? claimed : static_cast<int32_t>(values.size()));
  Put32(&b, 1);                  // lower bound
  for (const auto& v : values) {
    if (!v) {
      Put32(&b, -1);
      continue;
    }
    Put32(&b, 8);
    for (int shift = 56; shift >= 0; shift -= 8) {
      b.push_back(static_cast<char>((static_cast<uint64_t>(*v) >> shift) & 0xff));
    }
  }
  return b;
}

TEST(PgWireParams, BinaryInt8ArrayBecomesATypedListLiteral) {
  auto literal = ParameterLiteral(Int8Array({1, std::nullopt, -3}), 1016, /*format=*/1);
  ASSERT_TRUE(literal.ok()) << literal.status().ToString();
  EXPECT_EQ(*literal, "CAST([1::BIGINT, NULL, -3::BIGINT] AS BIGINT[])");
}

TEST(PgWireParams, BinaryArrayClaimingMoreElementsThanItsBytesIsRefused) {
  auto literal = ParameterLiteral(Int8Array({1}, /*claimed=*/1 << 30), 1016, 1);
  ASSERT_FALSE(literal.ok());
  EXPECT_NE(literal.status().message().find("claims"), std::string::npos);
}

TEST(PgWireParams, TruncatedOrPaddedBinaryArraysAreRefused) {
  const std::string valid = Int8Array({7, 8});
  for (size_t cut = 0; cut < valid.size(); ++cut) {
    EXPECT_FALSE(ParameterLiteral(valid.substr(0, cut), 1016, 1).ok()) << "cut " << cut;
  }
  EXPECT_FALSE(ParameterLiteral(valid + "x", 1016, 1).ok());
}

TEST(PgWireParams, BinaryArrayOfAnotherElementTypeOrTwoDimensionsIsRefused) {
  std::string wrong = Int8Array({1});
  wrong[11] = static_cast<char>(oid::kInt4);  // element OID 23 instead of 20
  EXPECT_FALSE(ParameterLiteral(wrong, 1016, 1).ok());
  std::string two_d = Int8Array({1});
  two_d[3] = 2;
  EXPECT_TRUE(ParameterLiteral(two_d, 1016, 1).status().IsNotImplemented());
}

TEST(PgWireParams, DuckDbTypeNamesMapToPostgresOids) {
  EXPECT_EQ(PgOidForDuckType("BIGINT"), oid::kInt8);
  EXPECT_EQ(PgOidForDuckType("INTEGER"), oid::kInt4);
  EXPECT_EQ(PgOidForDuckType("DOUBLE"), oid::kFloat8);
  EXPECT_EQ(PgOidForDuckType("VARCHAR"), oid::kText);
  EXPECT_EQ(PgOidForDuckType("DECIMAL(18,3)"), oid::kNumeric);
  EXPECT_EQ(PgOidForDuckType("TIMESTAMP WITH TIME ZONE"), oid::kTimestamptz);
  EXPECT_EQ(PgOidForDuckType("INTEGER[]"), 1007);
  EXPECT_EQ(PgOidForDuckType("STRUCT(a INTEGER)"), 0);
  EXPECT_EQ(PgOidForDuckType(""), 0);
}

}  // namespace
}  // namespace rill::pgwire
