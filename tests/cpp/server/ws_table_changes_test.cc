// A WebSocket client's pending table changes (ws_table_changes.h): merged by
// key (last wins), bounded, split into frames.
#include "rill/server/ws_table_changes.h"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace rill::server {
namespace {

namespace json = boost::json;

WsChangeRow Row(int key, ChangeOp op, uint64_t version, int value) {
  WsChangeRow r;
  r.key = "{\"id\":" + std::to_string(key) + "}";
  r.op = op;
  r.version = version;
  r.json = "{\"id\":" + std::to_string(key) + ",\"v\":" + std::to_string(value);
  return r;
}

WsTableChanges Changes(uint64_t from, uint64_t to, std::vector<WsChangeRow> rows) {
  WsTableChanges c;
  c.from_version = from;
  c.to_version = to;
  c.table_rows = 7;
  c.rows = std::move(rows);
  return c;
}

/// "op:id=v" per row of a frame's data.
std::vector<std::string> Rows(const std::string& data) {
  std::vector<std::string> out;
  auto o = json::parse(data).as_object();
  for (auto& v : o["changes"].as_array()) {
    auto& r = v.as_object();
    out.push_back(std::string(r["_op"].as_string()) + ":" +
                  std::to_string(r["id"].to_number<int64_t>()) + "=" +
                  std::to_string(r["v"].to_number<int64_t>()));
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(WsPendingChanges, MergesByKeyWithTheLastValueAndTheOpTheClientNeeds) {
  WsPendingChanges p;
  EXPECT_EQ(p.Merge(Changes(0, 1, {Row(1, ChangeOp::kInsert, 1, 10),
                                   Row(2, ChangeOp::kUpdate, 1, 20),
                                   Row(3, ChangeOp::kUpdate, 1, 30)}),
                    100),
            0);
  EXPECT_EQ(p.Merge(Changes(1, 2, {Row(1, ChangeOp::kUpdate, 2, 11),   // insert+update: insert
                                   Row(2, ChangeOp::kDelete, 2, 20),   // update+delete: delete
                                   Row(3, ChangeOp::kUpdate, 2, 31),   // update+update: update
                                   Row(4, ChangeOp::kInsert, 2, 40)}),
                    100),
            3);
  EXPECT_EQ(p.Merge(Changes(2, 3, {Row(4, ChangeOp::kDelete, 3, 40)}), 100),
            1);  // insert+delete: never seen
  bool more = true;
  const std::string data = p.TakeFrame("t", 100, &more);
  EXPECT_FALSE(more);
  EXPECT_EQ(Rows(data), (Strings{"insert:1=11", "delete:2=20", "update:3=31"}));
  auto o = json::parse(data).as_object();
  EXPECT_EQ(o["version"].to_number<uint64_t>(), 3u);
  EXPECT_EQ(o["from_version"].to_number<uint64_t>(), 0u);
  EXPECT_EQ(o["rows"].to_number<int64_t>(), 7);
  EXPECT_EQ(p.client_version(), 3u);
  EXPECT_FALSE(p.due());
}

TEST(WsPendingChanges, GivesUpBeyondItsBoundSoThatTheClientTakesASnapshot) {
  WsPendingChanges p;
  EXPECT_EQ(p.Merge(Changes(0, 1, {Row(1, ChangeOp::kInsert, 1, 1),
                                   Row(2, ChangeOp::kInsert, 1, 2)}),
                    2),
            0);
  EXPECT_EQ(p.Merge(Changes(1, 2, {Row(3, ChangeOp::kInsert, 2, 3)}), 2), -1);
  EXPECT_EQ(p.size(), 0);
  p.Reset(5);  // the snapshot brought the client to version 5
  EXPECT_EQ(p.Merge(Changes(4, 5, {Row(9, ChangeOp::kInsert, 5, 9)}), 2), 0);
  EXPECT_FALSE(p.due());  // already in the snapshot
  EXPECT_EQ(p.Merge(Changes(5, 6, {Row(9, ChangeOp::kUpdate, 6, 10)}), 2), 0);
  bool more;
  EXPECT_EQ(Rows(p.TakeFrame("t", 10, &more)), (Strings{"update:9=10"}));
}

TEST(WsPendingChanges, SplitsRowsIntoBoundedFramesAndReachesTheVersionWithTheLast) {
  WsPendingChanges p;
  std::vector<WsChangeRow> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(Row(i, ChangeOp::kInsert, 1, i));
  EXPECT_EQ(p.Merge(Changes(0, 1, rows), 100), 0);
  bool more = false;
  EXPECT_EQ(Rows(p.TakeFrame("t", 2, &more)), (Strings{"insert:0=0", "insert:1=1"}));
  EXPECT_TRUE(more);
  EXPECT_EQ(p.client_version(), 0u);
  // A key of the rest still merges.
  EXPECT_EQ(p.Merge(Changes(1, 2, {Row(4, ChangeOp::kUpdate, 2, 44)}), 100), 1);
  EXPECT_EQ(Rows(p.TakeFrame("t", 2, &more)), (Strings{"insert:2=2", "insert:3=3"}));
  EXPECT_EQ(Rows(p.TakeFrame("t", 2, &more)), (Strings{"insert:4=44"}));
  EXPECT_FALSE(more);
  EXPECT_EQ(p.client_version(), 2u);
}

}  // namespace
}  // namespace rill::server
