// `rill query` against a scripted HTTP server on 127.0.0.1 that answers as the
// server's /api/v1/query does.
#include "query.h"

#include <string>

#include <gtest/gtest.h>

#include "server/webhook_test_receiver.h"

namespace rill::app {
namespace {

using rill::testing::ReceiverResponse;
using rill::testing::TestReceiver;

ReceiverResponse Json(int status, std::string body) {
  ReceiverResponse r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "application/json";
  return r;
}

TEST(QueryUrl, AcceptsTheAddressForms) {
  EXPECT_EQ(*QueryUrl("127.0.0.1:9494"), "http://127.0.0.1:9494/api/v1/query");
  EXPECT_EQ(*QueryUrl("quack:127.0.0.1:9494"), "http://127.0.0.1:9494/api/v1/query");
  EXPECT_EQ(*QueryUrl("quack:0.0.0.0:9494"), "http://127.0.0.1:9494/api/v1/query");
  EXPECT_EQ(*QueryUrl("localhost:1"), "http://localhost:1/api/v1/query");
  EXPECT_EQ(*QueryUrl("::1:9494"), "http://[::1]:9494/api/v1/query");
  EXPECT_EQ(*QueryUrl("http://h:8/"), "http://h:8/api/v1/query");
  EXPECT_TRUE(QueryUrl("127.0.0.1").status().IsInvalid());
  EXPECT_TRUE(QueryUrl("127.0.0.1:x").status().IsInvalid());
}

TEST(ParseJsonResult, AcceptsRowsAsArraysOrObjects) {
  auto arrays = ParseJsonResult(
      R"({"columns":[{"name":"region","type":"VARCHAR"},{"name":"n","type":"BIGINT"}],)"
      R"("rows":[["eu",3],[null,1.5e3]]})");
  ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
  EXPECT_EQ(arrays->names, (std::vector<std::string>{"region", "n"}));
  EXPECT_EQ(arrays->types, (std::vector<std::string>{"VARCHAR", "BIGINT"}));
  ASSERT_EQ(arrays->rows.size(), 2u);
  EXPECT_EQ(arrays->rows[0][0], "eu");
  EXPECT_EQ(arrays->rows[0][1], "3");
  EXPECT_FALSE(arrays->rows[1][0].has_value());

  auto objects = ParseJsonResult(R"({"rows":[{"a":1,"b":"x"},{"b":"y","a":null}]})");
  ASSERT_TRUE(objects.ok());
  EXPECT_EQ(objects->names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(objects->rows[1][1], "y");
  EXPECT_FALSE(objects->rows[1][0].has_value());

  auto nested = ParseJsonResult(R"({"columns":["l"],"rows":[[[1,2]],[{"k":true}]]})");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->rows[0][0], "[1,2]");
  EXPECT_EQ(nested->rows[1][0], "{\"k\":true}");

  EXPECT_TRUE(ParseJsonResult("{\"columns\":[]}").status().IsInvalid());
  EXPECT_TRUE(ParseJsonResult("<html>").status().IsInvalid());
}

TEST(FormatTable, AlignsColumnsAndRightAlignsNumbers) {
  QueryTable t;
  t.names = {"region", "orders", "revenue"};
  t.types = {"VARCHAR", "BIGINT", "DOUBLE"};
  t.rows = {{"us-east", "12", "1234.5"}, {"apac", std::nullopt, "7"}};
  EXPECT_EQ(FormatTable(t),
            "region  | orders | revenue\n"
            "--------+--------+--------\n"
            "us-east |     12 |  1234.5\n"
            "apac    |   NULL |       7\n"
            "(2 rows)\n");
  QueryTable one;
  one.names = {"x"};
  one.types = {""};
  one.rows = {{"abc"}};
  EXPECT_EQ(FormatTable(one), "x\n---\nabc\n(1 row)\n");
}

TEST(RunQuery, PrintsATableAndSendsTheTokenAndSql) {
  TestReceiver server({Json(200, R"({"columns":[{"name":"answer","type":"INTEGER"}],)"
                                 R"("rows":[[42]]})")});
  QueryOptions options;
  options.server = "127.0.0.1:" + std::to_string(server.port());
  options.token = "s3cret";
  options.sql = "SELECT 42 AS \"answer\"";
  std::string out;
  std::string err;
  ASSERT_EQ(RunQuery(options, &out, &err), 0) << err;
  EXPECT_EQ(out, "answer\n------\n    42\n(1 row)\n");
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/api/v1/sql");
  EXPECT_EQ(requests[0].headers["authorization"], "Bearer s3cret");
  EXPECT_EQ(requests[0].headers["content-type"], "application/json");
  EXPECT_EQ(requests[0].body, R"({"sql":"SELECT 42 AS \"answer\"","format":"json"})");
}

TEST(RunQuery, CsvAndJsonArePrintedAsTheServerSentThem) {
  TestReceiver server({{200, "a,b\n1,x\n"}, Json(200, R"({"columns":[],"rows":[]})")});
  QueryOptions options;
  options.server = "quack:127.0.0.1:" + std::to_string(server.port());
  options.sql = "SELECT 1";
  options.format = "csv";
  std::string out;
  std::string err;
  ASSERT_EQ(RunQuery(options, &out, &err), 0) << err;
  EXPECT_EQ(out, "a,b\n1,x\n");
  options.format = "json";
  ASSERT_EQ(RunQuery(options, &out, &err), 0) << err;
  EXPECT_EQ(out, "{\"columns\":[],\"rows\":[]}\n");
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].body.find(R"("format":"csv")"), std::string::npos);
  EXPECT_EQ(requests[0].headers.count("authorization"), 0u);  // no token given
}

TEST(RunQuery, ServerErrorsExitOneWithTheServerMessage) {
  TestReceiver server({Json(400, R"({"code":"invalid","message":"Parser Error: syntax error at or near \"SELEC\""})"),
                       Json(401, R"({"code":"unauthorized","message":"unauthorized"})"),
                       {500, "plain failure\n"}});
  QueryOptions options;
  options.server = "127.0.0.1:" + std::to_string(server.port());
  options.sql = "SELEC 1";
  std::string out;
  std::string err;
  EXPECT_EQ(RunQuery(options, &out, &err), 1);
  EXPECT_EQ(err, "Parser Error: syntax error at or near \"SELEC\"");
  EXPECT_EQ(RunQuery(options, &out, &err), 1);
  EXPECT_NE(err.find("RILL_TOKEN"), std::string::npos);
  EXPECT_EQ(RunQuery(options, &out, &err), 1);
  EXPECT_EQ(err, "plain failure");
}

TEST(RunQuery, UnreachableServerExitsTwo) {
  int port;
  {
    TestReceiver closed;
    port = closed.port();
  }
  QueryOptions options;
  options.server = "127.0.0.1:" + std::to_string(port);
  options.sql = "SELECT 1";
  std::string out;
  std::string err;
  EXPECT_EQ(RunQuery(options, &out, &err), 2);
  EXPECT_NE(err.find("cannot reach the rill server at 127.0.0.1:"), std::string::npos) << err;
  options.format = "xml";
  EXPECT_EQ(RunQuery(options, &out, &err), 2);
}

}  // namespace
}  // namespace rill::app
